"""Model comparisons: for groups that differ only in the evaluated model (one `bootstrap.Family`),
each pair's difference of every task metric (mean over runs of A minus that of B), with a paired
bootstrap interval over cases and a p-value (`bootstrap.interval`, `bootstrap.p_value`).

Without a baseline every pair of a family is compared, A the earlier group in report order; with
`--baseline MODEL` every other model of a family is compared with that model's group (A the other
model, B the baseline). No correction for multiple comparisons is applied.
"""

from __future__ import annotations

from collections.abc import Sequence

from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.bootstrap import interval, p_value
from lexpilot_batch.report.estimates import FamilyEstimates


def check_baseline(baseline: str | None, models: Sequence[str]) -> None:
    if baseline is not None and baseline not in models:
        raise LexpilotError(
            f"--baseline {baseline}: no reported run has that evaluated model; "
            f"the models are {', '.join(sorted(set(models))) or '(none)'}."
        )


def pairs(members: Sequence[int], models: Sequence[str], baseline: str | None) -> list[tuple[int, int]]:
    """(A, B) pairs of a family's groups (`members`, indices in report order; `models[i]` is group
    i's model)."""
    if baseline is None:
        return [(a, b) for i, a in enumerate(members) for b in members[i + 1 :]]
    base = [g for g in members if models[g] == baseline]
    if not base:
        return []
    return [(g, base[0]) for g in members if g != base[0]]


def compare(
    groups: Sequence[dict],
    members: Sequence[int],
    estimates: FamilyEstimates,
    baseline: str | None,
) -> list[dict]:
    """The comparisons of one family, in the `comparisons` JSON shape (`report.model`)."""
    local = {g: i for i, g in enumerate(members)}  # report index -> index in the family
    out = []
    for a, b in pairs(members, [g["model"] for g in groups], baseline):
        ga, gb = groups[a], groups[b]
        tasks: dict[str, dict[str, dict]] = {}
        for task in TASKS:
            if task not in ga["tasks"] or task not in gb["tasks"]:
                continue
            tasks[task] = {}
            resampled_a = estimates.resampled[(local[a], task)]
            resampled_b = estimates.resampled[(local[b], task)]
            for i, metric in enumerate(TASKS[task].metrics):
                mean_a = ga["tasks"][task]["overall"][metric]["mean"]
                mean_b = gb["tasks"][task]["overall"][metric]["mean"]
                defined = mean_a is not None and mean_b is not None
                diffs = _differences(resampled_a[i], resampled_b[i])
                tasks[task][metric] = {
                    "a": mean_a,
                    "b": mean_b,
                    "difference": mean_a - mean_b if defined else None,
                    "ci": interval(diffs) if defined else None,
                    "p_value": p_value(diffs) if defined else None,
                }
        out.append(
            {
                "a": {"model": ga["model"], "group_key": ga["group_key"]},
                "b": {"model": gb["model"], "group_key": gb["group_key"]},
                "comparison_key": ga["comparison_key"],
                "cases": estimates.cases,
                "partial": any(t["partial"] for g in (ga, gb) for t in g["tasks"].values()),
                "tasks": tasks,
            }
        )
    return out


def _differences(a: Sequence[Metric], b: Sequence[Metric]) -> list[Metric]:
    return [None if x is None or y is None else x - y for x, y in zip(a, b, strict=True)]
