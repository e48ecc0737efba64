"""The pure statistics under the report (`report.statistics.inference`, `proportions`) against scipy
and brute force: the t and beta distributions (the product has no scipy; ours are the incomplete
beta function's continued fraction), the sign-flip test and its critical values against all 2^k
sign patterns, the exact binomial interval, Holm."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy import stats

from lexpilot_batch.report.statistics import inference, proportions


@pytest.mark.parametrize("df", [1, 2, 4, 7, 17, 49, 431, 8639])
def test_the_t_distribution_equals_scipys(df: int) -> None:
    for t in (0.0, 0.1, 0.7, 1.5, 2.0, 2.5, 4.0, 9.0, -3.0):
        assert inference.t_two_sided(t, df) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-9, abs=1e-14)
    for q in (0.5, 0.8, 0.9, 0.975, 0.995, 0.025):
        assert inference.t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    "a, b", [(1, 8), (8, 1), (0.5, 3.2), (50.5, 3.1), (0.03, 0.02), (2000, 3000), (1, 1), (4.4, 37.9)]
)
def test_the_beta_quantile_equals_scipys(a: float, b: float) -> None:
    for q in (0.025, 0.05, 0.3, 0.5, 0.9, 0.975):
        assert inference.beta_quantile(q, a, b) == pytest.approx(stats.beta.ppf(q, a, b), rel=1e-9, abs=1e-12)


def test_the_clopper_pearson_interval_is_scipys_exact_binomial_interval() -> None:
    for x, n in [(0, 8), (8, 8), (1, 20), (3, 20), (17, 20), (0, 1), (60, 432), (431, 432)]:
        theirs = stats.binomtest(x, n).proportion_ci(0.95, method="exact")
        low, high = proportions.clopper_pearson(x, n)
        assert (low, high) == (pytest.approx(theirs.low, abs=1e-12), pytest.approx(theirs.high, abs=1e-12)), (x, n)
    # The case: 8 of 8, the exact bound about 0.63 (0.025^(1/8)).
    low, high = proportions.clopper_pearson(8, 8)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 8)) and 0.63 < low < 0.632


def test_the_korn_graubard_interval_at_the_ends_is_exact_with_each_case_one_trial() -> None:
    """A rate of 0 or 1 has no variance to estimate: the exact bound, each case a single trial (its
    runs and claims may all be one), however many trials the cases hold."""
    assert proportions.korn_graubard(1.0, 0.0, trials=40, clusters=8) == proportions.clopper_pearson(8, 8)
    assert proportions.korn_graubard(0.0, 0.0, trials=120, clusters=30) == proportions.clopper_pearson(0, 30)
    # With no design effect and many cases it is the exact interval of the trials.
    p, n = 0.3, 4000
    low, high = proportions.korn_graubard(p, (p * (1 - p) / n) ** 0.5, trials=n, clusters=n)
    exact = proportions.clopper_pearson(p * n, n)
    assert (low, high) == (pytest.approx(exact[0], abs=2e-4), pytest.approx(exact[1], abs=2e-4))


def test_the_degrees_of_freedom_fall_with_the_kurtosis_of_the_case_values() -> None:
    """Satterthwaite's df for the variance of the case values: n - 1 when their kurtosis is that of
    normal values or lower (here: two equal halves, evenly spaced values, no variation), fewer as
    few cases carry the variation, and never below 3 (one case of 20 carrying it all: G2 = 20,
    2 / (2/19 + 20/20) = 1.8)."""
    assert inference.kurtosis_df([0.0, 1.0] * 10) == 19
    assert inference.kurtosis_df([float(i) for i in range(12)]) == 11
    assert inference.kurtosis_df([0.5] * 9) == 8
    assert inference.kurtosis_df([1.0] + [0.0] * 19) == inference.MIN_DF == 3
    assert inference.kurtosis_df([1.0, 0.0, 0.0, 0.0]) == 3  # n - 1 is already 3
    # Two of 40 cases apart from the rest: G2 = 17.3 by scipy, 2 / (2/39 + 17.3/40) = 4.1.
    two = [1.0, 1.0] + [0.0] * 38
    assert float(stats.kurtosis(two, fisher=True, bias=False)) == pytest.approx(17.29, abs=0.01)
    assert inference.kurtosis_df(two) == 4
    # A heavier tail gives fewer df; a quarter of the cases apart is lighter-tailed than normal.
    assert inference.kurtosis_df([0.0] * 30 + [1.0] * 3) < inference.kurtosis_df([0.0] * 30 + [1.0] * 10) == 39


def test_the_logit_t_interval_stays_in_the_range_and_is_fishers_z_for_qwk() -> None:
    low, high = proportions.logit_t(0.02, 0.05, 7, (0.0, 1.0))
    assert 0.0 < low < 0.02 < high < 1.0
    t = stats.t.ppf(0.975, 30)
    r, se = 0.4, 0.1  # QWK on [-1, 1]: atanh(r) +- t se / (1 - r^2)
    low, high = proportions.logit_t(r, se, 30, (-1.0, 1.0))
    assert low == pytest.approx(math.tanh(math.atanh(r) - t * se / (1 - r * r)))
    assert high == pytest.approx(math.tanh(math.atanh(r) + t * se / (1 - r * r)))


def _brute_force(differences: list[float]) -> tuple[float, list[float]]:
    observed = abs(sum(differences))
    sums = [abs(sum(s * d for s, d in zip(signs, differences, strict=True))) for signs in
            itertools.product((1, -1), repeat=len(differences))]  # fmt: skip
    return sum(s >= observed - 1e-9 for s in sums) / len(sums), sums


@pytest.mark.parametrize("n, p, m, q", [(30, 0.15, 30, 0.05), (20, 0.5, 20, 0.3), (40, 0.9, 40, 0.97)])
def test_the_mover_interval_of_two_exact_intervals_covers_their_difference(n: int, p: float, m: int, q: float) -> None:
    """MOVER (Zou & Donner 2008) from two independent binomials' Clopper-Pearson intervals covers
    the true difference at least 93.5% of 2,000 seeded draws, near the range's ends included,
    where its ends are asymmetric as the two intervals are."""
    exact = {(x, k): (x / k, *proportions.clopper_pearson(x, k)) for k in {n, m} for x in range(k + 1)}
    rng = random.Random(3)
    hits = 0
    for _ in range(2000):
        x, y = sum(rng.random() < p for _ in range(n)), sum(rng.random() < q for _ in range(m))
        low, high = proportions.mover(exact[(x, n)], exact[(y, m)], 0.0)
        hits += low <= p - q <= high
    assert hits / 2000 >= 0.935
    one, none = (1 / 30, *proportions.clopper_pearson(1, 30)), (0.0, *proportions.clopper_pearson(0, 30))
    low, high = proportions.mover(one, none, 0.0)  # 1/30 against 0/30
    assert high - 1 / 30 > 1 / 30 - low > 0


def test_the_continuity_corrected_correlation_keeps_mover_covering_a_rare_discordance() -> None:
    """Paired proportions on 20 cases where B fails 10% of the cases A passes and never the other
    way: a sample often has 0-2 such cases, the two sides then correlate near 1, and MOVER with
    Pearson's correlation covers the true difference 0.1 in under 90% of 2,000 seeded draws (its
    interval as narrow as the discordance seen). Newcombe's continuity correction (1998, method
    10) keeps it at 93.5% or more; for 0/1 values it is his phi with AD - BC less N/2."""
    cells = ((1, 1), (1, 0), (0, 1), (0, 0))
    rng = random.Random(3)
    hits = {"pearson": 0, "corrected": 0}
    for _ in range(2000):
        pairs = rng.choices(cells, (0.55, 0.1, 0.0, 0.35), k=20)
        xs, ys = [a for a, _ in pairs], [b for _, b in pairs]
        a = (sum(xs) / 20, *proportions.clopper_pearson(sum(xs), 20))
        b = (sum(ys) / 20, *proportions.clopper_pearson(sum(ys), 20))
        for name, correlation in (("pearson", inference.pearson), ("corrected", proportions.corrected_correlation)):
            low, high = proportions.mover(a, b, correlation(xs, ys) or 0.0)
            hits[name] += low - 1e-12 <= 0.1 <= high + 1e-12
    assert hits["pearson"] / 2000 < 0.9 and hits["corrected"] / 2000 >= 0.935, hits
    # 12 cases both pass, 8 both fail, none apart: phi = 1, corrected (96 - 10) / 96 = 1 - N / (2 AD)
    xs = [1] * 12 + [0] * 8
    assert proportions.corrected_correlation(xs, xs) == pytest.approx(1 - 20 / (2 * 12 * 8))
    assert proportions.corrected_correlation(xs, [1 - x for x in xs]) == -1.0  # a negative one kept


def test_mover_narrows_as_the_two_estimates_correlate() -> None:
    a, b = (0.6, 0.45, 0.72), (0.5, 0.36, 0.64)
    widths = [h - lo for lo, h in (proportions.mover(a, b, r) for r in (-0.5, 0.0, 0.5, 0.9, 1.0))]
    assert widths == sorted(widths, reverse=True) and widths[-1] < 0.05


def test_the_sign_flip_test_is_exact_on_lattices_and_beyond() -> None:
    """Differences of per-case shares over 3 runs and a case's claims (multiples of n/(3M), as
    floats, whose sums do not add up exactly), and differences on no lattice at all; the critical
    value is the smallest |sum| whose tail is at most 5%."""
    rng = random.Random(3)
    for trial in range(30):
        k = rng.randint(1, 12)
        if trial % 3:
            unit = 8 / (3 * 37)  # n / (k M): 8 cases, 3 runs, 37 claims
            differences = [unit * rng.randint(-6, 6) for _ in range(k)]
        else:
            differences = [rng.uniform(-1, 1) for _ in range(k)]
        result = inference.sign_flip(differences, 0, random.Random(0))
        assert result is not None and result.exact and not result.floor
        nonzero = [d for d in differences if d]
        p, sums = _brute_force(nonzero)
        assert result.p == pytest.approx(p, abs=1e-12), differences
        if result.critical is None:
            assert sum(s >= max(sums) - 1e-9 for s in sums) / len(sums) > inference.ALPHA
        else:
            assert sum(s >= result.critical - 1e-9 for s in sums) / len(sums) <= inference.ALPHA
            assert sum(s >= result.accepted - 1e-9 for s in sums) / len(sums) > inference.ALPHA
            assert not any(result.accepted + 1e-9 < s < result.critical - 1e-9 for s in sums)


def test_a_sign_flip_of_many_cases_on_a_lattice_stays_exact() -> None:
    """49 cases, differences of counts over runs of LJP claims: enumerated exactly (the partial sums
    merge on their lattice), and a Monte Carlo on nearly the same data agrees."""
    rng = random.Random(4)
    unit = 49 / (3 * 131)
    differences = [unit * rng.randint(-9, 9) for _ in range(49)]
    exact = inference.sign_flip(differences, 0, random.Random(0))
    assert exact is not None and exact.exact
    mc = inference.sign_flip(differences + [1e-3 * rng.random() for _ in range(3)], 20000, random.Random(1))
    assert mc is not None and not mc.exact
    assert abs(exact.p - mc.p) < 0.02
    assert mc.critical == pytest.approx(exact.critical, rel=0.05)


def test_with_few_cases_that_differ_the_sign_flip_test_cannot_reject() -> None:
    """Five cases that differ, all one way: the exact p is 2/32, above 5%: no critical value."""
    result = inference.sign_flip([1.0] * 5 + [0.0] * 50, 1000, random.Random(0))
    assert result is not None and result.p == pytest.approx(2 / 32) and result.critical is None
    assert result.differ == 5 and result.smallest_p == pytest.approx(2 / 32)
    six = inference.sign_flip([1.0] * 6 + [0.0] * 50, 1000, random.Random(0))
    assert six is not None and six.p == pytest.approx(2 / 64) and six.critical == pytest.approx(6.0)


def test_the_critical_value_of_a_distribution_with_infinite_and_undefined_values() -> None:
    """A swap pattern can make a metric infinite or undefined (NaN); the search once took nothing at
    an infinite value (inf - inf is NaN) and never returned. NaN ranks below every value, as the
    p-value's count (v >= observed) already treats it."""
    inf, nan = math.inf, math.nan
    assert inference.critical_value([inf, 1.0, 0.5, 0.25], alpha=0.3) == (inf, 1.0, 0.25)
    assert inference.critical_value([nan, 1.0, 0.5, inf], alpha=0.3) == (inf, 1.0, 0.25)
    assert inference.critical_value([2.0, nan, nan, nan], alpha=0.3) == (2.0, -inf, 0.25)
    assert inference.critical_value([nan, nan], alpha=0.3) == (None, -inf, 1.0)


def test_holm_is_the_step_down_adjustment() -> None:
    # p = 0.01, 0.04, 0.03, 0.5 (m = 4): sorted 0.01*4 = 0.04, 0.03*3 = 0.09, 0.04*2 = 0.08 -> 0.09
    # (monotone), 0.5*1 = 0.5.
    adjusted = inference.holm([(0.01, False), (0.04, False), (0.03, False), (0.5, False)])
    assert [p for p, _ in adjusted] == pytest.approx([0.04, 0.09, 0.09, 0.5])
