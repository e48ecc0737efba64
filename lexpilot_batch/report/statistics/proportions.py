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
  SE, at most the trials, scaled by (z / t_{cases-1})^2 for the estimated variance, and x = p n_eff.
  At p = 0 or 1, where no variance is estimated, the exact bound with each case one trial (its
  records may all be one: the most conservative design effect).
- `logit_t`: a t interval on the logit scale of the metric's range, mapped back (the delta
  method: SE / (u (1 - u)) on the logit of u = the value's place in its range; for QWK on
  [-1, 1] this is Fisher's z-transformation, atanh; Fisher 1921). Used with the jackknife SE for
  Macro-F1, F1_U, F1_C and QWK, whose t interval on the raw scale under-covered at low rates and in
  small classes (it is symmetric where the sampling distribution is not, near the range's ends).
"""

from __future__ import annotations

import math

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
    p: float, se: float, trials: int, clusters: int, level: float = inference.LEVEL
) -> tuple[float, float]:
    """The Korn-Graubard interval of a proportion p estimated from `trials` trials in `clusters`
    clusters (cases), with its clustered standard error `se`."""
    if p <= 0.0 or p >= 1.0:
        return clopper_pearson(round(p) * clusters, clusters, level)
    n_eff = trials if se <= 0.0 else min(trials, p * (1.0 - p) / (se * se))
    z = inference.normal_quantile(0.5 + level / 2.0)
    t = inference.t_quantile(0.5 + level / 2.0, clusters - 1)
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
