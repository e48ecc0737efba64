"""The pure statistics under the report (`report.statistics.inference`) against scipy and brute
force: the t distribution (the product has no scipy; ours is the incomplete beta function's
continued fraction), the sign-flip test against all 2^k sign patterns, the power formula."""

from __future__ import annotations

import itertools
import random

import pytest
from scipy import stats

from lexpilot_batch.report.statistics import inference


@pytest.mark.parametrize("df", [1, 2, 4, 7, 17, 49, 431, 8639])
def test_the_t_distribution_equals_scipys(df: int) -> None:
    for t in (0.0, 0.1, 0.7, 1.5, 2.0, 2.5, 4.0, 9.0, -3.0):
        assert inference.t_two_sided(t, df) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-9, abs=1e-14)
    for q in (0.5, 0.8, 0.9, 0.975, 0.995, 0.025):
        assert inference.t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-9, abs=1e-12)
    se = 0.031
    assert inference.minimum_detectable(se, df) == pytest.approx((stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * se)


def _brute_force(differences: list[float]) -> float:
    observed = abs(sum(differences))
    sums = [abs(sum(s * d for s, d in zip(signs, differences, strict=True))) for signs in
            itertools.product((1, -1), repeat=len(differences))]  # fmt: skip
    return sum(s >= observed - 1e-9 for s in sums) / len(sums)


def test_the_sign_flip_test_is_exact_on_lattices_and_beyond() -> None:
    """Differences of per-case shares over 3 runs and a case's claims (multiples of n/(3M), as
    floats, whose sums do not add up exactly), and differences on no lattice at all."""
    rng = random.Random(3)
    for trial in range(30):
        k = rng.randint(1, 12)
        if trial % 3:
            unit = 8 / (3 * 37)  # n / (k M): 8 cases, 3 runs, 37 claims
            differences = [unit * rng.randint(-6, 6) for _ in range(k)]
        else:
            differences = [rng.uniform(-1, 1) for _ in range(k)]
        result = inference.sign_flip(differences, 0, random.Random(0))
        assert result is not None
        p, kind, floor = result
        assert kind == "exact" and not floor
        assert p == pytest.approx(_brute_force([d for d in differences if d]), abs=1e-12), differences


def test_a_sign_flip_of_many_cases_on_a_lattice_stays_exact() -> None:
    """49 cases (below the paired t's 50), differences of counts over runs of LJP claims: still
    enumerated exactly (the partial sums merge on their grid), and a Monte Carlo agrees."""
    rng = random.Random(4)
    unit = 49 / (3 * 131)
    differences = [unit * rng.randint(-9, 9) for _ in range(49)]
    p, kind, _ = inference.sign_flip(differences, 0, random.Random(0))  # type: ignore[misc]
    assert kind == "exact"
    mc, _, _ = inference.sign_flip(differences + [1e-3 * rng.random() for _ in range(3)], 20000, random.Random(1))  # type: ignore[misc]
    assert abs(p - mc) < 0.02  # a Monte Carlo on nearly the same data agrees


def test_holm_is_the_step_down_adjustment() -> None:
    # p = 0.01, 0.04, 0.03, 0.5 (m = 4): sorted 0.01*4 = 0.04, 0.03*3 = 0.09, 0.04*2 = 0.08 -> 0.09
    # (monotone), 0.5*1 = 0.5.
    adjusted = inference.holm([(0.01, False), (0.04, False), (0.03, False), (0.5, False)])
    assert [p for p, _ in adjusted] == pytest.approx([0.04, 0.09, 0.09, 0.5])
