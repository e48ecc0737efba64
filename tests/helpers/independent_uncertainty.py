"""Independent computations of the report's standard errors, intervals and paired tests, to check
`report.statistics.influence`, `estimates`, `compare` and `bootstrap` against.

Shares nothing with `lexpilot_batch`: records are scored by `score`, from the benchmark's
definitions record by record, and the statistics follow docs/report.md's formulas with numpy and
scipy, the textbook way (per-case means, leave-one-out recomputation, numpy quantiles).

`groups` is a list of groups, each a list of runs: {"run_id", "tasks": {task: [(case, class,
record), ...]}} (tests/report/statistics/test_uncertainty.py builds them beside the
RunResults).
"""

from __future__ import annotations

import math
import random
import re

import numpy as np
from scipy import stats

ORDINAL = {"支持": 0, "部分支持": 1, "驳回": 2}
LCA = ("macro_f1", "f1_u", "f1_c", "acc_c", "acc_u")
LJP = ("qwk", "accuracy")


def natural(text: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p)


def _div(a: float, b: float) -> float | None:
    return None if b == 0 else a / b


def score(task: str, records: list[dict]) -> dict[str, float | None]:
    if task == "lca":
        tp = sum(r["history_type"] == "underspecified" and r["label"] == "clarification" for r in records)
        fn = sum(r["history_type"] == "underspecified" and r["label"] == "judgment" for r in records)
        fp = sum(r["history_type"] == "complete" and r["label"] == "clarification" for r in records)
        tn = sum(r["history_type"] == "complete" and r["label"] == "judgment" for r in records)
        f1_u, f1_c = _div(2 * tp, 2 * tp + fp + fn), _div(2 * tn, 2 * tn + fp + fn)
        macro = None if f1_u is None or f1_c is None else (f1_u + f1_c) / 2
        return dict(zip(LCA, (macro, f1_u, f1_c, _div(tn, tn + fp), _div(tp, tp + fn)), strict=True))
    if task == "dcg":
        return {"success_rate": _div(sum(r["success"] for r in records), len(records))}
    pairs = [(ORDINAL[c["gold"]], ORDINAL[c["predicted"]]) for r in records for c in r["claims"]]
    n = len(pairs)
    if n == 0:
        return {"qwk": None, "accuracy": None}
    # Cohen's kappa with quadratic weights, from the observed and expected weighted matrices.
    observed = [[0.0] * 3 for _ in range(3)]
    for g, p in pairs:
        observed[g][p] += 1 / n
    rows = [sum(observed[i]) for i in range(3)]
    cols = [sum(observed[i][j] for i in range(3)) for j in range(3)]
    weight = [[(i - j) ** 2 / 4 for j in range(3)] for i in range(3)]
    num = sum(weight[i][j] * observed[i][j] for i in range(3) for j in range(3))
    den = sum(weight[i][j] * rows[i] * cols[j] for i in range(3) for j in range(3))
    qwk = None if den < 1e-12 else 1 - num / den
    return {"qwk": qwk, "accuracy": sum(g == p for g, p in pairs) / n}


def cases_of(groups: list[list[dict]]) -> list[str]:
    """Every case, class by class (classes by name), cases in natural order: the report's order."""
    class_of: dict[str, str] = {}
    for runs in groups:
        for run in runs:
            for rows in run["tasks"].values():
                for case, cls, _ in rows:
                    class_of[case] = cls
    return sorted(class_of, key=lambda c: (class_of[c], natural(c)))


def value(runs: list[dict], task: str, metric: str, cases: list[str]) -> float | None:
    """The mean over runs (where defined) of `metric` on `cases` (a case listed twice counts twice)."""
    values = []
    for run in runs:
        by_case: dict[str, list[dict]] = {}
        for case, _, record in run["tasks"][task]:
            by_case.setdefault(case, []).append(record)
        v = score(task, [r for c in cases for r in by_case.get(c, [])])[metric]
        if v is not None:
            values.append(v)
    return sum(values) / len(values) if values else None


