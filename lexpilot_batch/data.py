"""The LexPilot dataset: the case models, the cause-of-action → class mapping, and the loader.

The loader reads a whole dataset file, checks every rule of the schema and either returns a
complete `Dataset` or raises one `DataError` listing the problems it found (case and field
named, what was expected said; the first MAX_PROBLEMS are shown, and checking stops after
MAX_COUNTED). Nothing is ever half-loaded. Values quoted in problem lines are escaped so that
none can act on a terminal. `validate_file` backs the
`validate-data` command and returns a printable `DatasetSummary`.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, ValidationError

from lexpilot_batch import resources
from lexpilot_batch.errors import DataError

Role = Literal["user", "assistant"]
Verdict = Literal["支持", "部分支持", "驳回"]
VERDICTS: tuple[str, ...] = ("支持", "部分支持", "驳回")
ROLES: tuple[str, ...] = ("user", "assistant")
KeyDetails = Union[str, list[str], dict[str, Union[str, list[str]]]]

HISTORY_FIELDS: tuple[str, ...] = ("complete_history", "underspecified_history")
# The seed README does not name the history fields; these spellings mean the same thing and are
# renamed on load so that everything downstream sees one name.
HISTORY_ALIASES: dict[str, str] = {
    "complete_consultation": "complete_history",
    "underspecified_consultation": "underspecified_history",
}
REQUIRED_FIELDS: tuple[str, ...] = (
    "case_number",
    "cause_of_action",
    "plaintiff_type",
    "focal_point",
    "key_details",
    "result_dict",
    *HISTORY_FIELDS,
)
# A broken file can hold thousands of problems; past this many the rest is noise on screen.
MAX_PROBLEMS = 50
# Past this many problems checking stops, so that a file of millions of wrong cases fails at once,
# in bounded time and memory; below it the count stays exact.
MAX_COUNTED = 1000
# How deeply arrays and objects may nest inside one field of a case. Real cases need two levels;
# a case is stored as JSON and read back, and pydantic's JSON reader gives up near 200.
MAX_NESTING = 64
# Characters a terminal acts on, or that reorder or hide what it shows: controls (C0, DEL, C1),
# format characters (bidi overrides, zero-width ones) and the Unicode line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


class Case(BaseModel):
    """One benchmark case. Unknown extra fields are kept, not rejected."""

    model_config = ConfigDict(extra="allow")

    case_number: Union[str, int]
    cause_of_action: str
    plaintiff_type: str
    focal_point: Union[str, list[str]]
    key_details: KeyDetails
    result_dict: dict[str, Verdict]
    complete_history: list[Message]
    underspecified_history: list[Message]

    @property
    def case_id(self) -> str:
        """The case number as text: how it appears in custom_ids, manifests and result files."""
        return str(self.case_number)

    @property
    def focal_points(self) -> list[str]:
        return [self.focal_point] if isinstance(self.focal_point, str) else list(self.focal_point)

    @property
    def claims(self) -> list[str]:
        """Claim texts in `result_dict` insertion order: the order every verdict list follows."""
        return list(self.result_dict)


# --- reading JSON files ----------------------------------------------------------------------


class _JsonObject(dict):  # type: ignore[type-arg]
    """A JSON object that remembers the keys the file gave more than once.

    `json` silently keeps the last of duplicate keys; in `result_dict` that would drop a claim
    without a word, so the loader reports them instead.
    """

    duplicate_keys: list[str]


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    duplicates: list[str] = []
    for key, _ in pairs:
        if key in seen and key not in duplicates:
            duplicates.append(key)
        seen.add(key)
    marked = _JsonObject(obj)
    marked.duplicate_keys = duplicates
    return marked


def _read_json(path: Path, what: str, hint: str) -> tuple[bytes, Any]:
    """The file's bytes and parsed JSON, or one `DataError` line saying what is wrong with it."""
    if path.is_dir():
        raise DataError(f"{what} {path} is a folder; {hint}.")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{what} {path} does not exist; {hint}.") from None
    except OSError as exc:
        raise DataError(f"{what} {path} cannot be read ({exc.strerror}); {hint}.") from None
    try:
        # utf-8-sig: editors on Windows often save UTF-8 with a byte-order mark.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"{what} {path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at line {line}, "
            f"byte offset {exc.start}); save it as UTF-8 and try again."
        ) from None
    if not text.strip():
        raise DataError(f"{what} {path} is empty; {hint}.")
    try:
        data = json.loads(text, object_pairs_hook=_object_pairs)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise DataError(
                f"{what} {path} ends unexpectedly ({exc.msg} at {where}): the file looks "
                "truncated; copy or download it again."
            ) from None
        raise DataError(
            f"{what} {path} is not valid JSON: {exc.msg} at {where}; fix the file there."
        ) from None
    except RecursionError:
        raise DataError(
            f"{what} {path} nests arrays or objects too deeply to be read; it is not a "
            "LexPilot file, or it is corrupted."
        ) from None
    return raw, data


