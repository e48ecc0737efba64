"""Intervals that keep their coverage at low rates and in small classes, as pure functions of
numbers (`estimates` says which metric gets which; docs/report.md gives the measurements):

- `clopper_pearson`: the exact binomial interval (Clopper & Pearson 1934) of x successes in n
  independent trials, from beta quantiles; at 0/n and n/n its one finite end is the exact one-sided
  bound (8/8: [0.631, 1]). For a one-run scope with one trial per case (DCG success, Acc_C,
  Acc_U), whose cases are independent trials.
- `korn_graubard`: the Clopper-Pearson interval at the *effective* sample size of a clustered
  proportion (Korn & Graubard 1998, *Confidence intervals for proportions with small expected
  number of positive counts estimated from survey data*, Survey Methodology 24: 193-201; the NCHS
  standard for proportions, Parker et al. 2017): n_eff = p (1 - p) / SE^2 with the case-clustered
  SE, at most the trials, scaled by (z / t_df)^2 for the estimated variance (df: cases - 1, or
  `inference.kurtosis_df`), and x = p n_eff.
  At p = 0 or 1, where no variance is estimated, the exact bound with each case one trial (its
  records may all be one: the most conservative design effect).
- `logit_t`: a t interval on the logit scale of the metric's range, mapped back (the delta
  method: SE / (u (1 - u)) on the logit of u = the value's place in its range; for QWK on
  [-1, 1] this is Fisher's z-transformation, atanh; Fisher 1921). Used with the jackknife SE for
  Macro-F1, F1_U, F1_C and QWK, whose t interval on the raw scale under-covered at low rates and in
  small classes (it is symmetric where the sampling distribution is not, near the range's ends).
- `mover`: the interval of a difference of two correlated estimates from each one's own interval
  (the method of variance estimates recovery, Zou & Donner 2008, *Construction of confidence
  limits about effect measures: a general approach*, Stat Med 27: 1693-1702; for two paired
  proportions with Wilson intervals it is Newcombe 1998's method 10, Stat Med 17: 2635-2650).
  Each end takes the variance of each estimate from the distance to the end of its own interval
  on the side the difference moves: an asymmetric interval where the two are.
- `corrected_correlation`: the correlation `mover` takes, Newcombe's (1998, method 10)
  continuity-corrected one: a positive covariance of the two models' per-case values less half the
  product of their ranges. For 0/1 values that is Newcombe's phi with AD - BC replaced by
  max(AD - BC - N/2, 0); for the influence values of a ratio (Macro-F1, F1, QWK) the range of
  each side stands for the 0-to-1 step of a paired proportion. Two near-deterministic models
  that differ on 0-2 of 20 cases correlate at 0.95-0.99, which the uncorrected MOVER takes as
  certain: its interval then stays as narrow as the discordance observed, although a rare
  discordance is what 20 cases cannot rule out (docs/report.md measures both).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lexpilot_batch.report.statistics import inference


def clopper_pearson(x: float, n: float, level: float = inference.LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of x successes in n trials; x and n may be effective,
    non-integer counts (`korn_graubard`)."""
    if n <= 0:
        raise ValueError("an interval of a proportion needs at least one trial")
    alpha = 1.0 - level
    low = 0.0 if x <= 0 else inference.beta_quantile(alpha / 2.0, x, n - x + 1.0)
    high = 1.0 if x >= n else inference.beta_quantile(1.0 - alpha / 2.0, x + 1.0, n - x)
    return low, high


def korn_graubard(
    p: float, se: float, trials: int, clusters: int, level: float = inference.LEVEL, df: int | None = None
) -> tuple[float, float]:
    """The Korn-Graubard interval of a proportion p estimated from `trials` trials in `clusters`
    clusters (cases), with its clustered standard error `se` and the degrees of freedom `df` of its
    variance (default clusters - 1)."""
    if p <= 0.0 or p >= 1.0:
        return clopper_pearson(round(p) * clusters, clusters, level)
    n_eff = trials if se <= 0.0 else min(trials, p * (1.0 - p) / (se * se))
    z = inference.normal_quantile(0.5 + level / 2.0)
    t = inference.t_quantile(0.5 + level / 2.0, clusters - 1 if df is None else df)
    n_eff *= (z / t) ** 2
    return clopper_pearson(p * n_eff, n_eff, level)


def logit_t(
    estimate: float, se: float, df: int, bounds: tuple[float, float], level: float = inference.LEVEL
) -> tuple[float, float]:
    """The t interval of `estimate` (standard error `se`) on the logit scale of `bounds`, mapped
    back; the plain t interval, cut to `bounds`, for an estimate at one of its ends."""
    lo, hi = bounds
    span = hi - lo
    u = (estimate - lo) / span
    t = inference.t_quantile(0.5 + level / 2.0, df)
    if not 0.0 < u < 1.0:
        return max(lo, estimate - t * se), min(hi, estimate + t * se)
    centre = math.log(u / (1.0 - u))
    half = t * se / (span * u * (1.0 - u))
    return lo + span * _expit(centre - half), lo + span * _expit(centre + half)


def _expit(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def corrected_correlation(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Newcombe's continuity-corrected correlation of paired per-case values (a negative one is
    kept as it is: it already widens the interval); None when either side does not vary."""
    moments = inference.co_moments(x, y)
    if moments is None:
        return None
    sxy, sxx, syy = moments
    if sxy > 0.0:
        sxy = max(0.0, sxy - (max(x) - min(x)) * (max(y) - min(y)) / 2.0)
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def mover(a: tuple[float, float, float], b: tuple[float, float, float], correlation: float) -> tuple[float, float]:
    """The MOVER interval of a - b, each given as (estimate, low, high) of its own interval, with
    `correlation` the correlation of the two estimates (Zou & Donner 2008, eq. 7):
    L = d - sqrt((a - l_a)^2 + (u_b - b)^2 - 2 r (a - l_a)(u_b - b)) and
    U = d + sqrt((u_a - a)^2 + (b - l_b)^2 - 2 r (u_a - a)(b - l_b))."""
    (ea, la, ua), (eb, lb, ub) = a, b
    r = max(-1.0, min(1.0, correlation))
    difference = ea - eb
    below = (ea - la) ** 2 + (ub - eb) ** 2 - 2.0 * r * (ea - la) * (ub - eb)
    above = (ua - ea) ** 2 + (eb - lb) ** 2 - 2.0 * r * (ua - ea) * (eb - lb)
    return difference - math.sqrt(max(0.0, below)), difference + math.sqrt(max(0.0, above))
