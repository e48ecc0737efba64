"""Model comparisons: for groups that differ only in the evaluated model (one `family.Family`), each
pair's difference of every task metric (mean over runs of A minus that of B), on the cases both
scored, paired case by case (with `--partial`, where one model scored fewer, `a`, `b` and the
difference are the means on the cases both scored, and the bootstrap, which draws from every case,
gives way to the jackknife's t).

Per metric (docs/report.md gives the measurements behind each choice):

- `se`: the standard error of the difference, from the per-case differences of the two models'
  influence values (`influence`: case-clustered for per-case additive metrics, jackknife for
  Macro-F1, F1_U, F1_C and QWK); `correlation`: Pearson's between the two models' per-case
  influence values (for a per-case mean, their per-case scores); `mdd`: the minimum detectable
  difference at 80% power (`inference.minimum_detectable`). From `estimates.MIN_CASES` cases.
- the p-value (`test` names the method):
  - below `PERMUTATION_BELOW` cases, a paired permutation test: for per-case additive metrics the
    sign-flip test of the per-case differences (`sign-flip`, exact for any number of cases when
    the differences lie on a lattice); for the others the two models' records of a case swapped
    (`swap`, run i of A with run i of B, when both models have the same number of runs: exact
    over all 2^k patterns of the k cases that differ up to `swap.EXACT_SWAPS`, Monte Carlo beyond), or,
    when the models have different numbers of runs, the sign-flip test of the differences of the
    two models' jackknife pseudo-values, the estimate plus each case's influence
    (`sign-flip-jackknife`, approximate: 4.7-6.7% type-I error at 5% in `stat_sim`'s null);
  - from there on, the paired t test on the influence differences (`paired-t`, `jackknife-t`;
    df = cases - 1), or for Macro-F1, F1_U, F1_C and QWK from `BOOTSTRAP_FROM` cases the paired
    unstratified bootstrap (`bootstrap-bca`: the p-value that inverts its BCa interval).
- `ci`: the t interval of the difference (`clustered-t`, `jackknife-t`), or the bootstrap's BCa
  interval where the bootstrap gives the p-value.
- `p_floor`: the resamples cannot resolve the p-value, which is below `p_value` (2/(B+1) for the
  bootstrap, 1/(B+1) for a Monte Carlo permutation test); never a p-value at a floor unflagged.
- `p_adjusted`: with `--adjust holm`, Holm's step-down adjustment over the metrics of the
  comparison (every task metric with a p-value), which holds the family-wise error at 5%.

Without a baseline every pair of a family is compared, A the earlier group in report order; with
`--baseline MODEL` every other model of a family is compared with that model's group (A the other
model, B the baseline). Runs are not paired across models: each model's runs are averaged first.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.statistics import inference
from lexpilot_batch.report.statistics.bootstrap import USABLE, Need, paired_bootstrap
from lexpilot_batch.report.statistics.estimates import (
    FEW_CASES,
    FLAT,
    MIN_CASES,
    FamilyEstimates,
    clip,
    method_of,
    metric_range,
)
from lexpilot_batch.report.statistics.family import OVERALL, Family
from lexpilot_batch.report.statistics.influence import CellInfluence, additive
from lexpilot_batch.report.statistics.swap import PERMUTATION_BELOW, swap_tests

BOOTSTRAP_FROM = 50  # from this many cases, Macro-F1, F1_U, F1_C and QWK use the paired bootstrap
ADJUSTMENTS = ("none", "holm")

NO_RESAMPLES = "needs resamples (--bootstrap 0)"
UNDEFINED = "undefined"
NO_CASES = "n/a: no case both scored"  # a `--partial` pair with nothing finished in common


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
    adjust: str = "none",
    level: float = inference.LEVEL,
) -> list[dict]:
    """The comparisons of one family, in the `comparisons` JSON shape (`report.document`)."""
    local = {g: i for i, g in enumerate(members)}  # report index -> index in the family
    plan = []
    for a, b in pairs(members, [g["model"] for g in groups], baseline):
        ga, gb = groups[a], groups[b]
        shared = [t for t in TASKS if t in ga["tasks"] and t in gb["tasks"]]
        cells = {t: _paired_cells(family, estimates, local[a], local[b], t) for t in shared}
        plan.append((a, b, cells))
    resampled = _bootstrap(family, estimates, plan, local, resamples, seed)
    rng = random.Random(seed)
    out = []
    for a, b, cells in plan:
        ga, gb = groups[a], groups[b]
        tasks: dict[str, dict[str, dict]] = {}
        for task, (slots_a, cell_a, slots_b, cell_b) in cells.items():
            swaps = swap_tests(family, task, (slots_a, cell_a), (slots_b, cell_b), resamples, rng)
            tasks[task] = {}
            whole = _whole(estimates, local[a], local[b], task, cell_a, cell_b)
            for i, metric in enumerate(TASKS[task].metrics):
                if whole:  # each model's reported mean
                    mean_a = ga["tasks"][task]["overall"][metric]["mean"]
                    mean_b = gb["tasks"][task]["overall"][metric]["mean"]
                else:  # `--partial`: the means on the cases both scored, which the difference is of
                    mean_a, mean_b = cell_a.metrics[metric].estimate, cell_b.metrics[metric].estimate
                # The bootstrap is kept per group, drawn over each group's own cases: never for a pair
                # on the cases both scored, even where another pair had each group's resamples drawn.
                boot = (resampled.get((local[a], task)), resampled.get((local[b], task))) if whole else (None, None)
                tasks[task][metric] = _difference(
                    metric, i, mean_a, mean_b, cell_a, cell_b, boot, swaps.get(i), resamples, rng, level
                )
        if adjust == "holm":
            _holm(tasks)
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


def _paired_cells(
    family: Family, estimates: FamilyEstimates, a: int, b: int, task: str
) -> tuple[list[int], CellInfluence, list[int], CellInfluence]:
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


def _whole(estimates: FamilyEstimates, a: int, b: int, task: str, cell_a: CellInfluence, cell_b: CellInfluence) -> bool:
    """Whether a pair's cells are both groups' own (every case each scored), not those of the cases
    both scored."""
    return cell_a is estimates.cells[(a, task, OVERALL)][1] and cell_b is estimates.cells[(b, task, OVERALL)][1]


def _bootstrap(
    family: Family, estimates: FamilyEstimates, plan: list, local: dict[int, int], resamples: int, seed: int
) -> dict[tuple[int, str], dict[int, list[Metric]]]:
    """The paired bootstrap of every (group, task) a comparison from `BOOTSTRAP_FROM` cases needs."""
    if resamples <= 0:
        return {}
    needs: dict[tuple[int, str], Need] = {}
    for a, b, cells in plan:
        for task, (slots_a, cell_a, slots_b, cell_b) in cells.items():
            if len(cell_a.cases) < BOOTSTRAP_FROM or not _whole(estimates, local[a], local[b], task, cell_a, cell_b):
                # The bootstrap draws from every case of the family: a comparison on the cases
                # both of a `--partial` pair scored has the t interval of its jackknife instead.
                continue
            for g, slots, cell in ((local[a], slots_a, cell_a), (local[b], slots_b, cell_b)):
                runs = {
                    i: cell.metrics[m].runs
                    for i, m in enumerate(TASKS[task].metrics)
                    if not additive(m) and cell.metrics[m].runs
                }
                if runs:
                    needs[(g, task)] = (g, task, slots, runs)
    return paired_bootstrap(family, list(needs.values()), resamples, seed) if needs else {}


def _difference(
    metric: str,
    i: int,
    mean_a: Metric,
    mean_b: Metric,
    cell_a: CellInfluence,
    cell_b: CellInfluence,
    boot: tuple[dict[int, list[Metric]] | None, dict[int, list[Metric]] | None],
    swap: tuple[float, str, bool] | None,
    resamples: int,
    rng: random.Random,
    level: float,
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
        "p_reason": None,
        "t": None,
        "df": None,
        "correlation": None,
        "mdd": None,
        "p_adjusted": None,
    }
    if mean_a is None or mean_b is None:
        out["p_reason"] = NO_CASES if n == 0 else UNDEFINED
        return out
    difference = mean_a - mean_b
    out["difference"] = difference
    info_a, info_b = cell_a.metrics[metric], cell_b.metrics[metric]
    diffs = None
    if info_a.influence is not None and info_b.influence is not None:
        diffs = [x - y for x, y in zip(info_a.influence, info_b.influence, strict=True)]
    unusable = info_a.reason or info_b.reason
    se = None
    if n < MIN_CASES:
        out["ci_reason"] = FEW_CASES
    elif diffs is None:
        out["ci_reason"] = unusable or FEW_CASES
    else:
        se = inference.se_of_influence(diffs)
        out["correlation"] = inference.pearson(info_a.influence or [], info_b.influence or [])
        if se <= 1e-12 * max(1.0, abs(difference)):
            se = 0.0
            out["ci_reason"] = FLAT
        else:
            out["t"], _ = inference.t_test(difference, se, n - 1)
            out["df"] = n - 1
            out["mdd"] = inference.minimum_detectable(se, n - 1)
            low, high = clip(*inference.t_interval(difference, se, n - 1, level), _difference_range(metric))
            out["ci"] = _ci(low, high, method_of(metric), n, n - 1, None)
        out["se"] = se

    if additive(metric):
        if n >= PERMUTATION_BELOW and se:
            out["p_value"] = inference.t_test(difference, se, n - 1)[1]
            out["test"] = "paired-t"
        else:
            contributions = [x - y for x, y in zip(info_a.contributions or [], info_b.contributions or [], strict=True)]
            _permutation(out, inference.sign_flip(contributions, resamples, rng), "sign-flip")
        return out

    if n < PERMUTATION_BELOW:
        if swap is not None:
            _permutation(out, swap, "swap")
        elif diffs is not None:
            # Flipped: the differences of the jackknife pseudo-values (the estimate plus a case's
            # influence), whose mean is the difference; the influence values alone sum to about 0
            # whatever the difference, and were never told apart from their flips.
            pseudo = [difference + d for d in diffs]
            _permutation(out, inference.sign_flip(pseudo, resamples, rng), "sign-flip-jackknife")
        else:
            out["p_reason"] = unusable or NO_RESAMPLES
        return out
    values_a, values_b = (None if b is None else b.get(i) for b in boot)
    if values_a is not None and values_b is not None:
        resampled = [None if x is None or y is None else x - y for x, y in zip(values_a, values_b, strict=True)]
        usable = sorted(d for d in resampled if d is not None)
        if len(usable) >= USABLE * len(resampled):
            accel = inference.acceleration(diffs) if diffs is not None else 0.0
            bounds = inference.bca_interval(usable, difference, accel, level)
            tested = inference.bca_p(usable, difference, accel)
            if bounds is not None and tested is not None:
                low, high = clip(*bounds, _difference_range(metric))
                if high - low > 1e-12 * max(1.0, abs(difference)):
                    out["ci"] = _ci(low, high, "bootstrap-bca", n, None, len(usable))
                    out["ci_reason"] = None
                else:  # every resample alike: an interval of width 0 is no interval
                    out["ci"], out["ci_reason"] = None, FLAT
                out["p_value"], out["p_floor"] = tested
                out["test"] = "bootstrap-bca"
                return out
    if se:
        out["p_value"] = inference.t_test(difference, se, n - 1)[1]
        out["test"] = "jackknife-t"
    elif swap is not None:
        _permutation(out, swap, "swap")
    else:
        out["p_reason"] = unusable or FLAT
    return out


def _difference_range(metric: str) -> tuple[float, float]:
    low, high = metric_range(metric)
    return low - high, high - low


def _ci(low: float, high: float, method: str, n: int, df: int | None, resamples: int | None) -> dict:
    return {"low": low, "high": high, "method": method, "cases": n, "df": df, "resamples": resamples}


def _permutation(out: dict[str, Any], result: tuple[float, str, bool] | None, name: str) -> None:
    if result is None:
        out["p_reason"] = NO_RESAMPLES
        return
    p, kind, floor = result
    out["p_value"], out["p_floor"] = p, floor
    out["test"] = f"{name}-{'exact' if kind == 'exact' else 'mc'}"


def _holm(tasks: dict[str, dict[str, dict]]) -> None:
    tested = [d for metrics in tasks.values() for d in metrics.values() if d["p_value"] is not None]
    for d, (p, _) in zip(tested, inference.holm([(d["p_value"], d["p_floor"]) for d in tested]), strict=True):
        d["p_adjusted"] = p
