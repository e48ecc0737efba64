"""The statistics under the report's intervals and tests, as pure functions of numbers: the t
distribution, standard errors from per-case influence values, the beta distribution (for exact
binomial intervals), permutation tests' p-values and critical values (the exact and Monte Carlo
sign-flip test), Holm's adjustment. No I/O and no
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
from dataclasses import dataclass
from functools import cache
from operator import add
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


def beta_quantile(q: float, a: float, b: float) -> float:
    """The q-quantile of the Beta(a, b) distribution: x with I_x(a, b) = q (Newton's method on the
    beta density, kept inside a shrinking bracket; bisection where a step would leave it)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile {q} outside (0, 1)")
    lo, hi = 0.0, 1.0
    x = a / (a + b)
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    for _ in range(200):
        f = beta_regularized(a, b, x) - q
        if f < 0:
            lo = x
        else:
            hi = x
        inside = 0.0 < x < 1.0
        density = math.exp(log_norm + (a - 1.0) * math.log(x) + (b - 1.0) * math.log1p(-x)) if inside else 0.0
        step = x - f / density if density > 0.0 else -1.0
        nxt = step if lo < step < hi else (lo + hi) / 2.0
        if abs(nxt - x) < 1e-14 * max(1.0, x) or hi - lo < 1e-15:
            return nxt
        x = nxt
    return x


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


# The fewest degrees of freedom `kurtosis_df` gives (t_0.975 = 3.18): one case that carries all the
# variation (one success in 20 cases) would give 1 (t = 12.7, an interval of nearly every value),
# from a kurtosis that so few cases cannot estimate (docs/report.md measures the widths).
MIN_DF = 3


def kurtosis_df(influence: Sequence[float]) -> int:
    """The degrees of freedom of the t quantile for the standard error of these influence values:
    Satterthwaite's, from the variance of the variance estimate given the values' kurtosis. With
    excess kurtosis k, Var(s^2) = sigma^4 (2 / (n - 1) + k / n), which a chi-square matches with
    df = 2 / (2 / (n - 1) + k / n) (Box 1953, *Non-normality and tests on variances*, Biometrika 40:
    318-335): n - 1 for normal values, fewer when a few cases carry most of the variation (a low
    rate's skewed per-case values, a small class's ratio). k is the small-sample estimate G2
    (Joanes & Gill 1998, *Comparing measures of sample skewness and kurtosis*, The Statistician
    47: 183-189), kept at 0 or more; the result is rounded down and at least `MIN_DF` (or n - 1,
    if fewer). n - 1 with fewer than four values or none varying."""
    n = len(influence)
    if n < 2:
        raise ValueError("degrees of freedom need at least two cases")
    mean = math.fsum(influence) / n
    m2 = math.fsum((v - mean) ** 2 for v in influence) / n
    if n < 4 or m2 <= 0.0:
        return n - 1
    g2 = math.fsum((v - mean) ** 4 for v in influence) / n / (m2 * m2) - 3.0
    excess = max(0.0, ((n + 1) * g2 + 6.0) * (n - 1) / ((n - 2) * (n - 3)))
    df = 2.0 / (2.0 / (n - 1) + excess / n)
    return min(n - 1, max(MIN_DF, math.floor(df + 1e-9)))


def co_moments(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float] | None:
    """The sums of cross-products and squares about the means (sxy, sxx, syy); None when there are
    fewer than two pairs or either side does not vary."""
    n = len(x)
    if n < 2:
        return None
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    if sxx <= 0.0 or syy <= 0.0:
        return None
    return sxy, sxx, syy


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's correlation; None when either side does not vary."""
    moments = co_moments(x, y)
    if moments is None:
        return None
    sxy, sxx, syy = moments
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


# --- Permutation tests ---------------------------------------------------------------------------

EXACT_WORK = 200_000  # partial sums the exact sign-flip enumeration may visit before Monte Carlo


