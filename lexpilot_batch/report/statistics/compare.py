"""Model comparisons: for groups that differ only in the evaluated model (one `family.Family`), each
pair's difference of every task metric (mean over runs of A minus that of B), on the cases both
scored, paired case by case (with `--partial`, where one model scored fewer, `a`, `b` and the
difference are the means on the cases both scored).

Per metric (docs/report.md gives the measurements behind each choice, `bench/calibration.py`
makes them):

- `se`: the standard error of the difference, from the per-case differences of the two models'
  influence values (`influence`: case-clustered for per-case additive metrics, jackknife for
  Macro-F1, F1_U, F1_C and QWK), with `t` = difference / se and df = cases - 1 (descriptive: the
  test is the permutation test below); `correlation`: Pearson's between the two models' per-case
  influence values; `variance`: the split `plan` uses. From `estimates.MIN_CASES` cases.
- `ci`: for per-case additive metrics (`permutation`), the differences the test would not tell
  from this one, the difference +- the 95% quantile of the |difference| over its permutation
  distribution (for an exact test, continuity-corrected: halfway to the smallest value it rejects,
  `_half_width`). For Macro-F1, F1_U, F1_C and QWK (`permutation-mover`), the union of that
  interval and the MOVER interval (`proportions.mover`: Zou & Donner 2008, Newcombe 1998's
  method 10 for any estimate) built from each model's own interval (`estimates.interval`) and the
  continuity-corrected correlation of their influence values (`proportions.corrected_correlation`).
  The swap distribution holds the cases on which the two models agree fixed, but at a true
  difference they move it too (through the other cases' confusion the ratio is taken over): the
  permutation interval alone covered 84-92% there with stable and near-deterministic models; the
  union keeps the test's interval (so its coverage at a true 0) and widens it where the models'
  own intervals say the difference is less certain.
  `null` with the reason where the test cannot reject at 5% at all.
- the p-value, at every number of cases, from a paired permutation test with the case as the unit,
  exact when two models are the same however few cases they differ on (the t test, and the paired
  bootstrap this replaced, rejected two identical near-deterministic models 13-20% of the time at
  432 cases: with few cases that differ, their distributions are lumpy): for per-case additive
  metrics the sign-flip test of the per-case differences (`sign-flip`, `inference.sign_flip`), for
  the others the two models' records of a case swapped (`swap`, `swap.swap_tests`); each exact
  over every pattern when that is cheap, else Monte Carlo over `--bootstrap` patterns.
  Both need the same number of runs of each model (run i of A with run i of B: with 1 run against
  5, a case's difference is not symmetric under the null and the sign-flip test of it rejected
  identical models 21-27% of the time at 8 cases), so with unequal runs the test pairs the first
  `test_runs` runs of each, in run order, and leaves the rest to the difference and its interval.
- `mdd`: the minimum detectable difference of the test actually used: the test's critical value
  (the smallest difference its permutation distribution rejects at 5%) plus z_0.80 times the
  standard error of the tested difference, the difference a 5% test detects with 80% power (Bloom
  1995, with the permutation distribution in place of the t); `null` with `mdd_reason` when the
  test cannot reject at 5% at all (k cases that differ allow no p below 2/2^k: below 6, none).
- `p_floor`: a Monte Carlo test's resamples cannot resolve the p-value, which is below `p_value`
  (1/(B+1)); never a p-value at a floor unflagged.
- `p_adjusted`: Holm's step-down adjustment over the report's comparisons (`holm_over`: the
  headline metrics of every pair one family, the other metrics another), by default (`--adjust
  none` leaves it out), beside the unadjusted `p_value`.

Without a baseline every pair of a family is compared, A the earlier group in report order; with
`--baseline MODEL` every other model of a family is compared with that model's group (A the other
model, B the baseline). Runs are not paired across models for the difference: each model's runs
are averaged first.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.statistics import inference, plan, proportions
from lexpilot_batch.report.statistics.estimates import (
    FEW_CASES,
    FLAT,
    MIN_CASES,
    FamilyEstimates,
    clip,
    interval,
    metric_range,
)
from lexpilot_batch.report.statistics.family import OVERALL, Family
from lexpilot_batch.report.statistics.influence import CellInfluence, MetricInfluence, additive
from lexpilot_batch.report.statistics.swap import swap_tests

DEFAULT_RESAMPLES = 1000  # Monte Carlo permutation patterns (`--bootstrap`)
DEFAULT_SEED = 20250101
ADJUSTMENTS = ("holm", "none")
DEFAULT_ADJUST = "holm"  # the report's comparisons are Holm-adjusted unless `--adjust none`

PERMUTATION = "permutation"  # the difference +- the test's 1 - alpha quantile: the interval it inverts
PERMUTATION_MOVER = "permutation-mover"  # that interval united with the MOVER interval of the two models' own
NO_RESAMPLES = "needs resamples (--bootstrap 0)"
UNREACHABLE = "not reachable"  # the test cannot reject at 5%: "not reachable: k cases differ; ..."
UNDEFINED = "undefined"
NO_CASES = "n/a: no case both scored"  # a `--partial` pair with nothing finished in common

Cells = tuple[list[int], CellInfluence, list[int], CellInfluence]


def check_baseline(baseline: str | None, models: Sequence[str]) -> None:
    if baseline is not None and baseline not in models:
        raise LexpilotError(
            f"--baseline {baseline}: no reported run has that evaluated model; "
            f"the models are {', '.join(sorted(set(models))) or '(none)'}."
        )


def check_adjust(adjust: str) -> None:
    if adjust not in ADJUSTMENTS:
        raise LexpilotError(f"--adjust {adjust}: choose one of {', '.join(ADJUSTMENTS)}.")


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
    family: Family,
    estimates: FamilyEstimates,
    baseline: str | None,
    *,
    resamples: int,
    seed: int,
) -> list[dict]:
    """The comparisons of one family, in the `comparisons` JSON shape (`report.document`)."""
    local = {g: i for i, g in enumerate(members)}  # report index -> index in the family
    out = []
    for a, b in pairs(members, [g["model"] for g in groups], baseline):
        ga, gb = groups[a], groups[b]
        tasks: dict[str, dict[str, dict]] = {}
        for task in (t for t in TASKS if t in ga["tasks"] and t in gb["tasks"]):
            # Each pair's and task's own random patterns: its p-values do not depend on the other pairs.
            rng = random.Random(f"{seed}:{ga['group_key']}:{gb['group_key']}:{task}")
            cells = _paired_cells(family, estimates, local[a], local[b], task)
            tested = _balanced(family, estimates, cells, task)
            _, cell_a, _, cell_b = cells
            swaps = swap_tests(family, task, (tested[0], tested[1]), (tested[2], tested[3]), resamples, rng)
            whole = _whole(estimates, local[a], local[b], task, cell_a, cell_b)
            tasks[task] = {}
            for i, metric in enumerate(TASKS[task].metrics):
                if whole:  # each model's reported mean
                    mean_a = ga["tasks"][task]["overall"][metric]["mean"]
                    mean_b = gb["tasks"][task]["overall"][metric]["mean"]
                else:  # `--partial`: the means on the cases both scored, which the difference is of
                    mean_a, mean_b = cell_a.metrics[metric].estimate, cell_b.metrics[metric].estimate
                tasks[task][metric] = _difference(
                    metric, mean_a, mean_b, cell_a, cell_b, tested, swaps.get(i), resamples, rng
                )
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


def _paired_cells(family: Family, estimates: FamilyEstimates, a: int, b: int, task: str) -> Cells:
    """Both groups' overall cells on the same cases: those both scored (all of them, unless
    `--partial` left some out of one). A case only one model scored pairs with nothing: in the
    union it stood as an empty case of the other, whose per-case difference was no difference."""
    slots_a, cell_a = estimates.cells[(a, task, OVERALL)]
    slots_b, cell_b = estimates.cells[(b, task, OVERALL)]
    if cell_a.cases != cell_b.cases:
        both = sorted(set(cell_a.cases) & set(cell_b.cases))
        cell_a = estimates.cell(family, slots_a, both, task)
        cell_b = estimates.cell(family, slots_b, both, task)
    return slots_a, cell_a, slots_b, cell_b


def _balanced(family: Family, estimates: FamilyEstimates, cells: Cells, task: str) -> Cells:
    """The cells the test runs on: the same number of runs of each model, the first ones in run
    order (the cells themselves when the models have as many runs)."""
    slots_a, cell_a, slots_b, cell_b = cells
    k = min(len(slots_a), len(slots_b))
    if len(slots_a) == len(slots_b):
        return cells
    return (
        slots_a[:k],
        estimates.cell(family, slots_a[:k], cell_a.cases, task),
        slots_b[:k],
        estimates.cell(family, slots_b[:k], cell_b.cases, task),
    )


def _whole(estimates: FamilyEstimates, a: int, b: int, task: str, cell_a: CellInfluence, cell_b: CellInfluence) -> bool:
    """Whether a pair's cells are both groups' own (every case each scored), not those of the cases
    both scored."""
    return cell_a is estimates.cells[(a, task, OVERALL)][1] and cell_b is estimates.cells[(b, task, OVERALL)][1]


def _difference(
    metric: str,
    mean_a: Metric,
    mean_b: Metric,
    cell_a: CellInfluence,
    cell_b: CellInfluence,
    tested: Cells,
    swap: inference.Permutation | None,
    resamples: int,
    rng: random.Random,
) -> dict[str, Any]:
    n = len(cell_a.cases)
    out: dict[str, Any] = {
        "a": mean_a,
        "b": mean_b,
        "difference": None,
        "cases": n,
        "se": None,
        "ci": None,
        "ci_reason": None,
        "p_value": None,
        "p_floor": False,
        "test": None,
        "test_runs": len(tested[0]),
        "p_reason": None,
        "t": None,
        "df": None,
        "correlation": None,
        "mdd": None,
        "mdd_reason": None,
        "p_adjusted": None,
        "variance": None,
    }
    if mean_a is None or mean_b is None:
        out["p_reason"] = NO_CASES if n == 0 else UNDEFINED
        return out
    difference = mean_a - mean_b
    out["difference"] = difference
    info_a, info_b = cell_a.metrics[metric], cell_b.metrics[metric]
    diffs = _influence_differences(cell_a, cell_b, metric)
    if n >= MIN_CASES and diffs is not None:
        se = inference.se_of_influence(diffs)
        out["correlation"] = inference.pearson(info_a.influence or [], info_b.influence or [])
        out["se"] = 0.0 if se <= 1e-12 * max(1.0, abs(difference)) else se
        if out["se"]:
            out["t"], out["df"] = difference / se, n - 1
        runs_a, runs_b = len(info_a.runs), len(info_b.runs)
        out["variance"] = plan.paired_variance(n * se * se, info_a.within, info_b.within, runs_a, runs_b)

    _, test_a, _, test_b = tested
    if additive(metric):
        ea, eb = test_a.metrics[metric].contributions, test_b.metrics[metric].contributions
        result = inference.sign_flip([x - y for x, y in zip(ea or [], eb or [], strict=True)], resamples, rng)
        name, unit = "sign-flip", 1.0 / n if n else 1.0  # the statistic is the sum of the per-case differences
    else:
        result, name, unit = swap, "swap", 1.0  # the statistic is the difference itself
    if n < MIN_CASES:
        out["ci_reason"] = FEW_CASES
    if result is None:
        out["p_reason"] = NO_RESAMPLES
        out["ci_reason"] = out["ci_reason"] or NO_RESAMPLES
        return out
    out["p_value"], out["p_floor"] = result.p, result.floor
    out["test"] = f"{name}-{'exact' if result.exact else 'mc'}"
    if n < MIN_CASES:
        return out
    if result.critical is None or not math.isfinite(result.accepted):  # patterns whose metric is undefined
        out["ci_reason"] = out["mdd_reason"] = _unreachable(result)
        return out
    # The interval the test inverts: every difference it would not tell from this one.
    half = _half_width(result) * unit + 1e-12 * max(1.0, abs(difference))  # an end at 0 stays at 0, not 1e-17 from it
    low, high = difference - half, difference + half
    method = PERMUTATION
    mover = None if additive(metric) else _mover(info_a, info_b, n, metric)
    if mover is not None:
        low, high, method = min(low, mover[0]), max(high, mover[1]), PERMUTATION_MOVER
    low, high = clip(low, high, _difference_range(metric))
    out["ci"] = {
        "low": low,
        "high": high,
        "method": method,
        "cases": n,
        "df": None,
        "resamples": None if result.exact else resamples,
    }
    _minimum_detectable(out, result, test_a, test_b, metric, unit)
    return out


def _mover(info_a: MetricInfluence, info_b: MetricInfluence, n: int, metric: str) -> tuple[float, float] | None:
    """The MOVER interval of A's estimate minus B's from each model's own interval on these cases
    and the continuity-corrected correlation of their influence values, None where either has no
    interval (`estimates.interval`: too few cases, no variation, unstable)."""
    _, ci_a, _ = interval(info_a, n, metric)
    _, ci_b, _ = interval(info_b, n, metric)
    if ci_a is None or ci_b is None or info_a.estimate is None or info_b.estimate is None:
        return None
    return proportions.mover(
        (info_a.estimate, ci_a["low"], ci_a["high"]),
        (info_b.estimate, ci_b["low"], ci_b["high"]),
        proportions.corrected_correlation(info_a.influence or [], info_b.influence or []) or 0.0,
    )


def _half_width(result: inference.Permutation) -> float:
    """The permutation interval's half-width: for an exact test, halfway between the largest
    |difference| it accepts and the smallest it rejects (a continuity correction: its distribution
    lives on the few values the observed cases can sum to, the true difference anywhere between
    them, and an interval ending at the last accepted value covered a true shift of 0.1 in 90.8% of
    2,000 draws at 8 cases, Acc_U; 97.9% with the correction). The observed difference is one of
    those values, so the interval still holds 0 exactly when p >= 5%. A Monte Carlo test's sample
    has no such lattice, and the observed value may fall between its accepted and critical values,
    which the test rejects: its interval ends at the accepted value."""
    if result.exact and result.critical is not None:
        return (result.accepted + result.critical) / 2
    return result.accepted


def _unreachable(result: inference.Permutation) -> str:
    if result.differ == 0:
        return FLAT
    return (
        f"{UNREACHABLE}: {result.differ} case{'s' if result.differ != 1 else ''} differ; "
        f"the test's smallest p is {result.smallest_p:.3g}"
    )


def _influence_differences(cell_a: CellInfluence, cell_b: CellInfluence, metric: str) -> list[float] | None:
    ia, ib = cell_a.metrics[metric].influence, cell_b.metrics[metric].influence
    if ia is None or ib is None:
        return None
    return [x - y for x, y in zip(ia, ib, strict=True)]


def _minimum_detectable(
    out: dict[str, Any],
    result: inference.Permutation,
    test_a: CellInfluence,
    test_b: CellInfluence,
    metric: str,
    unit: float,
) -> None:
    """`mdd` from the test's own critical value: the difference it rejects at 5% plus z_0.80 times
    the standard error of the tested difference (80% power)."""
    diffs = _influence_differences(test_a, test_b, metric)
    if diffs is None or result.critical is None:
        return
    se = inference.se_of_influence(diffs)
    if se <= 0.0:  # every case moves the difference alike: no sampling spread to have power against
        out["mdd_reason"] = FLAT
        return
    out["mdd"] = result.critical * unit + inference.normal_quantile(inference.POWER) * se


def _difference_range(metric: str) -> tuple[float, float]:
    low, high = metric_range(metric)
    return low - high, high - low


def holm_over(comparisons: Sequence[dict]) -> None:
    """Holm's step-down adjustment (`inference.holm`) over the report's comparisons, in two families
    each held at a family-wise error of 5%: the headline metrics (each task's first metric, the one
    compact tables show, in every pair) and every other metric (in every pair). Each adjusted value
    goes beside its unadjusted one (`p_adjusted`)."""
    for headline in (True, False):
        tested = [
            d
            for c in comparisons
            for task, metrics in c["tasks"].items()
            for metric, d in metrics.items()
            if d["p_value"] is not None and (metric == TASKS[task].headline) == headline
        ]
        for d, (p, _) in zip(tested, inference.holm([(d["p_value"], d["p_floor"]) for d in tested]), strict=True):
            d["p_adjusted"] = p
