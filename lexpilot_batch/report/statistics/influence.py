"""Per-case influence values of one (group, task, scope): each metric's mean over runs and, for
every case, how much that case moves it. Every interval and paired test of the report is computed
from these (`inference`, `estimates`, `compare`).

Two kinds of metric:

- *Per-case additive* (`RATIOS`): a ratio of sums of per-case statistics, Y/M, in each run: Acc_C
  (TN over complete histories), Acc_U, DCG success (over cases) and LJP accuracy (over claims).
  The influence of case c on the mean over the k runs is its linearization,
  I_c = n/k * sum_r (y_rc - theta_r m_rc) / M_r, which makes `inference.se_of_influence` the
  case-clustered standard error with the finite-cluster correction (Miller 2024, Appendix A;
  inspect_ai's `stderr(cluster=...)`): runs, histories and claims are nested in their case. Its
  per-case *contribution* e_c = n/k * sum_r y_rc / M_r (mean: the estimate) is what the sign-flip
  test flips.
- *The others* (Macro-F1, F1_U, F1_C, QWK): not averages of per-case values. The jackknife:
  I_c = (n - 1)(estimate - the estimate without case c), each run's metric recomputed without the
  case's statistics.

Either way I_c is the mean over the runs of per-run values u_rc (n/M_r (y_rc - theta_r m_rc), or
(n - 1)(theta_r - theta_r without c)), whose spread within a case is how much the case moves from
run to run (`MetricInfluence.within`): the part of the uncertainty more runs remove.

Undefined values, one rule: the runs in which the point estimate is defined are held fixed. A
run whose metric is undefined is out of the mean (as in the reported mean) and out of every
influence value; if leaving one case out makes a held-fixed run's metric undefined (QWK when the
case holds every claim of some verdict), the jackknife has no value for that case and the metric
has no interval (`UNSTABLE`): it is never averaged over fewer runs, and never dropped silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, itemgetter, mul

from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.statistics.family import Counts, Family

# The per-case additive metrics as (numerator, denominator) positions in a task's statistics
# (`tasks.Task.counts`: LCA tp, fp, fn, tn; DCG successes, cases; LJP claims per gold verdict (3),
# per predicted verdict (3), squared distance, correct claims).
RATIOS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "acc_c": ((3,), (1, 3)),
    "acc_u": ((0,), (0, 2)),
    "success_rate": ((0,), (1,)),
    "accuracy": ((7,), (0, 1, 2)),
}

UNSTABLE = "undefined without one of its cases"


def additive(metric: str) -> bool:
    """Whether a metric is per-case additive (a clustered mean) rather than jackknifed."""
    return metric in RATIOS


@dataclass
class MetricInfluence:
    """One metric of a cell: its estimate (the mean over `runs`) and each case's influence.

    `within`: the within-case variance of the per-run influence values u_rc, whose mean over the
    runs is the case's influence (I_c = mean_r u_rc): sum_c sum_r (u_rc - I_c)^2 / (n (k - 1)),
    how much a case's value moves from run to run (None with one run). `variance` splits the
    standard error with it."""

    estimate: Metric
    runs: list[int]  # the runs (positions in the cell's slots) where it is defined: held fixed
    influence: list[float] | None  # per case of the cell; None when undefined or `UNSTABLE`
    contributions: list[float] | None = None  # additive metrics: e_c, whose mean is the estimate
    reason: str | None = None  # why `influence` is None although `estimate` is not
    within: float | None = None
    trials: int = 0  # additive metrics: the trials (histories, cases, claims) summed over the runs
    binary: bool = False  # additive metrics: one run, one trial per case (a binomial count)


@dataclass
class CellInfluence:
    cases: list[int]  # case indices (the clusters), in family order
    per_run: list[tuple[Metric, ...]]  # each slot's metrics on these cases
    sizes: list[int]  # each slot's n (histories, cases or claims)
    metrics: dict[str, MetricInfluence]


def _linear(positions: tuple[int, ...]) -> Callable[[Sequence[int]], int]:
    if len(positions) == 1:
        return itemgetter(positions[0])
    if len(positions) == 2:
        a, b = positions
        return lambda x: x[a] + x[b]
    return lambda x: sum(x[p] for p in positions)


def cell_influence(family: Family, slots: Sequence[int], cases: Sequence[int], task: str) -> CellInfluence:
    """The influence of each of `cases` on each metric of `task`, over the runs `slots` (indices
    into `family.slots`)."""
    spec = TASKS[task]
    width = spec.width
    per_slot = [family.counts[s] for s in slots]
    totals: list[list[int]] = []
    for counts in per_slot:
        present = [x for x in map(counts.get, cases) if x is not None]
        totals.append([sum(column) for column in zip(*present, strict=True)] if present else [0] * width)
    per_run = [spec.from_counts(t) for t in totals]
    sizes = [spec.size(t) for t in totals]
    n = len(cases)
    loo: list[list[tuple[Metric, ...]]] | None = None  # per run, per case: metrics without the case
    out: dict[str, MetricInfluence] = {}
    for i, metric in enumerate(spec.metrics):
        runs = [r for r, values in enumerate(per_run) if values[i] is not None]
        if not runs:
            out[metric] = MetricInfluence(None, [], None)
            continue
        estimate = sum(per_run[r][i] for r in runs) / len(runs)  # type: ignore[misc]
        if n < 2:
            out[metric] = MetricInfluence(estimate, runs, None)
            continue
        if additive(metric):
            out[metric] = _linearized(metric, estimate, runs, per_slot, totals, cases)
            continue
        if loo is None:
            loo = [
                _leave_one_out(spec.from_counts, per_slot[r], totals[r], per_run[r], cases) for r in range(len(slots))
            ]
        out[metric] = _jackknifed(i, estimate, runs, per_run, loo, n)
    return CellInfluence(list(cases), per_run, sizes, out)


def _linearized(
    metric: str,
    estimate: float,
    runs: list[int],
    per_slot: Sequence[dict[int, Counts]],
    totals: list[list[int]],
    cases: Sequence[int],
) -> MetricInfluence:
    num_at, den_at = RATIOS[metric]
    numerator, denominator = _linear(num_at), _linear(den_at)
    n, k = len(cases), len(runs)
    influence = [0.0] * n  # sum over runs of u_rc (divided by k at the end)
    squares = [0.0] * n  # sum over runs of u_rc^2
    shares = [0.0] * n  # sum over runs of n y_rc / M_r
    trials = 0
    binary = k == 1
    zero = (0,) * len(totals[runs[0]])
    for r in runs:
        xs = list(map(per_slot[r].get, cases, repeat(zero)))
        big_y, big_m = numerator(totals[r]), denominator(totals[r])
        scale = n / big_m
        centre = scale * big_y / big_m  # n theta_r / M_r
        ys = list(map(numerator, xs))
        ms = list(map(denominator, xs))
        trials += big_m
        binary = binary and all(m == 1 for m in ms)
        us = [scale * y - centre * m for y, m in zip(ys, ms, strict=True)]
        influence = list(map(add, influence, us))
        squares = list(map(add, squares, map(mul, us, us)))
        shares = list(map(add, shares, map(mul, ys, repeat(scale))))
    influence = [i / k for i in influence]
    contributions = [e / k for e in shares]
    return MetricInfluence(
        estimate, runs, influence, contributions, within=_within(influence, squares, k), trials=trials, binary=binary
    )


def _within(influence: list[float], squares: list[float], k: int) -> float | None:
    """sum_c sum_r (u_rc - I_c)^2 / (n (k - 1)) from each case's I_c and sum_r u_rc^2."""
    if k < 2 or not influence:
        return None
    spread = math.fsum(q - k * i * i for q, i in zip(squares, influence, strict=True))
    return max(0.0, spread) / (len(influence) * (k - 1))