@dataclass(frozen=True)
class Permutation:
    """A two-sided permutation test's result.

    `p`: the share of patterns at least as extreme as the observed one (exact), or (1 + hits) /
    (1 + resamples) (Monte Carlo, Phipson & Smyth 2010); `floor`: no random pattern reached the
    observed value, the true p is below `p`. In the statistic's own units: `critical`, the smallest
    |statistic| a level-`ALPHA` test of these data rejects at, None when no pattern is extreme
    enough (the test cannot reject whatever the difference; `smallest_p` says how close it comes:
    2/2^k for k cases that differ, when every pattern's value is distinct); `accepted`, the
    largest |statistic| it does not reject (the permutation distribution's 1 - ALPHA quantile).
    """

    p: float
    exact: bool
    floor: bool
    critical: float | None
    accepted: float
    smallest_p: float
    differ: int = 0  # the cases whose patterns move the statistic (non-zero differences, cases that differ)


def critical_value(
    values: Sequence[float], weights: Sequence[float] | None = None, alpha: float = ALPHA
) -> tuple[float | None, float, float]:
    """(critical, accepted, smallest p) of a permutation distribution of |statistic| values (each
    with its weight, a probability; equal weights when None): the smallest v with P(|T| >= v) <=
    alpha (None when even the largest value is more likely than alpha), the largest v with
    P(|T| >= v) > alpha, and P(|T| >= the largest value)."""
    if weights is None:
        weights = [1.0 / len(values)] * len(values)
    # A pattern whose statistic is undefined (NaN) is never at least as extreme as the observed one
    # (the p-value's count says so too), so it ranks last; an infinite one ranks first.
    pairs = sorted(((-math.inf if math.isnan(v) else v, w) for v, w in zip(values, weights, strict=True)), reverse=True)
    tail, critical, accepted = 0.0, None, 0.0
    smallest = None
    i = 0
    while i < len(pairs):
        v = pairs[i][0]
        # Ties within rounding; an infinite v ties only with itself (inf - inf would be NaN, which
        # no value reaches: the loop took nothing and never ended).
        floor = v - 1e-12 * max(1.0, abs(v)) if math.isfinite(v) else v
        j = i
        while j < len(pairs) and pairs[j][0] >= floor:
            tail += pairs[j][1]
            j += 1
        if smallest is None:
            smallest = tail
        if tail > alpha + 1e-12:
            accepted = v
            break
        critical = v
        i = j
    return critical, accepted, (smallest if smallest is not None else 1.0)


def sign_flip(differences: Sequence[float], resamples: int, rng: random.Random) -> Permutation | None:
    """Two-sided sign-flip (paired permutation) test of per-case differences whose sum is the
    statistic: p = share of the 2^k sign patterns of the k non-zero differences whose sum is at
    least as far from 0 as the observed one (Fisher 1935; Good 2005, ch. 3). Exact under the null
    that each case's difference is symmetric about 0 (two exchangeable models), at any number of
    cases; asymptotically valid whenever the differences have mean 0.

    Exact when the enumeration of distinct partial sums stays within `EXACT_WORK` (it does for
    many cases when the differences lie on a lattice, as counts over runs do); otherwise Monte
    Carlo over `resamples` random patterns. None when Monte Carlo is needed but `resamples` is 0.
    """
    scale = math.fsum(abs(d) for d in differences)
    if scale == 0.0:
        return Permutation(1.0, True, False, None, 0.0, 1.0, 0)
    eps = 1e-9 * scale
    nonzero = [d for d in differences if abs(d) > eps * 1e-3]
    observed = abs(math.fsum(nonzero))
    exact = _sign_flip_exact(nonzero, observed, eps)
    if exact is not None:
        return exact
    if resamples <= 0:
        return None
    return _sign_flip_mc(nonzero, observed, eps, resamples, rng)


