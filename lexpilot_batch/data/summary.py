"""What `validate-data` prints about a valid dataset, tallied case by case as the file is read."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from lexpilot_batch.data.dataset import Dataset, DatasetFile, scan
from lexpilot_batch.data.hub import HubDownload, HubFile
from lexpilot_batch.data.schema import VERDICTS, Case
from lexpilot_batch.data.stream import CHUNK_SIZE
from lexpilot_batch.util.text import display_width, pad


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
    hub: HubDownload | None = None  # a Hugging Face dataset's file: `path` is its copy in the cache

    @classmethod
    def of(cls, dataset: Dataset) -> DatasetSummary:
        tally = _Tally()
        for case in dataset.cases:
            tally.add(case, dataset.class_of(case))
        return tally.summary(dataset)

    def render(self) -> str:
        def table(rows: dict[str, int], total_label: str) -> list[str]:
            items = [*rows.items(), (total_label, sum(rows.values()))]
            key_width = max(display_width(k) for k, _ in items) + 2
            num_width = max(len(str(n)) for _, n in items)
            return [f"  {pad(k, key_width)}{n:>{num_width}}" for k, n in items]

        median = f"{self.messages_median:g}"
        lines = [f"Dataset      {self.path}"]
        if self.hub is not None:
            lines = [
                f"Dataset      {self.hub.file.url}",
                f"Commit       {self.hub.commit}",
                f"Cached at    {self.path}",
            ]
        lines.append(f"SHA-256      {self.sha256[:12]}")
        if self.categories_path is not None:
            lines.append(f"Categories   {self.categories_path}")
        lines += [
            f"Cases        {self.n_cases}",
            f"Histories    {self.n_histories} ({self.n_cases} complete + {self.n_cases} underspecified)",
            f"Messages     min {self.messages_min}, median {median}, max {self.messages_max} per history",
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


class _Tally:
    """What a summary counts, case by case, so that a file can be summarised as it is read."""

    def __init__(self) -> None:
        self.lengths: list[int] = []  # of every history
        self.per_class: Counter[str] = Counter()
        self.verdicts: Counter[str] = Counter()
        self.causes: set[str] = set()

    def add(self, case: Case, cause_class: str) -> None:
        self.lengths += (len(case.complete_history), len(case.underspecified_history))
        self.per_class[cause_class] += 1
        self.verdicts.update(case.result_dict.values())
        self.causes.add(case.cause_of_action)

    def summary(self, dataset: Dataset | DatasetFile) -> DatasetSummary:
        return DatasetSummary(
            path=dataset.path,
            sha256=dataset.sha256,
            categories_path=dataset.categories_path,
            n_cases=len(dataset),
            n_histories=len(self.lengths),
            messages_min=min(self.lengths),
            messages_median=statistics.median(self.lengths),
            messages_max=max(self.lengths),
            n_causes=len(self.causes),
            cases_per_class={name: self.per_class.get(name, 0) for name in dataset.class_names},
            claims_per_verdict={v: self.verdicts.get(v, 0) for v in VERDICTS},
            hub=dataset.hub if isinstance(dataset, DatasetFile) else None,
        )


def summarize(dataset: Dataset) -> DatasetSummary:
    return DatasetSummary.of(dataset)


def validate_file(dataset: Path | HubFile | None = None, categories: Path | None = None) -> DatasetSummary:
    """Validate a dataset file (raises `DataError`) and summarise it for the terminal.

    Read in chunks, as `open_dataset` does: a large file is summarised without being held whole.
    """
    tally = _Tally()
    return tally.summary(scan(dataset, categories, tally.add, CHUNK_SIZE))