def clustered_se(runs: list[dict], task: str, metric: str, cases: list[str]) -> float:
    """The case-clustered SE of a ratio metric Y/M averaged over runs, with the n/(n-1) correction
    (Miller 2024, Appendix A): sqrt(n/(n-1) * sum_c (mean_r (y_rc - theta_r m_rc) / M_r)^2) for the
    mean over runs of theta_r = Y_r / M_r."""
    residual = np.array(clustered_residuals(runs, task, metric, cases))
    n = len(cases)
    return math.sqrt(n / (n - 1) * float((residual**2).sum()))


def clustered_residuals(runs: list[dict], task: str, metric: str, cases: list[str]) -> list[float]:
    """Each case's mean_r (y_rc - theta_r m_rc) / M_r, whose squares `clustered_se` sums."""
    numerator, denominator = _ratio(task, metric)
    n = len(cases)
    residual = np.zeros(n)
    for run in runs:
        by_case: dict[str, list[dict]] = {}
        for case, _, record in run["tasks"][task]:
            by_case.setdefault(case, []).append(record)
        ys = np.array([sum(numerator(r) for r in by_case.get(c, [])) for c in cases], dtype=float)
        ms = np.array([sum(denominator(r) for r in by_case.get(c, [])) for c in cases], dtype=float)
        theta = ys.sum() / ms.sum()
        residual += (ys - theta * ms) / ms.sum() / len(runs)
    return [float(v) for v in residual]


def _ratio(task: str, metric: str):
    """(per-record numerator, per-record denominator) of a per-case additive metric."""
    if task == "dcg":
        return (lambda r: int(r["success"])), (lambda r: 1)
    if task == "lca":
        wanted = {"acc_c": ("complete", "judgment"), "acc_u": ("underspecified", "clarification")}[metric]
        return (lambda r: int((r["history_type"], r["label"]) == wanted)), (
            lambda r: int(r["history_type"] == wanted[0])
        )
    assert metric == "accuracy"
    return (lambda r: sum(c["gold"] == c["predicted"] for c in r["claims"])), (lambda r: len(r["claims"]))


def jackknife(runs: list[dict], task: str, metric: str, cases: list[str]) -> tuple[float | None, list[float]]:
    """(the jackknife SE, the leave-one-out values) of `metric`'s mean over the runs where it is
    defined on all `cases` (held fixed); SE None when leaving a case out makes one undefined."""
    runs = [r for r in runs if value([r], task, metric, cases) is not None]
    n = len(cases)
    each = [[value([r], task, metric, cases[:i] + cases[i + 1 :]) for r in runs] for i in range(n)]
    if any(v is None for row in each for v in row):
        return None, []
    loo = [sum(row) / len(row) for row in each]  # type: ignore[arg-type]
    values = np.array(loo, dtype=float)
    return math.sqrt((n - 1) / n * float(((values - values.mean()) ** 2).sum())), [float(v) for v in values]


def t_interval(estimate: float, se: float, n: int, level: float = 0.95) -> tuple[float, float]:
    half = stats.t.ppf(0.5 + level / 2, n - 1) * se
    return estimate - half, estimate + half


def paired_replicates(
    a: list[dict], b: list[dict], task: str, metric: str, cases: list[str], resamples: int, seed: int
) -> list[float]:
    """A - B in each resample of the paired unstratified bootstrap: `random.Random(seed)`, then
    `rng.choices(cases, k=len(cases))` per resample, the same draw for both."""
    rng = random.Random(seed)
    out = []
    for _ in range(resamples):
        drawn = rng.choices(cases, k=len(cases))
        va, vb = value(a, task, metric, drawn), value(b, task, metric, drawn)
        assert va is not None and vb is not None
        out.append(va - vb)
    return out


def bca(replicates: list[float], estimate: float, loo: list[float], level: float = 0.95) -> tuple[float, float]:
    """Efron's (1987) BCa interval: bias from the share of replicates below the estimate (ties
    half), acceleration from the leave-one-out values, ends at numpy's linear quantiles."""
    reps = np.array(replicates)
    z0 = stats.norm.ppf((np.sum(reps < estimate) + 0.5 * np.sum(reps == estimate)) / len(reps))
    d = np.mean(loo) - np.array(loo)
    a = float(np.sum(d**3) / (6 * np.sum(d**2) ** 1.5))
    ends = []
    for z in stats.norm.ppf([(1 - level) / 2, (1 + level) / 2]):
        ends.append(float(np.quantile(reps, stats.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z))))))
    return ends[0], ends[1]
