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

Undefined values, one rule: the runs in which the point estimate is defined are held fixed. A
run whose metric is undefined is out of the mean (as in the reported mean) and out of every
influence value; if leaving one case out makes a held-fixed run's metric undefined (QWK when the
case holds every claim of some verdict), the jackknife has no value for that case and the metric
has no interval (`UNSTABLE`): it is never averaged over fewer runs, and never dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.statistics.family import Counts, Family

# The per-case additive metrics as (numerator, denominator) positions in a task's statistics
# (`tasks.Task.counts`: LCA tp, fp, fn, tn; DCG successes, cases; LJP claims per gold verdict (3),
# per predicted verdict (3), squared distance, correct claims). tests/report/test_influence.py
# holds these to `Task.from_counts`, the one definition of the metrics, on random statistics.
RATIOS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "acc_c": ((3,), (1, 3)),
    "acc_u": ((0,), (0, 2)),
    "success_rate": ((0,), (1,)),
    "accuracy": ((7,), (0, 1, 2)),
}

# The statistics each of the other metrics reads: the paired bootstrap packs these only (the
# same test holds them to `Task.from_counts`: changing any other statistic leaves the metric).
READS: dict[str, tuple[int, ...]] = {
    "macro_f1": (0, 1, 2, 3),
    "f1_u": (0, 1, 2),
    "f1_c": (1, 2, 3),
    "qwk": (0, 1, 2, 3, 4, 5, 6),
}

UNSTABLE = "undefined without one of its cases"


def additive(metric: str) -> bool:
    """Whether a metric is per-case additive (a clustered mean) rather than jackknifed."""
    return metric in RATIOS


@dataclass
class MetricInfluence:
    """One metric of a cell: its estimate (the mean over `runs`) and each case's influence."""

    estimate: Metric
    runs: list[int]  # the runs (positions in the cell's slots) where it is defined: held fixed
    influence: list[float] | None  # per case of the cell; None when undefined or `UNSTABLE`
    contributions: list[float] | None = None  # additive metrics: e_c, whose mean is the estimate
    reason: str | None = None  # why `influence` is None although `estimate` is not


@dataclass
class CellInfluence:
    cases: list[int]  # case indices (the clusters), in family order
    per_run: list[tuple[Metric, ...]]  # each slot's metrics on these cases
    sizes: list[int]  # each slot's n (histories, cases or claims)
    metrics: dict[str, MetricInfluence]


def _linear(positions: tuple[int, ...]) -> Callable[[Sequence[int]], int]:
    if len(positions) == 1:
        (a,) = positions
        return lambda x: x[a]
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
        out[metric] = _jackknifed(i, estimate, runs, loo, n)
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
    influence = [0.0] * n
    contributions = [0.0] * n
    for r in runs:
        xs = list(map(per_slot[r].get, cases))
        big_y, big_m = numerator(totals[r]), denominator(totals[r])
        theta = big_y / big_m
        scale = n / (k * big_m)
        ys = [0 if x is None else numerator(x) for x in xs]
        ms = [0 if x is None else denominator(x) for x in xs]
        influence = [i + scale * (y - theta * m) for i, y, m in zip(influence, ys, ms, strict=True)]
        contributions = [e + scale * y for e, y in zip(contributions, ys, strict=True)]
    return MetricInfluence(estimate, runs, influence, contributions)


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
    i: int, estimate: float, runs: list[int], loo: list[list[tuple[Metric, ...]]], n: int
) -> MetricInfluence:
    k = len(runs)
    without = [0.0] * n
    for r in runs:
        column = [values[i] for values in loo[r]]
        if None in column:
            return MetricInfluence(estimate, runs, None, reason=UNSTABLE)
        without = [w + v for w, v in zip(without, column, strict=True)]  # type: ignore[operator]
    influence = [(n - 1) * (estimate - w / k) for w in without]
    return MetricInfluence(estimate, runs, influence)
