"""The statistics under the report's intervals and tests, as pure functions of numbers: the t
distribution, standard errors from per-case influence values, t intervals, the minimum detectable
difference, the exact and Monte Carlo sign-flip test, BCa, Holm's adjustment. No I/O and no
knowledge of tasks, runs or records (`influence`, `estimates` and `compare` bring those).

Why in pure Python: the product does not depend on numpy or scipy. The t distribution is the
regularized incomplete beta function (a continued fraction, Numerical Recipes 6.4), checked
against scipy in the tests to 1e-10.

Influence values. Every estimate here is a mean over runs of a metric computed on a set of cases,
and its uncertainty is carried by one number per case (the cluster): its *influence* I_c, with
estimate ≈ truth + mean(I_c) and the standard error sqrt(sum (I_c - mean I)^2 / (n (n - 1))).
For a mean of per-case values I_c is the case's value minus the mean, and that SE is the
case-clustered standard error with the finite-cluster correction n/(n-1) (Miller 2024, *Adding
Error Bars to Evals*, Appendix A; inspect_ai's `stderr(cluster=...)`); for any other metric the
jackknife gives I_c = (n - 1)(estimate - estimate without case c), and the same SE is the
jackknife's (Efron & Tibshirani 1993, ch. 11).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from functools import cache
from statistics import NormalDist

LEVEL = 0.95
ALPHA = 0.05
POWER = 0.80
_NORMAL = NormalDist()


# --- The t distribution ------------------------------------------------------------------------


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return h


def beta_regularized(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    # The fraction converges fast on this side of the mean; use the symmetry I_x(a,b) = 1 - I_{1-x}(b,a).
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return beta_regularized(df / 2.0, 0.5, df / (df + t * t))


def t_cdf(t: float, df: float) -> float:
    tail = t_two_sided(t, df) / 2.0
    return 1.0 - tail if t > 0 else tail


@cache
def t_quantile(q: float, df: float) -> float:
    """The q-quantile of Student's t (bisection on `t_cdf`; cached, the report asks for a few)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile {q} outside (0, 1)")
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def normal_cdf(z: float) -> float:
    return _NORMAL.cdf(z)


def normal_quantile(q: float) -> float:
    return _NORMAL.inv_cdf(q)


# --- Standard errors, intervals, power ----------------------------------------------------------


def se_of_influence(influence: Sequence[float]) -> float:
    """The standard error carried by per-case influence values (see the module docstring):
    sqrt(sum (I - mean I)^2 / (n (n - 1))). Needs at least two cases."""
    n = len(influence)
    if n < 2:
        raise ValueError("a standard error needs at least two cases")
    mean = math.fsum(influence) / n
    return math.sqrt(math.fsum((v - mean) ** 2 for v in influence) / (n * (n - 1)))


def t_interval(estimate: float, se: float, df: int, level: float = LEVEL) -> tuple[float, float]:
    half = t_quantile(0.5 + level / 2.0, df) * se
    return estimate - half, estimate + half


def t_test(difference: float, se: float, df: int) -> tuple[float, float]:
    """(t, two-sided p) of `difference` against 0 with standard error `se` (> 0)."""
    t = difference / se
    return t, t_two_sided(t, df)