# --- text safe to print ---------------------------------------------------------------------


def has_unsafe_characters(text: str) -> bool:
    """Whether printing `text` could move the cursor, drive the terminal or reorder the line."""
    return any(unicodedata.category(ch) in _UNSAFE_CATEGORIES for ch in text)


def terminal_safe(text: str) -> str:
    """`text` with each character `has_unsafe_characters` looks for written as its JSON escape."""
    if not has_unsafe_characters(text):
        return text
    return "".join(
        json.dumps(ch)[1:-1] if unicodedata.category(ch) in _UNSAFE_CATEGORIES else ch for ch in text
    )


def _kind(value: Any) -> str:
    """A JSON value's type, as a reader of the JSON file would name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _show(value: Any, limit: int = 40) -> str:
    """A short JSON rendering of a value for a problem line, safe to print."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = _kind(value)
    return terminal_safe(text if len(text) <= limit else text[: limit - 1] + "…")


def _key_path(name: str, key: str) -> str:
    return f"{name}[{_show(key, 32)}]"


# --- collecting problems -------------------------------------------------------------------


class _TooManyProblems(Exception):
    """Raised by `_Problems.add` at MAX_COUNTED problems: the rest of the file is not checked."""


class _Problems:
    """The problems found in one file: the first MAX_PROBLEMS kept as lines, the others counted."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0
        self.stopped_at: str | None = None  # where checking stopped, once MAX_COUNTED were found

    def __bool__(self) -> bool:
        return self.count > 0

    def add(self, line: str) -> None:
        self.count += 1
        if len(self.lines) < MAX_PROBLEMS:
            # Lines quote the file's own keys and values: none of them may act on the terminal.
            self.lines.append(terminal_safe(line))
        if self.count >= MAX_COUNTED:
            raise _TooManyProblems

    def listed(self) -> list[str]:
        """The lines to show, with one more saying what was left out."""
        hidden = self.count - len(self.lines)
        if self.stopped_at:
            stopped = f"checking stopped at {self.stopped_at}, so the rest of the file was not checked"
            return [*self.lines, f"… and {hidden} more problems; {stopped}"]
        return [*self.lines, f"… and {hidden} more problems"] if hidden else list(self.lines)


# --- categories ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Categories:
    path: Path
    class_names: tuple[str, ...]
    cause_to_class: dict[str, str]


def _default_path(locate: Callable[[], Path], what: str) -> Path:
    try:
        return Path(locate())
    except FileNotFoundError:
        raise DataError(
            f"The bundled {what} is missing (no data folder found); reinstall lexpilot-batch "
            "or pass the file explicitly."
        ) from None


def _read_categories(path: Path | None) -> _Categories:
    hint = "pass a JSON object {class name: [cause of action, ...]} with --categories FILE"
    if path is None:
        path = _default_path(resources.default_categories, "categories file")
        hint = f"the bundled mapping is missing, reinstall lexpilot-batch or {hint}"
    path = Path(path)
    _, data = _read_json(path, "Categories file", hint)
    if not isinstance(data, dict) or not data:
        shape = "an empty object" if isinstance(data, dict) else _kind(data)
        raise DataError(
            f"Categories file {path} holds {shape}; expected a JSON object "
            '{"class name": ["cause of action", ...], ...}. Fix it or pass another with '
            "--categories FILE."
        )
    problems = _Problems()
    cause_to_class: dict[str, str] = {}
    class_name = ""
    try:
        for key in getattr(data, "duplicate_keys", []):
            problems.add(f"class {_show(key)} appears more than once; merge its causes in one list")
        for class_name, causes in data.items():
            if not class_name.strip():
                problems.add("a class has an empty name; give every class a name")
            if not isinstance(causes, list):
                problems.add(f"class {_show(class_name)}: is {_kind(causes)}; expected an array of causes")
                continue
            for i, cause in enumerate(causes):
                if not isinstance(cause, str) or not cause.strip():
                    problems.add(
                        f"class {_show(class_name)}[{i}]: is {_show(cause)}; expected a non-empty "
                        "cause-of-action string"
                    )
                    continue
                other = cause_to_class.get(cause)
                if other is not None and other != class_name:
                    problems.add(
                        f"cause {_show(cause)} is listed under both {_show(other)} and "
                        f"{_show(class_name)}; keep it under one class"
                    )
                    continue
                cause_to_class[cause] = class_name
    except _TooManyProblems:
        problems.stopped_at = f"class {_show(class_name)}" if class_name else "the repeated class names"
    if problems:
        raise DataError(
            f"Categories file {path} is invalid; fix it or pass another with --categories FILE.",
            problems.listed(),
        )
    return _Categories(path, tuple(data), cause_to_class)


def load_categories(path: Path | None = None) -> dict[str, str]:
    """Cause of action → class name, from a JSON object `{class name: [cause, ...]}`.

    `None` reads the bundled mapping. Raises `DataError` when the file is missing, not JSON, of
    the wrong shape, or lists one cause under two classes.
    """
    return dict(_read_categories(path).cause_to_class)


# --- validating cases ------------------------------------------------------------------------


def _valid_case_number(value: Any) -> bool:
    # bool is an int subclass in Python; `true` is no case number.
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    # Case numbers are printed in every problem line, status and report: none may drive a terminal.
    return isinstance(value, str) and bool(value.strip()) and not has_unsafe_characters(value)


def case_label(index: int, raw: Any) -> str:
    """How problem lines name a case: its position (from 1) and, when usable, its number."""
    number = raw.get("case_number") if isinstance(raw, dict) else None
    if not _valid_case_number(number):
        return f"case #{index}"
    text = str(number)
    return f"case #{index} (case_number {text if len(text) <= 40 else text[:39] + '…'})"


class _CaseCheck:
    """Collects the problems of one case, each prefixed with the case's label and field path."""

    def __init__(self, label: str, problems: _Problems) -> None:
        self.label = label
        self.problems = problems

    def add(self, path: str, text: str) -> None:
        self.problems.add(f"{self.label}: {path}: {text}" if path else f"{self.label}: {text}")

    def duplicates(self, path: str, obj: Any) -> None:
        for key in getattr(obj, "duplicate_keys", []):
            what = "key" if path else "field"
            self.add(path, f"{what} {_show(key)} appears more than once; give it only once")


