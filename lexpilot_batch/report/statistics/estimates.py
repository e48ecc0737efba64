"""Each group's metrics: per run, overall and per cause class, their mean and SD over runs, n, and
the 95% interval of the mean with its standard error and its variance split between cases and
runs; and the influence values that model comparisons difference (`compare`).

The standard error of every metric is that of its case influence values (`influence`,
`inference`): case-clustered for per-case additive metrics, the jackknife's for Macro-F1, F1_U,
F1_C and QWK. The interval (`proportions`), chosen by measured coverage at low rates and in small
classes (docs/report.md, `bench/calibration.py`; the t interval on the raw scale covered 84-92%
there):

- Acc_C, Acc_U, DCG success, LJP accuracy: with one run and one trial per case, the exact binomial
  interval (`clopper-pearson`); otherwise Clopper-Pearson at the case-clustered effective sample
  size (`korn-graubard`); at 0 or 1 the exact bound with each case one trial (8/8: [0.631, 1]).
- Macro-F1, F1_U, F1_C, QWK: the t interval on the logit scale of the metric's range
  (`jackknife-logit-t`; for QWK, Fisher's z).

Where a t quantile enters (Korn-Graubard's and the logit interval's), its degrees of freedom are
Satterthwaite's for the influence values' kurtosis (`inference.kurtosis_df`, `ci.df`): cases - 1
when they are near normal, fewer when a few cases carry the variation. With cases - 1 throughout,
the overall intervals at a rate near 0.05 covered 91-92% and those of classes of 5-11 cases 91-93%
(QWK, LJP accuracy), missing on the side the few cases pull to.

No interval is better than a false one. It is `null`, with `ci_reason`, when the scope has fewer
than `MIN_CASES` cases (`FEW_CASES`), when every case has the same jackknife influence (`FLAT`:
SE 0, an interval of width 0 would claim certainty that n cases cannot give), or when the
jackknife is undefined without one of the cases (`influence.UNSTABLE`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from lexpilot_batch.benchmark import metrics
from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.statistics import inference, proportions
from lexpilot_batch.report.statistics.family import OVERALL, Family, Scope
from lexpilot_batch.report.statistics.influence import CellInfluence, MetricInfluence, additive, cell_influence

MIN_CASES = 5  # the fewest cases an interval, a standard error or a minimum detectable difference is given for
FEW_CASES = "too few cases"
FLAT = "no variation between cases"

CLOPPER_PEARSON = "clopper-pearson"  # exact binomial: one run, one trial per case; or at 0 or 1
KORN_GRAUBARD = "korn-graubard"  # Clopper-Pearson at the clustered effective sample size
LOGIT_T = "jackknife-logit-t"  # the jackknife SE, t interval on the logit scale of the range


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
    se, ci, reason = interval(info, n, metric, level)
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
        "variance": variance(info) if se is not None else None,
    }


def variance(info: MetricInfluence) -> dict | None:
    """The split of a metric's uncertainty between cases and runs (the one-way random-effects
    decomposition, Searle, Casella & McCulloch 1992, ch. 3; Miller 2024 §3 for evals): `per_case`,
    the variance of a case's influence value (averaged over the k runs), = `between` + `within` / k,
    so that SE^2 = per_case / n and, for n' cases and k' runs, (between + within / k') / n'.
    `between` and `within` are None with one run (they cannot be told apart)."""
    if info.influence is None or len(info.influence) < 2:
        return None
    n = len(info.influence)
    mean = math.fsum(info.influence) / n
    per_case = math.fsum((v - mean) ** 2 for v in info.influence) / (n - 1)
    if info.within is None:
        return {"per_case": per_case, "between": None, "within": None}
    return {"per_case": per_case, "between": max(0.0, per_case - info.within / len(info.runs)), "within": info.within}


def interval(
    info: MetricInfluence, n: int, metric: str, level: float = inference.LEVEL
) -> tuple[float | None, dict | None, str | None]:
    """(se, ci, reason) of a metric's estimate over `n` cases from its influence values (the
    module docstring says which interval)."""
    estimate = info.estimate
    if estimate is None:
        return None, None, None  # undefined stays undefined: no interval, and no reason needed
    if n < MIN_CASES:
        return None, None, FEW_CASES
    if info.influence is None:
        return None, None, info.reason or FEW_CASES
    se = inference.se_of_influence(info.influence)
    flat = se <= 1e-12 * max(1.0, abs(estimate))
    df = inference.kurtosis_df(info.influence)
    if additive(metric):
        if info.binary:  # one run, one trial per case: a binomial count of the cases
            low, high = proportions.clopper_pearson(round(estimate * info.trials), info.trials, level)
            return (0.0 if flat else se), _ci(low, high, CLOPPER_PEARSON, n, None), None
        low, high = proportions.korn_graubard(estimate, 0.0 if flat else se, info.trials, n, level, df)
        exact = estimate <= 0.0 or estimate >= 1.0  # the exact bound, each case one trial
        return (0.0 if flat else se), _ci(low, high, CLOPPER_PEARSON if exact else KORN_GRAUBARD, n, df), None
    if flat:
        return 0.0, None, FLAT
    low, high = proportions.logit_t(estimate, se, df, metric_range(metric), level)
    return se, _ci(low, high, LOGIT_T, n, df), None


def _ci(low: float, high: float, method: str, n: int, df: int | None) -> dict:
    return {"low": low, "high": high, "method": method, "cases": n, "df": df, "resamples": None}