def minimum_detectable(se: float, df: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference a two-sided level-`alpha` t test with this standard error
    detects with probability `power`: (t_{1-alpha/2} + t_{power}) * se (Bloom 1995)."""
    return (t_quantile(1.0 - alpha / 2.0, df) + t_quantile(power, df)) * se


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's correlation; None when either side does not vary."""
    n = len(x)
    if n < 2:
        return None
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    if sxx <= 0.0 or syy <= 0.0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


# --- The sign-flip test ------------------------------------------------------------------------

EXACT_STATES = 1 << 16  # distinct partial sums the exact enumeration may hold before Monte Carlo


def sign_flip(differences: Sequence[float], resamples: int, rng: random.Random) -> tuple[float, str, bool] | None:
    """Two-sided sign-flip (paired permutation) test of per-case differences whose sum is the
    statistic: p = share of the 2^k sign patterns of the k non-zero differences whose sum is at
    least as far from 0 as the observed one (Fisher 1935; Good 2005, ch. 3).

    Exact when the distinct partial sums stay within `EXACT_STATES` (they do for any number of
    cases when the differences lie on a lattice, as counts over runs do); otherwise Monte Carlo
    over `resamples` random patterns, p = (1 + hits) / (1 + resamples) (Phipson & Smyth 2010).
    Returns (p, "exact" | "monte carlo", floor: no random pattern reached the observed sum), or
    None when Monte Carlo is needed but `resamples` is 0.
    """
    scale = math.fsum(abs(d) for d in differences)
    if scale == 0.0:
        return 1.0, "exact", False
    eps = 1e-9 * scale
    nonzero = [d for d in differences if abs(d) > eps * 1e-3]
    observed = abs(math.fsum(nonzero))
    # Partial sums keyed on a grid far finer than any real difference, so that equal sums merge.
    grid = eps * 1e-3
    states: dict[int, int] = {0: 1}
    exact = True
    for d in nonzero:
        step = round(d / grid)
        grown: dict[int, int] = {}
        for s, count in states.items():
            grown[s + step] = grown.get(s + step, 0) + count
            grown[s - step] = grown.get(s - step, 0) + count
        states = grown
        if len(states) > EXACT_STATES:
            exact = False
            break
    if exact:
        threshold = round(observed / grid) - round(eps / grid)
        hits = sum(count for s, count in states.items() if abs(s) >= threshold)
        return hits / (1 << len(nonzero)), "exact", False
    if resamples <= 0:
        return None
    hits = 0
    for _ in range(resamples):
        total = math.fsum(d if rng.random() < 0.5 else -d for d in nonzero)
        hits += abs(total) >= observed - eps
    return (1 + hits) / (1 + resamples), "monte carlo", hits == 0


# --- BCa -----------------------------------------------------------------------------------------


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly between order statistics (numpy's
    default, "type 7")."""
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def acceleration(influence: Sequence[float]) -> float:
    """BCa's acceleration from jackknife influence values (Efron 1987, eq. 6.6)."""
    n = len(influence)
    mean = math.fsum(influence) / n
    second = math.fsum((v - mean) ** 2 for v in influence)
    if second <= 0.0:
        return 0.0
    return math.fsum((v - mean) ** 3 for v in influence) / (6.0 * second**1.5)


def _bias(ordered: Sequence[float], estimate: float) -> float | None:
    below = sum(v < estimate for v in ordered) + 0.5 * sum(v == estimate for v in ordered)
    share = below / len(ordered)
    if not 0.0 < share < 1.0:
        return None
    return normal_quantile(share)


def bca_interval(
    ordered: Sequence[float], estimate: float, accel: float, level: float = LEVEL
) -> tuple[float, float] | None:
    """The BCa interval (Efron 1987) of sorted resample values; None when every resample lies on
    one side of the estimate (no bias correction exists: the distribution is degenerate)."""
    z0 = _bias(ordered, estimate)
    if z0 is None:
        return None
    ends = []
    for z in (normal_quantile((1 - level) / 2), normal_quantile((1 + level) / 2)):
        shifted = z0 + z
        denominator = 1.0 - accel * shifted
        if denominator <= 0.0:
            return None
        ends.append(percentile(ordered, normal_cdf(z0 + shifted / denominator)))
    return ends[0], ends[1]


def bca_p(ordered: Sequence[float], estimate: float, accel: float) -> tuple[float, bool] | None:
    """The two-sided p-value that inverts the BCa interval: the level at which 0 is an end of it.

    (p, floor): when no resample lies beyond 0 the resamples cannot resolve p, which is then
    reported as below 2 / (resamples + 1), the smallest a bootstrap test of that many resamples
    gives. None when the bias correction does not exist.
    """
    b = len(ordered)
    floor = 2.0 / (b + 1)
    z0 = _bias(ordered, estimate)
    if z0 is None:
        return None
    share = (sum(v < 0.0 for v in ordered) + 0.5 * sum(v == 0.0 for v in ordered)) / b
    if not 0.0 < share < 1.0:
        return floor, True
    # 0 is the BCa end of nominal normal quantile z when Phi^-1(share) = z0 + (z0 + z) / (1 - a (z0 + z)).
    w = normal_quantile(share) - z0
    if 1.0 + accel * w <= 0.0:
        return floor, True
    z = w / (1.0 + accel * w) - z0
    p = min(1.0, 2.0 * normal_cdf(-abs(z)))
    return (floor, True) if p < floor else (p, False)


# --- Multiple comparisons ------------------------------------------------------------------------


def holm(p_values: Sequence[tuple[float, bool]]) -> list[tuple[float, bool]]:
    """Holm's step-down adjustment (Holm 1979) of (p, floor) pairs, in their order: the i-th
    smallest of m becomes max over j <= i of min(1, (m - j + 1) p_(j)). An adjusted value that
    comes from a floor is a floor too."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i][0])
    out: list[tuple[float, bool]] = [(1.0, False)] * m
    running: tuple[float, bool] = (0.0, False)
    for rank, i in enumerate(order):
        p, floor = p_values[i]
        scaled = (min(1.0, (m - rank) * p), floor and (m - rank) * p < 1.0)
        if scaled[0] > running[0]:
            running = scaled
        out[i] = running
    return out