def _check_text(check: _CaseCheck, path: str, value: Any, expected: str) -> bool:
    if not isinstance(value, str):
        check.add(path, f"is {_kind(value)}; expected {expected}")
        return False
    if not value.strip():
        check.add(path, f"is {'empty' if not value else 'whitespace only'}; expected {expected}")
        return False
    return True


def _check_text_list(check: _CaseCheck, path: str, value: list[Any], expected: str) -> None:
    if not value:
        check.add(path, f"is an empty array; expected at least one {expected}")
    for i, item in enumerate(value):
        _check_text(check, f"{path}[{i}]", item, f"a non-empty {expected}")


def _check_focal_point(check: _CaseCheck, value: Any) -> None:
    if isinstance(value, list):
        _check_text_list(check, "focal_point", value, "focal-point string")
    else:
        expected = "the focal point as a non-empty string, or an array of them"
        _check_text(check, "focal_point", value, expected)


def _check_key_details(check: _CaseCheck, value: Any) -> None:
    expected = "a non-empty string, an array of strings, or an object {focal point: details}"
    if isinstance(value, list):
        _check_text_list(check, "key_details", value, "detail string")
    elif isinstance(value, dict):
        check.duplicates("key_details", value)
        if not value:
            check.add("key_details", f"is an empty object; expected {expected}")
        for key, details in value.items():
            path = _key_path("key_details", key)
            if not key.strip():
                check.add(path, "has an empty focal-point key; name the focal point")
            if isinstance(details, list):
                _check_text_list(check, path, details, "detail string")
            else:
                _check_text(check, path, details, "a non-empty string or an array of strings")
    else:
        _check_text(check, "key_details", value, expected)


