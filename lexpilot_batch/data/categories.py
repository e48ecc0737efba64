"""The cause-of-action → class mapping: reading and checking a categories file, and its identity.

A categories file is a JSON object `{class name: [cause of action, ...]}`; keys that start with
`$` are notes about the mapping (its source, the classes' definitions), not classes. A mapping's
identity (`Categories.sha256`) is the cause → class function it defines: the order of classes and
causes, the notes and the file's formatting do not change it, moving one cause to another class
does. It joins each run's manifest, so runs of different mappings are never pooled.

Also the one problem line listing a dataset's causes that the mapping does not hold.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from lexpilot_batch.data.jsonfile import default_path, read_json
from lexpilot_batch.data.problems import Problems, TooManyProblems, kind, show
from lexpilot_batch.errors import DataError
from lexpilot_batch.util import resources


@dataclass(frozen=True)
class Categories:
    """A checked categories file: its classes in order, and the class of every cause it lists."""

    path: Path
    class_names: tuple[str, ...]
    cause_to_class: dict[str, str]

    @property
    def sha256(self) -> str:
        return mapping_sha256(self.cause_to_class)


# Keys of a categories file that are notes, not classes: `{"$comment": "...", "$classes": {...}}`.
NOTE_PREFIX = "$"


def mapping_sha256(cause_to_class: dict[str, str]) -> str:
    """The identity of a mapping: the SHA-256 of its cause → class pairs, sorted."""
    pairs = sorted(cause_to_class.items())
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()


def grouped(cause_to_class: dict[str, str], class_names: tuple[str, ...]) -> dict[str, list[str]]:
    """`{class: [cause, ...]}` for every class in `class_names`, causes in the mapping's order,
    without the notes: what a workspace stores of a run's mapping."""
    out: dict[str, list[str]] = {name: [] for name in class_names}
    for cause, name in cause_to_class.items():
        out.setdefault(name, []).append(cause)
    return out


def read_categories(path: Path | None) -> Categories:
    hint = "pass a JSON object {class name: [cause of action, ...]} with --categories FILE"
    if path is None:
        path = default_path(resources.default_categories, "categories file")
        hint = f"the bundled mapping is missing, reinstall lexpilot-batch or {hint}"
    path = Path(path)
    _, data = read_json(path, "Categories file", hint)
    if not isinstance(data, dict) or not data:
        shape = "an empty object" if isinstance(data, dict) else kind(data)
        raise DataError(
            f"Categories file {path} holds {shape}; expected a JSON object "
            '{"class name": ["cause of action", ...], ...}. Fix it or pass another with '
            "--categories FILE."
        )
    problems = Problems()
    cause_to_class: dict[str, str] = {}
    class_name = ""
    try:
        for key in getattr(data, "duplicate_keys", []):
            problems.add(f"class {show(key)} appears more than once; merge its causes in one list")
        for class_name, causes in data.items():
            if class_name.startswith(NOTE_PREFIX):
                continue
            if not class_name.strip():
                problems.add("a class has an empty name; give every class a name")
            if not isinstance(causes, list):
                problems.add(f"class {show(class_name)}: is {kind(causes)}; expected an array of causes")
                continue
            for i, cause in enumerate(causes):
                if not isinstance(cause, str) or not cause.strip():
                    problems.add(
                        f"class {show(class_name)}[{i}]: is {show(cause)}; expected a non-empty cause-of-action string"
                    )
                    continue
                other = cause_to_class.get(cause)
                if other is not None and other != class_name:
                    problems.add(
                        f"cause {show(cause)} is listed under both {show(other)} and "
                        f"{show(class_name)}; keep it under one class"
                    )
                    continue
                cause_to_class[cause] = class_name
    except TooManyProblems:
        problems.stopped_at = f"class {show(class_name)}" if class_name else "the repeated class names"
    if problems:
        raise DataError(
            f"Categories file {path} is invalid; fix it or pass another with --categories FILE.",
            problems.listed(),
        )
    class_names = tuple(name for name in data if not name.startswith(NOTE_PREFIX))
    if not class_names:
        raise DataError(
            f"Categories file {path} has no class, only notes ({', '.join(map(show, data))}); add "
            '{"class name": ["cause of action", ...]} entries or pass another file with --categories FILE.'
        )
    return Categories(path, class_names, cause_to_class)


def load_categories(path: Path | None = None) -> dict[str, str]:
    """Cause of action → class name, from a JSON object `{class name: [cause, ...]}`.

    `None` reads the bundled mapping. Raises `DataError` when the file is missing, not JSON, of
    the wrong shape, or lists one cause under two classes.
    """
    return dict(read_categories(path).cause_to_class)


def _is_bundled(path: Path) -> bool:
    try:
        return Path(path).resolve() == Path(resources.default_categories()).resolve()
    except (FileNotFoundError, OSError):
        return False


def unmapped_problem(unmapped: dict[str, list[str]], categories: Categories) -> str:
    """One problem listing every unmapped cause and the cases using it."""
    shown_cases = 5
    if _is_bundled(categories.path):
        # The bundled file lives inside the installed package: an edit there is lost on upgrade
        # and changes every other workspace's mapping.
        fix = (
            f"copy the bundled mapping ({categories.path}) to a file of your own, add each to one of its "
            f"classes ({', '.join(categories.class_names)}) there, and pass it with --categories FILE:"
        )
    else:
        fix = (
            f"add each to one of its classes ({', '.join(categories.class_names)}) or pass another mapping "
            "with --categories FILE:"
        )
    lines = [
        f"cause_of_action: {len(unmapped)} cause{'s' if len(unmapped) > 1 else ''} of action "
        f"{'are' if len(unmapped) > 1 else 'is'} not in the categories mapping {categories.path}; {fix}"
    ]
    mapped_stripped = {cause.strip(): cause for cause in categories.cause_to_class}
    for cause, labels in unmapped.items():
        used = ", ".join(labels[:shown_cases])
        if len(labels) > shown_cases:
            used += f", and {len(labels) - shown_cases} more cases"
        near = mapped_stripped.get(cause.strip())
        hint = f" (differs from the mapped {show(near)} only in spaces)" if near else ""
        lines.append(f"    {show(cause)}{hint}: {used}")
    return "\n".join(lines)
