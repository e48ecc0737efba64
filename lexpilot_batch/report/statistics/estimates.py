"""Each group's metrics: per run, overall and per cause class, their mean and SD over runs, n, and
the 95% interval of the mean with its standard error; and the influence values that model
comparisons difference (`compare`).

The interval of every metric is the mean over runs +- t(0.975; n - 1) x SE, n the cases of the
scope and SE the standard error of the case influence values (`influence`, `inference`): the
case-clustered standard error for per-case additive metrics, the jackknife's for Macro-F1, F1_U,
F1_C and QWK. Chosen by measured coverage (docs/report.md): at n = 8 cases the jackknife t
interval of QWK covered 90%, the unstratified BCa bootstrap 83%; at 432 both about 94%.

No interval is better than a false one. It is `null`, with `ci_reason`, when the scope has fewer
than `MIN_CASES` cases (`FEW_CASES`), when every case has the same influence (`FLAT`: SE 0, an
interval of width 0 would claim certainty that n cases cannot give), or when the jackknife is
undefined without one of the cases (`influence.UNSTABLE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lexpilot_batch.benchmark import metrics
from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.statistics import inference
from lexpilot_batch.report.statistics.family import OVERALL, Family, Scope
from lexpilot_batch.report.statistics.influence import CellInfluence, additive, cell_influence

MIN_CASES = 5  # the fewest cases an interval, a standard error or a minimum detectable difference is given for
FEW_CASES = "too few cases"
FLAT = "no variation between cases"

CLUSTERED = "clustered-t"  # the case-clustered SE, t interval
JACKKNIFE = "jackknife-t"  # the jackknife SE, t interval


def method_of(metric: str) -> str:
    return CLUSTERED if additive(metric) else JACKKNIFE


def metric_range(metric: str) -> tuple[float, float]:
    """The values a metric can take: QWK from -1 (agreement below chance), the others 0 to 1.
    Intervals are cut to it (the truth lies inside), and the heatmap's colour scale spans it."""
    return (-1.0, 1.0) if metric == "qwk" else (0.0, 1.0)


def clip(low: float, high: float, bounds: tuple[float, float]) -> tuple[float, float]:
    return max(low, bounds[0]), min(high, bounds[1])


@dataclass
class FamilyEstimates:
    """The summaries of each group of a family (`tasks[group][task]` = {"overall", "by_class",
    "n"}), and the cells they come from, for comparisons."""

    tasks: list[dict[str, dict]]
    cells: dict[tuple[int, str, Scope], tuple[list[int], CellInfluence]]  # (group, task, scope) -> (slots, cell)
    cases: int
    _cache: dict[tuple[tuple[int, ...], tuple[int, ...], str], CellInfluence] = field(default_factory=dict)

    def cell(self, family: Family, slots: Sequence[int], cases: Sequence[int], task: str) -> CellInfluence:
        key = (tuple(slots), tuple(cases), task)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = cell_influence(family, slots, cases, task)
        return found


def estimate(family: Family, level: float = inference.LEVEL) -> FamilyEstimates:
    """Every metric summary of the family's groups, with its standard error and interval."""
    out = FamilyEstimates([{} for _ in family.groups], {}, len(family.cases))
    for gi in range(len(family.groups)):
        for task in TASKS:
            slots = [s for s, slot in enumerate(family.slots) if slot.group == gi and slot.task == task]
            if not slots:
                continue
            run_ids = [family.slots[s].run_id for s in slots]
            entry = out.tasks[gi].setdefault(task, {"overall": {}, "by_class": {}, "n": {}})
            present = sorted({c for s in slots for c in family.counts[s]})
            classes = sorted({family.class_of[c] for c in present})
            for scope in (OVERALL, *classes):
                cases = present if scope is OVERALL else [c for c in present if family.class_of[c] == scope]
                cell = out.cell(family, slots, cases, task)
                out.cells[(gi, task, scope)] = (slots, cell)
                sizes = dict(zip(run_ids, cell.sizes, strict=True))
                summaries = {
                    metric: _summary(cell, metric, i, run_ids, sizes, level)
                    for i, metric in enumerate(TASKS[task].metrics)
                }
                if scope is OVERALL:
                    entry["overall"] = summaries
                    entry["n"] = sizes
                else:
                    entry["by_class"][scope] = summaries
    return out


def _summary(cell: CellInfluence, metric: str, i: int, run_ids: list[str], sizes: dict[str, int], level: float) -> dict:
    per_run: dict[str, Metric] = {r: values[i] for r, values in zip(run_ids, cell.per_run, strict=True)}
    mean, sd = metrics.mean_sd(per_run.values())
    info = cell.metrics[metric]
    n = len(cell.cases)
    se, ci, reason = interval(info.estimate, info.influence, info.reason, n, metric, level)
    return {
        "mean": mean,
        "sd": sd,
        "n_defined": metrics.n_defined(per_run.values()),
        "per_run": per_run,
        "n": sizes,
        "cases": n,
        "se": se,
        "ci": ci,
        "ci_reason": reason,
    }


def interval(
    estimate: Metric,
    influence: list[float] | None,
    unusable: str | None,
    n: int,
    metric: str,
    level: float = inference.LEVEL,
) -> tuple[float | None, dict | None, str | None]:
    """(se, ci, reason) of an estimate from its influence values (`influence` None: `unusable`
    says why, or the estimate is undefined)."""
    if estimate is None:
        return None, None, None  # undefined stays undefined: no interval, and no reason needed
    if n < MIN_CASES:
        return None, None, FEW_CASES
    if influence is None:
        return None, None, unusable or FEW_CASES
    se = inference.se_of_influence(influence)
    if se <= 1e-12 * max(1.0, abs(estimate)):
        return 0.0, None, FLAT
    low, high = clip(*inference.t_interval(estimate, se, n - 1, level), metric_range(metric))
    return (
        se,
        {
            "low": low,
            "high": high,
            "method": method_of(metric),
            "cases": n,
            "df": n - 1,
            "resamples": None,
        },
        None,
    )