def _check_result_dict(check: _CaseCheck, value: Any) -> None:
    labels = " / ".join(VERDICTS)
    if not isinstance(value, dict):
        check.add("result_dict", f"is {_kind(value)}; expected an object {{claim text: {labels}}}")
        return
    check.duplicates("result_dict", value)
    if not value:
        check.add("result_dict", "is empty; a case needs at least one claim with its verdict")
    for claim, verdict in value.items():
        path = _key_path("result_dict", claim)
        if not claim.strip():
            check.add(path, "has an empty claim text; write the claim as the key")
        if verdict not in VERDICTS:
            check.add(path, f"verdict is {_show(verdict)}; expected one of {labels}")


def _check_history(check: _CaseCheck, name: str, value: Any) -> int | None:
    """Check one history; return its length when it is an array at all."""
    if not isinstance(value, list):
        check.add(name, f"is {_kind(value)}; expected an array of {{role, content}} messages")
        return None
    if not value:
        check.add(name, "is empty; a history needs at least one user message")
        return 0
    roles: list[str | None] = []
    for i, message in enumerate(value):
        path = f"{name}[{i}]"
        if not isinstance(message, dict):
            check.add(path, f'is {_kind(message)}; expected {{"role": ..., "content": ...}}')
            roles.append(None)
            continue
        check.duplicates(path, message)
        role = message.get("role")
        if "role" not in message:
            check.add(path, f"has no role; it has fields: {', '.join(message) or 'none'}")
        elif role not in ROLES:
            check.add(f"{path}.role", f'is {_show(role)}; expected "user" or "assistant"')
        roles.append(role if role in ROLES else None)
        if "content" not in message:
            check.add(path, f"has no content; it has fields: {', '.join(message) or 'none'}")
        else:
            _check_text(check, f"{path}.content", message["content"], "the message text")
    if roles[0] == "assistant":
        check.add(f"{name}[0].role", 'is "assistant"; a history must start with a user message')
    for i in range(1, len(roles)):
        if roles[i] is not None and roles[i] == roles[i - 1]:
            check.add(
                f"{name}[{i}].role",
                f'is "{roles[i]}" right after another "{roles[i]}" message; roles must alternate '
                "user/assistant",
            )
    last = len(roles) - 1
    if last > 0 and roles[last] == "assistant":
        check.add(
            f"{name}[{last}].role",
            'is "assistant"; a history must end with a user message (the next turn is the '
            "model's)",
        )
    return len(value)


