"""The swap test: the paired permutation test of Macro-F1, F1_U, F1_C and QWK between two models,
at every number of cases (`compare` runs it on the same number of runs of each model).

Under the null hypothesis that the two models are the same, the records of one case in run i of A
and in run i of B are exchangeable, so swapping them leaves the distribution of the difference of
the means over runs unchanged (Good 2005, ch. 3, paired designs; all of a case's runs are swapped
together: the case is the unit, as in every interval here). The test is therefore exact at any
number of cases and any degree of determinism: with k cases on which the two models differ at all
there are only 2^k patterns, and a difference carried by two cases is as likely as its swap,
however many cases agree. Where the two models differ case by case but not in their population
(a weak null), swapping a case flips the sign of its first-order contribution to the difference,
as the sign-flip test does for a mean, so the test holds its level as the cases grow (measured
with `bench/calibration.py`).

p is the share of swap patterns whose difference is at least as far from 0 as the observed one:
exact over all 2^k patterns up to `EXACT_SWAPS` cases that differ; beyond, Monte Carlo over
`resamples` random patterns, p = (1 + hits) / (1 + resamples) (Phipson & Smyth 2010), flagged as
a floor when no pattern reached the observed difference. A pattern that leaves a held-fixed run's
metric undefined counts as extreme (conservative). The same patterns give the test's critical
value (`inference.Permutation`), from which `compare` derives the minimum detectable difference.

Speed. A and B's statistics of a case are packed as bit fields of one int each (every run and
statistic a field, wide enough for any total), so a pattern's totals for A are one sum of ints,
and B's are the grand total minus A's; a Monte Carlo pattern adds one precomputed sum per 8
cases that differ (the 256 ways to swap them), chosen by a byte of random bits.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.statistics import inference
from lexpilot_batch.report.statistics.family import Family
from lexpilot_batch.report.statistics.influence import CellInfluence, additive

EXACT_SWAPS = 10  # all 2^k patterns up to this many differing cases (1,024, the default resamples)

Side = tuple[list[int], CellInfluence]  # (the group's slots of the task, its cell)


def swap_tests(
    family: Family, task: str, side_a: Side, side_b: Side, resamples: int, rng: random.Random
) -> dict[int, inference.Permutation | None]:
    """The swap test of each of the task's Macro-F1/F1/QWK metrics defined for both models:
    metric position -> result, or None when Monte Carlo is needed without resamples. The two sides
    have the same number of runs (run i of A swaps with run i of B)."""
    (slots_a, cell_a), (slots_b, cell_b) = side_a, side_b
    if len(slots_a) != len(slots_b):
        raise ValueError("the swap test pairs run i of A with run i of B: give both the same runs")
    spec = TASKS[task]
    wanted = [
        i
        for i, m in enumerate(spec.metrics)
        if not additive(m) and cell_a.metrics[m].estimate is not None and cell_b.metrics[m].estimate is not None
    ]
    if not wanted:
        return {}
    width, runs, cases = spec.width, len(slots_a), cell_a.cases
    zero = (0,) * width
    rows_a = [[family.counts[s].get(c, zero) for s in slots_a] for c in cases]
    rows_b = [[family.counts[s].get(c, zero) for s in slots_b] for c in cases]
    # Only cases on which the two models differ move anything; the others are fixed.
    moving = [i for i in range(len(cases)) if rows_a[i] != rows_b[i]]
    largest = max((v for rows in (rows_a, rows_b) for row in rows for x in row for v in x), default=0)
    bits = max(1, (largest * 2 * len(cases)).bit_length())
    mask = (1 << bits) - 1

    def pack(row: list[tuple[int, ...]]) -> int:
        return sum(v << (bits * (r * width + w)) for r, x in enumerate(row) for w, v in enumerate(x))

    packed_a = [pack(row) for row in rows_a]
    packed_b = [pack(row) for row in rows_b]
    fixed_a = sum(packed_a) - sum(packed_a[i] for i in moving)
    grand = sum(packed_a) + sum(packed_b)
    metrics = spec.metrics
    held_a = {i: cell_a.metrics[metrics[i]].runs for i in wanted}
    held_b = {i: cell_b.metrics[metrics[i]].runs for i in wanted}
    observed = {i: cell_a.metrics[metrics[i]].estimate - cell_b.metrics[metrics[i]].estimate for i in wanted}  # type: ignore[operator]
    tolerance = {i: 1e-9 * max(1.0, abs(observed[i])) for i in wanted}

    def differences(total_a: int) -> list[float]:
        """|A - B| of each wanted metric with these totals for A (infinite where undefined)."""
        total_b = grand - total_a
        values_a, values_b = [], []
        for r in range(runs):
            base = r * width
            values_a.append(spec.from_counts([(total_a >> (bits * (base + w))) & mask for w in range(width)]))
            values_b.append(spec.from_counts([(total_b >> (bits * (base + w))) & mask for w in range(width)]))
        out = []
        for i in wanted:
            va = [values_a[r][i] for r in held_a[i]]
            vb = [values_b[r][i] for r in held_b[i]]
            if None in va or None in vb:
                out.append(math.inf)  # a held-fixed run undefined: counted as extreme (conservative)
                continue
            out.append(abs(sum(va) / len(va) - sum(vb) / len(vb)))  # type: ignore[arg-type]
        return out

    k = len(moving)
    exact = k <= EXACT_SWAPS
    if not exact and resamples <= 0:
        return dict.fromkeys(wanted)
    patterns = _all_patterns(fixed_a, packed_a, packed_b, moving) if exact else None
    if patterns is None:
        patterns = _random_patterns(fixed_a, packed_a, packed_b, moving, resamples, rng)
    seen: dict[int, list[float]] = {i: [] for i in wanted}
    for total in patterns:
        for i, value in zip(wanted, differences(total), strict=True):
            seen[i].append(value)
    out: dict[int, inference.Permutation | None] = {}
    for i in wanted:
        values = seen[i]
        hits = sum(v >= abs(observed[i]) - tolerance[i] for v in values)
        if exact:
            critical, accepted, smallest = inference.critical_value(values)
            out[i] = inference.Permutation(hits / len(values), True, False, _finite(critical), accepted, smallest, k)
        else:
            critical, accepted, smallest = inference.mc_critical(values, resamples)
            p = (1 + hits) / (1 + resamples)
            out[i] = inference.Permutation(p, False, hits == 0, _finite(critical), accepted, smallest, k)
    return out


def _finite(critical: float | None) -> float | None:
    return None if critical is None or math.isinf(critical) else critical


def _all_patterns(fixed_a: int, packed_a: list[int], packed_b: list[int], moving: list[int]) -> Iterator[int]:
    for pattern in range(1 << len(moving)):
        yield fixed_a + sum(packed_b[c] if pattern >> j & 1 else packed_a[c] for j, c in enumerate(moving))


def _random_patterns(
    fixed_a: int, packed_a: list[int], packed_b: list[int], moving: list[int], resamples: int, rng: random.Random
) -> Iterator[int]:
    tables = []
    for start in range(0, len(moving), 8):
        chunk = moving[start : start + 8]
        sums = [0]
        for c in chunk:  # entry b: bit j of b swaps the chunk's j-th case
            sums = [s + packed_a[c] for s in sums] + [s + packed_b[c] for s in sums]
        # Bits beyond a short last chunk swap nothing: its table repeats.
        while len(sums) < 256:
            sums += sums[: 256 - len(sums)]
        tables.append(sums)
    size = len(tables)
    for _ in range(resamples):
        yield fixed_a + sum(map(list.__getitem__, tables, rng.getrandbits(8 * size).to_bytes(size, "little")))
