"""A family of comparable groups and its cases: every case's additive statistics in every (group,
run, task), which is all the report's estimates, intervals and tests are computed from.

- A *family* is the groups that share a comparison key (`RunResults.comparison_key`: the same
  dataset, cases, cause-class mapping, code, prompts, user and judge models and requests, and
  settings; they differ only in the evaluated model). Its *cases* are every case any of its runs
  scored, each in its cause class (one class per case: the family has one mapping).
- A case is the unit of every uncertainty (the cluster): LCA's two histories and all of an LJP
  case's claims belong to their case, and so do all of its runs. `counts[slot][case]` is the sum
  of the case's records' statistics (`tasks.Task.counts`) in one (group, run, task): the metric of
  any set of cases is `from_counts` of the sum of theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.document import RunResults, TaskRecords

OVERALL: str | None = None  # the scope of the whole family, beside each class name
Scope = str | None
Counts = tuple[int, ...]


@dataclass(frozen=True)
class Slot:
    """One (group, run, task) of the family."""

    group: int  # index in the family's groups
    run_id: str
    task: str


class Family:
    """The cases of a family of comparable groups and their statistics.

    `groups[i]` is the runs of one group. `classes` maps each class (by name) to its case numbers
    (in case order); `cases` lists every case number (class by class) and `class_of[i]` is the
    class of case i; `slots` are the (group, run, task)s and `counts[s]` maps a case index to its
    summed statistics in slot s (cases the slot did not score are absent).
    """

    def __init__(self, groups: Sequence[Sequence[RunResults]], case_order: Callable[[str], Any]) -> None:
        self.groups = groups
        self.classes = cases_by_class([run for runs in groups for run in runs], case_order)
        self.cases = [case for cases in self.classes.values() for case in cases]
        self.class_of = [cls for cls, cases in self.classes.items() for _ in cases]
        index = {case: i for i, case in enumerate(self.cases)}
        self.slots: list[Slot] = []
        self.counts: list[dict[int, Counts]] = []
        for gi, runs in enumerate(groups):
            for run in runs:
                for task in TASKS:
                    if task in run.tasks:
                        self.slots.append(Slot(gi, run.run_id, task))
                        self.counts.append(_case_counts(run, task, index))

    def scope_cases(self, scope: Scope) -> list[int]:
        """The indices of the cases in a scope (every case, or one class's)."""
        if scope is OVERALL:
            return list(range(len(self.cases)))
        return [i for i, cls in enumerate(self.class_of) if cls == scope]


def _case_counts(run: RunResults, task: str, index: dict[str, int]) -> dict[int, Counts]:
    records = run.tasks[task]
    out: dict[int, Counts] = {}
    memo: dict[int, Counts] = {}  # equal scored records are one shared dict: counted once
    for (_, record), case in zip(records.records, records.cases, strict=True):
        counts = memo.get(id(record))
        if counts is None:
            counts = memo[id(record)] = _counts(run, task, record, case)
        i = index[case]
        have = out.get(i)
        # LCA's two histories of a case add up to the case's statistics.
        out[i] = counts if have is None else tuple(a + b for a, b in zip(have, counts, strict=True))
    return out


def _counts(run: RunResults, task: str, record: dict, case: str) -> Counts:
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