def _normalise_aliases(check: _CaseCheck, raw: dict[str, Any]) -> dict[str, Any]:
    """The case with alias history fields renamed, keeping the file's field order."""
    record: dict[str, Any] = {}
    for key, value in raw.items():
        canonical = HISTORY_ALIASES.get(key)
        if canonical is None:
            record[key] = value
        elif canonical in raw:
            check.add("", f"has both {canonical} and its alias {key}; keep only one of them")
        else:
            record[canonical] = value
    return record


def _too_deep(value: Any) -> bool:
    """Whether arrays and objects nest more than MAX_NESTING levels in `value` (read level by level:
    no recursion, and no further than one level past the bound)."""
    level = [value]
    for _ in range(MAX_NESTING + 1):
        containers = [v for v in level if isinstance(v, (list, dict))]
        if not containers:
            return False
        level = [child for c in containers for child in (c.values() if isinstance(c, dict) else c)]
    return True


def _check_case(check: _CaseCheck, raw: dict[str, Any]) -> dict[str, Any]:
    """Check every rule on one case object; return it with aliases normalised."""
    check.duplicates("", raw)
    record = _normalise_aliases(check, raw)
    for name, value in record.items():
        if _too_deep(value):
            check.add(
                name,
                f"nests arrays or objects more than {MAX_NESTING} levels deep; a case is stored as JSON "
                "and read back, which fails that deep: flatten it",
            )
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        aliases = [a for a, c in HISTORY_ALIASES.items() if c in missing]
        also = f" (also accepted: {', '.join(aliases)})" if aliases else ""
        check.add(
            "",
            f"missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)}{also}; "
            f"the case has fields: {', '.join(raw) or 'none'}",
        )
    number = record.get("case_number")
    if "case_number" in record and not _valid_case_number(number):
        if isinstance(number, str) and number.strip():
            check.add(
                "case_number",
                f"is {_show(number)}, which holds control or invisible formatting characters (shown "
                "escaped); remove them",
            )
        else:
            check.add("case_number", f"is {_show(number)}; expected a non-empty string or an integer")
    if "cause_of_action" in record:
        _check_text(check, "cause_of_action", record["cause_of_action"], "the cause of action")
    if "plaintiff_type" in record and not isinstance(record["plaintiff_type"], str):
        # Only the type is checked: no protocol reads it, and real data may leave it blank.
        check.add("plaintiff_type", f"is {_kind(record['plaintiff_type'])}; expected a string")
    if "focal_point" in record:
        _check_focal_point(check, record["focal_point"])
    if "key_details" in record:
        _check_key_details(check, record["key_details"])
    if "result_dict" in record:
        _check_result_dict(check, record["result_dict"])
    lengths = {
        name: _check_history(check, name, record[name]) for name in HISTORY_FIELDS if name in record
    }
    complete, under = lengths.get("complete_history"), lengths.get("underspecified_history")
    if complete and under and complete != under:
        check.add(
            "underspecified_history",
            f"has {under} messages but complete_history has {complete}; both histories of a "
            "case must have the same number of messages",
        )
    return record