def _leave_one_out(
    from_counts: Callable[[Sequence[int]], tuple[Metric, ...]],
    counts: dict[int, Counts],
    total: list[int],
    point: tuple[Metric, ...],
    cases: Sequence[int],
) -> list[tuple[Metric, ...]]:
    # Cases with equal statistics leave equal remainders: one evaluation each (LCA has at most nine).
    memo: dict[Counts | None, tuple[Metric, ...]] = {None: point}  # None: the run did not score the case
    out = []
    for x in map(counts.get, cases):
        values = memo.get(x)
        if values is None:
            values = memo[x] = from_counts([t - v for t, v in zip(total, x, strict=True)])  # type: ignore[arg-type]
        out.append(values)
    return out


def _jackknifed(
    i: int,
    estimate: float,
    runs: list[int],
    per_run: list[tuple[Metric, ...]],
    loo: list[list[tuple[Metric, ...]]],
    n: int,
) -> MetricInfluence:
    k = len(runs)
    influence = [0.0] * n  # sum over runs of u_rc (divided by k at the end)
    squares = [0.0] * n
    pick = itemgetter(i)
    for r in runs:
        column = list(map(pick, loo[r]))
        if None in column:
            return MetricInfluence(estimate, runs, None, reason=UNSTABLE)
        # u_rc = (n - 1)(run r's value - its value without case c); their mean over the runs is I_c.
        theta = (n - 1) * per_run[r][i]  # type: ignore[operator]
        us = [theta - (n - 1) * v for v in column]
        influence = list(map(add, influence, us))
        squares = list(map(add, squares, map(mul, us, us)))
    influence = [a / k for a in influence]
    return MetricInfluence(estimate, runs, influence, within=_within(influence, squares, k))
