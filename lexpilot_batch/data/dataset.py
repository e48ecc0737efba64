"""Dataset files: validating one against the schema and the mapping, and holding what it holds.

`scan` reads and checks the file once; `load_dataset` keeps every case in memory (`Dataset`),
`open_dataset` keeps only what is small and reads the cases again when they are copied
(`DatasetFile`). Each takes a local path or a file of a Hugging Face dataset (`hub.HubFile`),
downloaded into the library's cache first and then read from there as a local file is.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lexpilot_batch.data.categories import mapping_sha256, read_categories, unmapped_problem
from lexpilot_batch.data.checks import CaseCheck, case_label, check_case, normalise_aliases, valid_case_number
from lexpilot_batch.data.hub import HubDownload, HubFile, download
from lexpilot_batch.data.jsonfile import default_path
from lexpilot_batch.data.problems import Problems, TooManyProblems, kind
from lexpilot_batch.data.schema import Case
from lexpilot_batch.data.stream import CHUNK_SIZE, CaseStream, changed_while_read
from lexpilot_batch.errors import DataError
from lexpilot_batch.util import resources

# What a problem reading a dataset file tells the user to do.
_HINT = "pass a LexPilot JSON file with --dataset FILE"
# What the report, `status` and the export say of a run of the bundled sample.
SAMPLE_NOTE = (
    "dataset: the bundled sample (data/sample_cases.json), not a user-supplied dataset: "
    "a demonstration of the tool, not LexPilot benchmark results"
)


@dataclass(frozen=True)
class DatasetFile:
    """A dataset file validated whole whose cases stay in the file; what is small is kept.

    `read_cases` reads the cases again, refusing a file that no longer has the bytes it had.
    """

    path: Path
    sha256: str
    case_ids: tuple[str, ...]  # every case number as text, in file order
    case_classes: tuple[str, ...]  # the cause class of every case, in file order
    classes: dict[str, str]  # cause of action -> class name
    class_names: tuple[str, ...]  # every class of the mapping, in the mapping's order
    categories_path: Path | None = None
    # Per case, task -> the names of its threads, for the tasks `open_dataset` was given.
    variants: tuple[Mapping[str, tuple[str, ...]], ...] = ()
    chunk_size: int = field(default=CHUNK_SIZE, repr=False, compare=False)
    hub: HubDownload | None = None  # a Hugging Face dataset's file: `path` is its copy in the cache

    def __len__(self) -> int:
        return len(self.case_ids)

    @property
    def source(self) -> str:
        """What the user named: the `hf://` URL of a Hub dataset, the path of a local file."""
        return self.hub.file.url if self.hub is not None else str(self.path)

    @property
    def categories_sha256(self) -> str:
        """The identity of the cause-class mapping the cases were classed with (`mapping_sha256`)."""
        return mapping_sha256(self.classes)

    @property
    def is_bundled_sample(self) -> bool:
        """Whether this is the bundled 18-case sample, byte for byte, wherever the file lies."""
        return self.sha256 == bundled_sample_sha256()

    def read_cases(self, limit: int | None = None) -> Generator[Case, None, None]:
        """The first `limit` cases (every case with `None`) in file order, read from the file again.

        Raises `DataError` if the file is not the one that was validated any more. That is known
        only once its last byte is read, after the last case: write what this yields inside a
        transaction, so that such a file leaves nothing behind.
        """
        wanted = len(self) if limit is None else min(limit, len(self))
        stream = CaseStream(self.path, _HINT, self.chunk_size)
        elements = iter(stream)
        read = 0
        try:
            for index, raw in zip(range(wanted), elements, strict=False):
                case = _case_again(raw)
                if case is None or case.case_id != self.case_ids[index]:
                    break
                yield case
                read += 1
            stream.skip_rest()
        except DataError as exc:  # no JSON array, or no UTF-8, any more
            raise changed_while_read(self.path, exc.args[0]) from None
        finally:
            elements.close()
        if read < wanted or stream.sha256 != self.sha256:
            raise changed_while_read(self.path)


@functools.lru_cache(maxsize=1)
def bundled_sample_sha256() -> str | None:
    """The SHA-256 of the bundled sample dataset, or None when it is missing (a broken install)."""
    try:
        return hashlib.sha256(resources.sample_dataset().read_bytes()).hexdigest()
    except OSError:  # FileNotFoundError included
        return None


def _case_again(raw: Any) -> Case | None:
    """A case of a file validated before, or None when the file no longer holds a valid case there."""
    if not isinstance(raw, dict):
        return None
    try:
        # Checked already: only the history aliases need renaming.
        return Case.model_validate(normalise_aliases(CaseCheck("", Problems()), raw))
    except ValidationError:
        return None


@dataclass(frozen=True)
class Dataset:
    """A fully validated dataset file with every case in memory, and the cause-class mapping."""

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


def scan(
    path: Path | HubFile | None, categories: Path | None, on_case: Callable[[Case, str], None], chunk_size: int
) -> DatasetFile:
    """Read a dataset file once, in chunks, checking every case against the schema and the mapping.

    `on_case(case, class)` sees the cases in file order as long as no problem is found; they are
    valid only if this returns. Raises one `DataError` naming every problem otherwise. A Hub file
    is downloaded first (`hub.download`) and its problems are said of its URL and commit.
    """
    if isinstance(path, HubFile):
        hub = download(path)
        try:
            return replace(scan(hub.path, categories, on_case, chunk_size), hub=hub)
        except DataError as exc:
            raise DataError(f"{hub.label}, cached as {hub.path}: {exc.args[0]}", exc.problems) from None
    cats = read_categories(categories)
    hint = _HINT
    if path is None:
        path = default_path(resources.sample_dataset, "sample dataset")
        hint = f"the bundled sample is missing, reinstall lexpilot-batch or {hint}"
    path = Path(path)
    stream = CaseStream(path, hint, chunk_size)
    elements = iter(stream)
    problems = Problems()
    first_with_number: dict[str, str] = {}
    unmapped: dict[str, list[str]] = {}
    case_ids: list[str] = []
    case_classes: list[str] = []
    index = 0
    try:
        for index, raw in enumerate(elements, 1):
            check = CaseCheck(case_label(index, raw), problems)
            if not isinstance(raw, dict):
                check.add("", f"is {kind(raw)}; expected an object with the case's fields")
                continue
            record = check_case(check, raw)
            number = record.get("case_number")
            if valid_case_number(number):
                # Compared as text: 12 and "12" both become "12" in custom_ids and result files.
                key = str(number)
                if key in first_with_number:
                    check.add(
                        "case_number",
                        f"duplicates {first_with_number[key]}; case numbers must be unique "
                        '(12 and "12" count as the same)',
                    )
                else:
                    first_with_number[key] = check.label
            cause = record.get("cause_of_action")
            if isinstance(cause, str) and cause.strip() and cause not in cats.cause_to_class:
                unmapped.setdefault(cause, []).append(check.label)
            if problems or unmapped:
                continue  # nothing will be loaded: the cases left are only checked
            try:
                case = Case.model_validate(record)
            except ValidationError as exc:
                # The checks above should have caught everything; this keeps a gap in them
                # from ever surfacing as a pydantic traceback.
                for error in exc.errors():
                    check.add(".".join(str(part) for part in error["loc"]), error["msg"])
                continue
            cause_class = cats.cause_to_class[case.cause_of_action]
            case_ids.append(case.case_id)
            case_classes.append(cause_class)
            on_case(case, cause_class)
    except TooManyProblems:
        problems.stopped_at = check.label
        for _ in elements:
            pass  # parsed, not checked: a JSON fault or a byte not UTF-8 further on still comes first

    if index == 0:
        raise DataError(f"Dataset file {path} is an empty array; it needs at least one case.")
    if problems or unmapped:
        again = f"lexpilot-batch validate-data --dataset {path}" + (
            f" --categories {categories}" if categories is not None else ""
        )
        if not problems:
            # The cases are fine: the mapping lacks their causes, so it is the file to fix.
            raise DataError(
                f"Categories file {cats.path} does not cover dataset file {path}: nothing was loaded. "
                f"Add the causes below to the mapping (or pass another with --categories FILE) and run "
                f"`{again}` again.",
                [unmapped_problem(unmapped, cats)],
            )
        total = problems.count + (1 if unmapped else 0)
        listed = problems.listed()
        if unmapped:
            # Kept out of the cap: the user needs every unmapped cause to fix the mapping at once.
            listed = [*listed, unmapped_problem(unmapped, cats)]
        raise DataError(
            f"Dataset file {path} is invalid: {'at least ' if problems.stopped_at else ''}{total} "
            f"problem{'s' if total != 1 else ''}, nothing was loaded (cases are counted from 1 in "
            f"file order). Fix them and run `{again}` again.",
            listed,
        )
    return DatasetFile(
        path=path,
        sha256=stream.sha256,
        case_ids=tuple(case_ids),
        case_classes=tuple(case_classes),
        classes=dict(cats.cause_to_class),
        class_names=cats.class_names,
        categories_path=cats.path,
        chunk_size=chunk_size,
    )


def load_dataset(path: Path | HubFile | None = None, categories: Path | None = None) -> Dataset:
    """Read and validate a whole dataset file against the schema and the cause-class mapping.

    `None` reads the bundled sample and the bundled mapping. Returns a complete `Dataset` or
    raises one `DataError` whose problems name every case and field at fault. Besides the schema, a
    case_number may hold no control or formatting characters, and no field may nest arrays and
    objects more than MAX_NESTING levels deep. `open_dataset` checks the same and keeps no case.
    """
    cases: list[Case] = []
    dataset = scan(path, categories, lambda case, _: cases.append(case), CHUNK_SIZE)
    return Dataset(
        path=dataset.path,
        sha256=dataset.sha256,
        cases=cases,
        classes=dataset.classes,
        class_names=dataset.class_names,
        categories_path=dataset.categories_path,
    )


def open_dataset(
    path: Path | HubFile | None = None,
    categories: Path | None = None,
    *,
    variants: Mapping[str, Callable[[Case], tuple[str, ...]]] | None = None,
    chunk_size: int = CHUNK_SIZE,
) -> DatasetFile:
    """Validate a dataset file exactly as `load_dataset` does, holding one case at a time, never all.

    `variants` maps a task to the function naming that task's threads for a case
    (`Protocol.variants`); what each returns is kept per case, so that threads can be created
    without reading the cases again.
    """
    tasks = dict(variants or {})
    per_case: list[Mapping[str, tuple[str, ...]]] = []
    shared: dict[tuple[tuple[str, tuple[str, ...]], ...], Mapping[str, tuple[str, ...]]] = {}

    def keep_variants(case: Case, _: str) -> None:
        key = tuple((task, tuple(of(case))) for task, of in tasks.items())
        if key not in shared:  # cases mostly have the same threads: they share one mapping
            shared[key] = dict(key)
        per_case.append(shared[key])

    return replace(scan(path, categories, keep_variants, chunk_size), variants=tuple(per_case))