def _unmapped_problem(unmapped: dict[str, list[str]], categories: _Categories) -> str:
    """One problem listing every unmapped cause and the cases using it."""
    shown_cases = 5
    lines = [
        f"cause_of_action: {len(unmapped)} cause{'s' if len(unmapped) > 1 else ''} of action "
        f"{'are' if len(unmapped) > 1 else 'is'} not in the categories mapping "
        f"{categories.path}; add each to one of its classes ({', '.join(categories.class_names)}) "
        "or pass another mapping with --categories FILE:"
    ]
    mapped_stripped = {cause.strip(): cause for cause in categories.cause_to_class}
    for cause, labels in unmapped.items():
        used = ", ".join(labels[:shown_cases])
        if len(labels) > shown_cases:
            used += f", and {len(labels) - shown_cases} more cases"
        near = mapped_stripped.get(cause.strip())
        hint = f" (differs from the mapped {_show(near)} only in spaces)" if near else ""
        lines.append(f"    {_show(cause)}{hint}: {used}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Dataset:
    """A fully validated dataset file and the cause-class mapping it was checked against."""

    path: Path
    sha256: str
    cases: list[Case]
    classes: dict[str, str]  # cause of action -> class name
    class_names: tuple[str, ...] = ()  # every class of the mapping, in the mapping's order
    categories_path: Path | None = None
    _by_id: dict[str, Case] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {case.case_id: case for case in self.cases})
        if not self.class_names:
            object.__setattr__(self, "class_names", tuple(dict.fromkeys(self.classes.values())))

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def class_of(self, case: Case) -> str:
        """The cause class of a case (every cause is mapped: loading checked it)."""
        return self.classes[case.cause_of_action]

    def case(self, case_id: str | int) -> Case:
        """The case with this case number, compared as text."""
        try:
            return self._by_id[str(case_id)]
        except KeyError:
            raise DataError(f"Dataset {self.path} has no case numbered {case_id}.") from None

    @property
    def case_ids(self) -> list[str]:
        """Every case number as text, in file order."""
        return [case.case_id for case in self.cases]


def load_dataset(path: Path | None = None, categories: Path | None = None) -> Dataset:
    """Read and validate a whole dataset file against the schema and the cause-class mapping.

    `None` reads the bundled sample and the bundled mapping. Returns a complete `Dataset` or
    raises one `DataError` whose problems name every case and field at fault. Besides the schema, a
    case_number may hold no control or formatting characters, and no field may nest arrays and
    objects more than MAX_NESTING levels deep.
    """
    cats = _read_categories(categories)
    hint = "pass a LexPilot JSON file with --dataset FILE"
    if path is None:
        path = _default_path(resources.sample_dataset, "sample dataset")
        hint = f"the bundled sample is missing, reinstall lexpilot-batch or {hint}"
    path = Path(path)
    raw_bytes, data = _read_json(path, "Dataset file", hint)
    if not isinstance(data, list):
        raise DataError(
            f"Dataset file {path} holds {_kind(data)} at the top level; expected a JSON array "
            "of case objects ([{\"case_number\": ..., ...}, ...])."
        )
    if not data:
        raise DataError(f"Dataset file {path} is an empty array; it needs at least one case.")

    problems = _Problems()
    records: list[tuple[_CaseCheck, dict[str, Any]]] = []
    first_with_number: dict[str, str] = {}
    unmapped: dict[str, list[str]] = {}
    try:
        for index, raw in enumerate(data, 1):
            check = _CaseCheck(case_label(index, raw), problems)
            if not isinstance(raw, dict):
                check.add("", f"is {_kind(raw)}; expected an object with the case's fields")
                continue
            record = _check_case(check, raw)
            number = record.get("case_number")
            if _valid_case_number(number):
                # Compared as text: 12 and "12" both become "12" in custom_ids and result files.
                key = str(number)
                if key in first_with_number:
                    check.add(
                        "case_number",
                        f"duplicates {first_with_number[key]}; case numbers must be unique "
                        "(12 and \"12\" count as the same)",
                    )
                else:
                    first_with_number[key] = check.label
            cause = record.get("cause_of_action")
            if isinstance(cause, str) and cause.strip() and cause not in cats.cause_to_class:
                unmapped.setdefault(cause, []).append(check.label)
            records.append((check, record))

        if not problems and not unmapped:
            cases: list[Case] = []
            for check, record in records:
                try:
                    cases.append(Case.model_validate(record))
                except ValidationError as exc:
                    # The checks above should have caught everything; this keeps a gap in them
                    # from ever surfacing as a pydantic traceback.
                    for error in exc.errors():
                        loc = ".".join(str(part) for part in error["loc"])
                        check.add(loc, error["msg"])
            if not problems:
                return Dataset(
                    path=path,
                    sha256=hashlib.sha256(raw_bytes).hexdigest(),
                    cases=cases,
                    classes=dict(cats.cause_to_class),
                    class_names=cats.class_names,
                    categories_path=cats.path,
                )
    except _TooManyProblems:
        problems.stopped_at = check.label

    total = problems.count + (1 if unmapped else 0)
    listed = problems.listed()
    if unmapped:
        # Kept out of the cap: the user needs every unmapped cause to fix the mapping at once.
        listed = [*listed, _unmapped_problem(unmapped, cats)]
    raise DataError(
        f"Dataset file {path} is invalid: {'at least ' if problems.stopped_at else ''}{total} "
        f"problem{'s' if total != 1 else ''}, nothing was loaded (cases are counted from 1 in file "
        f"order). Fix them and run `lexpilot-batch validate-data --dataset {path}` again.",
        listed,
    )


