"""Each group's metrics: per run, overall and per cause class, their mean and SD over runs, n, and
bootstrap intervals; and the resample values that model comparisons difference.

Works on one `bootstrap.Family` at a time: the reported values come from its statistics summed
over every case once (`Family.totals`), the intervals from the same computation on each resample
(`Family.resamples`), so a resample is scored by exactly the rule that scores the report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lexpilot_batch.benchmark import metrics
from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.bootstrap import OVERALL, Family, interval

Scope = str | None  # a class name, or OVERALL


@dataclass
class _Cell:
    """One (group, task, scope): the runs' fields, and each metric's value in every resample."""

    group: int
    task: str
    scope: Scope
    runs: list[tuple[str, int]]  # (run id, offset of its fields)
    resampled: list[list[Metric]] = field(default_factory=list)  # per metric, one value per resample


@dataclass
class FamilyEstimates:
    """The summaries of each group of a family (`tasks[group][task]` = {"overall", "by_class",
    "n"}), and the overall resample values per (group, task) for comparisons."""

    tasks: list[dict[str, dict]]
    resampled: dict[tuple[int, str], list[list[Metric]]]  # (group, task) -> per metric, per resample
    cases: int


def estimate(family: Family, resamples: int, seed: int) -> FamilyEstimates:
    """Every metric summary of the family's groups, with bootstrap intervals over `resamples`."""
    cells = _cells(family)
    totals = family.totals()
    tasks: list[dict[str, dict]] = [{} for _ in family.groups]
    for cell in cells:
        task = TASKS[cell.task]
        values: dict[str, list[Metric]] = {}
        sizes: dict[str, int] = {}
        for run_id, offset in cell.runs:
            counts = totals[cell.scope][offset : offset + task.width]
            values[run_id] = list(task.from_counts(counts))
            sizes[run_id] = task.size(counts)
        entry = tasks[cell.group].setdefault(cell.task, {"overall": {}, "by_class": {}, "n": {}})
        summaries = {m: _summary({r: v[i] for r, v in values.items()}, sizes) for i, m in enumerate(task.metrics)}
        if cell.scope is OVERALL:
            entry["overall"] = summaries
            entry["n"] = sizes
        else:
            entry["by_class"][cell.scope] = summaries
        cell.resampled = [[] for _ in task.metrics]

    if resamples > 0:
        _resample(family, cells, resamples, seed)
        for cell in cells:
            entry = tasks[cell.group][cell.task]
            summaries = entry["overall"] if cell.scope is OVERALL else entry["by_class"][cell.scope]
            for m, values_b in zip(TASKS[cell.task].metrics, cell.resampled, strict=True):
                if summaries[m]["mean"] is not None:
                    summaries[m]["ci"] = interval(values_b)
    resampled = {(c.group, c.task): c.resampled for c in cells if c.scope is OVERALL}
    return FamilyEstimates(tasks, resampled, sum(len(c) for c in family.classes.values()))


def _summary(per_run: dict[str, Metric], sizes: dict[str, int]) -> dict:
    mean, sd = metrics.mean_sd(per_run.values())
    return {
        "mean": mean,
        "sd": sd,
        "n_defined": metrics.n_defined(per_run.values()),
        "per_run": per_run,
        "n": sizes,
        "ci": None,
    }


def _cells(family: Family) -> list[_Cell]:
    """Every (group, task, scope) in report order: tasks in benchmark order, overall then the classes
    the group's records of that task are in."""
    cells = []
    for gi, runs in enumerate(family.groups):
        for task in TASKS:
            slots = [(s.run_id, s.offset) for s in family.slots if s.group == gi and s.task == task]
            if not slots:
                continue
            classes = sorted({cls for run in runs if task in run.tasks for cls, _ in run.tasks[task].records})
            for scope in (OVERALL, *classes):
                cells.append(_Cell(gi, task, scope, slots))
    return cells


def _resample(family: Family, cells: list[_Cell], resamples: int, seed: int) -> None:
    plan: list[tuple[Scope, list[int], int, Callable[[Sequence[int]], tuple[Metric, ...]], list[list[Metric]]]] = [
        (
            cell.scope,
            [offset for _, offset in cell.runs],
            TASKS[cell.task].width,
            TASKS[cell.task].from_counts,
            cell.resampled,
        )
        for cell in cells
    ]
    for sums in family.resamples(resamples, seed):
        for scope, offsets, width, from_counts, stores in plan:
            fields = sums[scope]
            total = [0.0] * len(stores)
            defined = [0] * len(stores)
            for offset in offsets:
                for i, value in enumerate(from_counts(fields[offset : offset + width])):
                    if value is not None:
                        total[i] += value
                        defined[i] += 1
            for i, store in enumerate(stores):
                store.append(total[i] / defined[i] if defined[i] else None)