def _lattice(values: Sequence[float]) -> list[int] | None:
    """The values as integer multiples of one unit (per-case shares over runs, claims and cases
    are: counts over n/(k M)), or None when no unit up to 1/64 of the smallest value fits them."""
    smallest = min(abs(v) for v in values)
    for m in range(1, 65):
        unit = smallest / m
        steps = []
        for v in values:
            k = round(v / unit)
            if abs(v / unit - k) > 1e-6:
                break
            steps.append(k)
        else:
            return steps
    return None


def _sign_flip_exact(nonzero: Sequence[float], observed: float, eps: float) -> Permutation | None:
    """The exact sign-flip distribution, enumerated as counts of partial sums: on the differences'
    lattice (a list indexed by the sum, grown by one shift-and-add per case) when that visits at
    most `EXACT_WORK` sums, else of every pattern up to 2^16; None otherwise."""
    steps = _lattice(nonzero)
    total = 1 << len(nonzero)
    folded: dict[float, int] = {}
    if steps is not None:
        reach = work = 0
        for k in steps:
            reach += abs(k)
            work += 2 * reach + 1
        if work > EXACT_WORK:
            return None
        unit = abs(nonzero[0]) / abs(steps[0])
        counts = [1]  # counts[j]: the patterns whose sum is (j - reach) units
        for k in map(abs, steps):
            pad = [0] * (2 * k)
            counts = list(map(add, pad + counts, counts + pad))
        reach = (len(counts) - 1) // 2
        for j, count in enumerate(counts):
            if count:
                value = abs(j - reach) * unit
                folded[value] = folded.get(value, 0) + count
    elif len(nonzero) <= 16:
        states: dict[float, int] = {0.0: 1}
        for d in nonzero:
            grown: dict[float, int] = {}
            for s, count in states.items():
                grown[s + d] = grown.get(s + d, 0) + count
                grown[s - d] = grown.get(s - d, 0) + count
            states = grown
        for s, count in states.items():
            folded[abs(s)] = folded.get(abs(s), 0) + count
    else:
        return None
    hits = sum(count for value, count in folded.items() if value >= observed - eps)
    critical, accepted, smallest = critical_value(list(folded), [c / total for c in folded.values()])
    return Permutation(hits / total, True, False, critical, accepted, smallest, len(nonzero))


def _sign_flip_mc(
    nonzero: Sequence[float], observed: float, eps: float, resamples: int, rng: random.Random
) -> Permutation:
    # A pattern's sum is the total minus twice the sum of the flipped differences; those come from
    # tables of the 256 subset sums of each run of 8 differences, one byte of random bits each.
    total = math.fsum(nonzero)
    chunks = [nonzero[i : i + 8] for i in range(0, len(nonzero), 8)]
    tables = [_subset_sums(chunk) for chunk in chunks]
    width = len(chunks)
    sums = []
    for _ in range(resamples):
        flipped = sum(map(list.__getitem__, tables, rng.getrandbits(8 * width).to_bytes(width, "little")))
        sums.append(abs(total - 2.0 * flipped))
    hits = sum(s >= observed - eps for s in sums)
    return Permutation((1 + hits) / (1 + resamples), False, hits == 0, *mc_critical(sums, resamples), len(nonzero))


def mc_critical(values: Sequence[float], resamples: int) -> tuple[float | None, float, float]:
    """`critical_value` of a Monte Carlo test's sample of |statistic| values, whose p-value is
    (1 + hits) / (1 + resamples): the smallest value it rejects at, the largest it does not, and its
    smallest p, 1/(1 + B)."""
    share = 1.0 / (resamples + 1)
    critical, accepted, _ = critical_value(values, [share] * len(values), ALPHA - share)
    return critical, accepted, share


def _subset_sums(chunk: Sequence[float]) -> list[float]:
    """Entry b: the sum of the chunk's values whose bit is set in b (256 entries; bits beyond the
    chunk's length select nothing)."""
    sums = [0.0]
    for d in chunk:
        sums += [s + d for s in sums]
    while len(sums) < 256:
        sums += sums[: 256 - len(sums)]
    return sums


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