# --- summary ---------------------------------------------------------------------------------


def _width(text: str) -> int:
    """Terminal columns: Chinese characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


@dataclass(frozen=True)
class DatasetSummary:
    """What `validate-data` prints about a valid dataset."""

    path: Path
    sha256: str
    categories_path: Path | None
    n_cases: int
    n_histories: int  # complete + underspecified: twice the cases
    messages_min: int
    messages_median: float
    messages_max: int
    n_causes: int
    cases_per_class: dict[str, int]  # every class of the mapping, zeros included
    claims_per_verdict: dict[str, int]  # 支持 / 部分支持 / 驳回, in that order

    @classmethod
    def of(cls, dataset: Dataset) -> DatasetSummary:
        lengths = [
            len(history)
            for case in dataset.cases
            for history in (case.complete_history, case.underspecified_history)
        ]
        per_class = Counter(dataset.class_of(case) for case in dataset.cases)
        verdicts = Counter(v for case in dataset.cases for v in case.result_dict.values())
        return cls(
            path=dataset.path,
            sha256=dataset.sha256,
            categories_path=dataset.categories_path,
            n_cases=len(dataset.cases),
            n_histories=len(lengths),
            messages_min=min(lengths),
            messages_median=statistics.median(lengths),
            messages_max=max(lengths),
            n_causes=len({case.cause_of_action for case in dataset.cases}),
            cases_per_class={name: per_class.get(name, 0) for name in dataset.class_names},
            claims_per_verdict={v: verdicts.get(v, 0) for v in VERDICTS},
        )

    def render(self) -> str:
        def table(rows: dict[str, int], total_label: str) -> list[str]:
            items = [*rows.items(), (total_label, sum(rows.values()))]
            key_width = max(_width(k) for k, _ in items) + 2
            num_width = max(len(str(n)) for _, n in items)
            return [f"  {_pad(k, key_width)}{n:>{num_width}}" for k, n in items]

        median = f"{self.messages_median:g}"
        lines = [
            f"Dataset      {self.path}",
            f"SHA-256      {self.sha256[:12]}",
        ]
        if self.categories_path is not None:
            lines.append(f"Categories   {self.categories_path}")
        lines += [
            f"Cases        {self.n_cases}",
            f"Histories    {self.n_histories} ({self.n_cases} complete + {self.n_cases} "
            "underspecified)",
            f"Messages     min {self.messages_min}, median {median}, max {self.messages_max} "
            "per history",
            f"Causes       {self.n_causes} distinct causes of action",
            "",
            "Cases per class",
            *table(self.cases_per_class, "total"),
            "",
            "Claims per verdict",
            *table(self.claims_per_verdict, "total"),
            "",
            "valid",
        ]
        return "\n".join(lines)


def summarize(dataset: Dataset) -> DatasetSummary:
    return DatasetSummary.of(dataset)


def validate_file(dataset: Path | None = None, categories: Path | None = None) -> DatasetSummary:
    """Load and validate a dataset file (raises `DataError`) and summarise it for the terminal."""
    return summarize(load_dataset(dataset, categories))
