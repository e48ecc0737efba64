"""The bootstrap over cases: every metric's confidence interval, and paired differences between models.

The method (the README states it too):

- A *family* is the groups that share a comparison key (`RunResults.comparison_key`: the same
  dataset, cases, cause-class mapping, code, prompts, user and judge models and requests, and
  settings; they differ only in the evaluated model). Its *cases* are every case any of its runs
  scored, each in its cause class (one class per case: the family has one mapping).
- One resample draws, in each cause class (by name), as many cases as the class has, with
  replacement: `random.Random(seed)`, then for each resample and each class in turn
  `rng.choices(the class's cases in case order, k=len(them))`. Every group of the family gets the
  same draws, which is what makes comparisons paired.
- Within a resample each run's metric is recomputed on the drawn cases (a case drawn twice counts
  twice; LCA's two histories and all of an LJP case's claims go with their case), and the
  resample's value is the mean over the runs where the metric is defined, as for the reported mean.
- The interval is the percentile interval of the resample values where they are defined (linear
  interpolation between order statistics, numpy's default), at (1 - level)/2 and (1 + level)/2.
- A paired difference (model A - model B) is computed per resample the same way; its p-value is
  the two-sided bootstrap test min(1, 2 min(1 + #{d <= 0}, 1 + #{d >= 0}) / (1 + k)) over the k
  resamples where the difference is defined: the smallest level at which the percentile interval
  leaves out zero.

Speed. A metric is a function of additive statistics (`tasks.Task.counts`), so a resample's
statistics are a sum over the drawn cases. Each case's statistics for every (group, run, task) of
the family are packed as bit fields of one Python int, each field just wide enough for any sum a
resample can reach, so a class's resample is one `sum` of the drawn ints (a C loop of
arbitrary-precision additions) and a few shifts decode it. The draws and that sum are nearly all
of the time: about two seconds for 1,000 resamples of 8,640 cases x 5 runs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.model import RunResults, TaskRecords

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 20250101
LEVEL = 0.95
METHOD = (
    "percentile bootstrap over cases, stratified by cause class: each resample draws every class's "
    "cases with replacement (random.Random(seed).choices), recomputes each run's metric on them and "
    "takes the mean over runs; the interval is the 2.5th-97.5th percentile of the resample means"
)
TEST = (
    "paired bootstrap over cases (the same resamples for both models): difference of the means over "
    "runs; two-sided p = min(1, 2 min(1 + #{d <= 0}, 1 + #{d >= 0}) / (1 + resamples))"
)

OVERALL: str | None = None  # the scope of the whole family, beside each class name


@dataclass(frozen=True)
class Slot:
    """Where one (group, run, task)'s statistics sit in a case's packed fields."""

    group: int  # index in the family's groups
    run_id: str
    task: str
    offset: int  # first field


class Family:
    """The cases of a family of comparable groups, and their statistics packed one int per case.

    `groups[i]` is the runs of one group. `classes` maps each class (by name) to its case numbers
    (in case order); `slots` says where each (group, run, task) sits in a case's fields.
    """

    def __init__(self, groups: Sequence[Sequence[RunResults]], case_order: Callable[[str], Any]) -> None:
        self.groups = groups
        self.classes = cases_by_class([run for runs in groups for run in runs], case_order)
        self.slots: list[Slot] = []
        fields = 0
        for gi, runs in enumerate(groups):
            for run in runs:
                for task in TASKS:
                    if task in run.tasks:
                        self.slots.append(Slot(gi, run.run_id, task, fields))
                        fields += TASKS[task].width
        self.fields = fields
        self._pack()

    def _pack(self) -> None:
        index = {case: i for i, case in enumerate(c for cases in self.classes.values() for c in cases)}
        # Pass 1: each record's statistics (equal scored records are one shared dict: counted once),
        # and the largest value each field takes in any record.
        records: list[tuple[Slot, list[tuple[int, tuple[int, ...]]]]] = []
        largest = [0] * self.fields
        for slot in self.slots:
            run = next(r for r in self.groups[slot.group] if r.run_id == slot.run_id)
            memo: dict[int, tuple[int, ...]] = {}
            rows = []
            for (_, record), case in zip(run.tasks[slot.task].records, run.tasks[slot.task].cases, strict=True):
                counts = memo.get(id(record))
                if counts is None:
                    counts = memo[id(record)] = _counts(run, slot.task, record, case)
                    for i, value in enumerate(counts, slot.offset):
                        largest[i] = max(largest[i], value)
                rows.append((index[case], counts))
            records.append((slot, rows))
        # Each field is as wide as the largest sum a resample can reach: every case drawn is at most
        # every case of the family, each holding at most two records of a slot (LCA's histories).
        # A field no record uses takes no bits at all.
        self.layout: list[tuple[int, int]] = []  # (bit offset, mask) of each field
        bits = 0
        for value in largest:
            width = (2 * value * len(index)).bit_length()
            self.layout.append((bits, (1 << width) - 1))
            bits += width
        # Pass 2: each distinct record's fields as one int, shifted into its slot of its case's int.
        ints = [0] * len(index)
        for slot, rows in records:
            start = self.layout[slot.offset][0]
            shifted: dict[int, int] = {}
            for case_index, counts in rows:
                found = shifted.get(id(counts))
                if found is None:
                    found = shifted[id(counts)] = (
                        sum(v << (self.layout[i][0] - start) for i, v in enumerate(counts, slot.offset)) << start
                    )
                ints[case_index] += found
        self.packed: dict[str, list[int]] = {}
        for cls, cases in self.classes.items():
            self.packed[cls] = [ints[index[case]] for case in cases]

    def decode(self, packed: int) -> list[int]:
        return [(packed >> offset) & mask for offset, mask in self.layout]

    def totals(self) -> dict[str | None, list[int]]:
        """The statistics of every case once: what the reported values are computed from."""
        return self._scopes({cls: sum(ints) for cls, ints in self.packed.items()})

    def resamples(self, n: int, seed: int) -> Iterator[dict[str | None, list[int]]]:
        """The statistics of each of `n` resamples, per class and overall (see the module docstring)."""
        rng = random.Random(seed)
        classes = list(self.packed.items())
        for _ in range(n):
            yield self._scopes({cls: sum(rng.choices(ints, k=len(ints))) for cls, ints in classes})

    def _scopes(self, sums: dict[str, int]) -> dict[str | None, list[int]]:
        scopes: dict[str | None, list[int]] = {cls: self.decode(total) for cls, total in sums.items()}
        scopes[OVERALL] = self.decode(sum(sums.values()))
        return scopes


def _counts(run: RunResults, task: str, record: dict, case: str) -> tuple[int, ...]:
    try:
        return TASKS[task].counts(record)
    except (KeyError, TypeError, ValueError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise LexpilotError(
            f"Cannot score task {task} of run {run.run_id} (model {run.model}), case {case}: {detail}. "
            "The stored records are not in the shape the protocol writes; re-ingest the run or report this as a bug."
        ) from exc


def cases_by_class(runs: Sequence[RunResults], case_order: Callable[[str], Any]) -> dict[str, list[str]]:
    """Every case the runs scored, by class (classes by name, cases in `case_order`)."""
    class_of: dict[str, str] = {}
    for run in runs:
        for task_records in run.tasks.values():
            _check_aligned(run, task_records)
            for (cls, _), case in zip(task_records.records, task_records.cases, strict=True):
                if class_of.setdefault(case, cls) != cls:
                    raise LexpilotError(
                        f"Case {case} is in class {class_of[case]} in one run and {cls} in another "
                        f"(run {run.run_id}, model {run.model}); runs scored with different cause-class "
                        "mappings cannot be reported together."
                    )
    classes: dict[str, list[str]] = {}
    for case, cls in class_of.items():
        classes.setdefault(cls, []).append(case)
    return {cls: sorted(classes[cls], key=case_order) for cls in sorted(classes)}


def _check_aligned(run: RunResults, task_records: TaskRecords) -> None:
    records, cases = task_records.records, task_records.cases
    if len(records) != len(cases):
        raise LexpilotError(
            f"Run {run.run_id} (model {run.model}) gives {len(records)} records but {len(cases)} case numbers; "
            "every scored record needs its case number (TaskRecords.cases)."
        )


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly between order statistics (numpy's
    default, "type 7")."""
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def interval(values: Sequence[Metric], level: float = LEVEL) -> dict | None:
    """The percentile interval of the defined values, with how many there were; None if none are."""
    defined = sorted(v for v in values if v is not None)
    if not defined:
        return None
    tail = (1 - level) / 2
    return {"low": percentile(defined, tail), "high": percentile(defined, 1 - tail), "resamples": len(defined)}


def p_value(differences: Sequence[Metric]) -> float | None:
    """The two-sided paired bootstrap p-value of the defined differences (see the module docstring)."""
    defined = [d for d in differences if d is not None]
    if not defined:
        return None
    below = sum(d <= 0 for d in defined)
    above = sum(d >= 0 for d in defined)
    return min(1.0, 2 * min(1 + below, 1 + above) / (1 + len(defined)))
