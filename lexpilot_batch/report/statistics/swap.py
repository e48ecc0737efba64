"""The swap test: the paired permutation test of Macro-F1, F1_U, F1_C and QWK between two models on
fewer than `PERMUTATION_BELOW` cases (`compare` says when it is the one to run).

Under the null hypothesis that the two models are the same, the records of one case in run i of A
and in run i of B are exchangeable, so swapping them leaves the distribution of the difference of
the means over runs unchanged (Good 2005, ch. 3, paired designs; all of a case's runs are swapped
together: its records are the unit, as in every interval here). p is the share of swap patterns
whose difference is at least as far from 0 as the observed one: exact over all 2^k patterns of the
k cases on which the two models differ at all, up to `EXACT_SWAPS`; beyond, Monte Carlo over
`resamples` random patterns, p = (1 + hits) / (1 + resamples) (Phipson & Smyth 2010), flagged as
a floor when no pattern reached the observed difference. A pattern that leaves a held-fixed run's
metric undefined counts as extreme (conservative). It needs the two models to have the same
number of runs (run i of A swaps with run i of B).

Speed. A and B's statistics of a case are packed as bit fields of one int each (every run and
statistic a field, wide enough for any total), so a pattern's totals for A are one `sum` of n
chosen ints, and B's are the grand total minus A's.
"""

from __future__ import annotations

import random

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.statistics.family import Family
from lexpilot_batch.report.statistics.influence import CellInfluence, additive

PERMUTATION_BELOW = 50  # below this many cases, p-values come from paired permutation tests
EXACT_SWAPS = 12  # the swap test enumerates all 2^k patterns of up to this many differing cases

Side = tuple[list[int], CellInfluence]  # (the group's slots of the task, its cell)
Result = tuple[float, str, bool]  # (p, "exact" | "monte carlo", floor)


def swap_tests(
    family: Family, task: str, side_a: Side, side_b: Side, resamples: int, rng: random.Random
) -> dict[int, Result | None]:
    """The swap test of each of the task's Macro-F1/F1/QWK metrics when it is the one to run (fewer
    than `PERMUTATION_BELOW` cases, the same number of runs): metric position -> result, or None
    without resamples."""
    (slots_a, cell_a), (slots_b, cell_b) = side_a, side_b
    spec = TASKS[task]
    wanted = [
        i
        for i, m in enumerate(spec.metrics)
        if not additive(m) and cell_a.metrics[m].estimate is not None and cell_b.metrics[m].estimate is not None
    ]
    if not wanted or len(cell_a.cases) >= PERMUTATION_BELOW or len(slots_a) != len(slots_b):
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

    def extreme(total_a: int) -> list[bool]:
        """Whether the difference with these totals for A is at least as far from 0 as observed."""
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
                out.append(True)  # a held-fixed run undefined: counted as extreme (conservative)
                continue
            d = sum(va) / len(va) - sum(vb) / len(vb)  # type: ignore[arg-type]
            out.append(abs(d) >= abs(observed[i]) - tolerance[i])
        return out

    hits = dict.fromkeys(wanted, 0)
    k = len(moving)
    if k <= EXACT_SWAPS:
        for pattern in range(1 << k):
            total = fixed_a + sum(packed_b[c] if pattern >> j & 1 else packed_a[c] for j, c in enumerate(moving))
            for i, hit in zip(wanted, extreme(total), strict=True):
                hits[i] += hit
        return {i: (hits[i] / (1 << k), "exact", False) for i in wanted}
    if resamples <= 0:
        return dict.fromkeys(wanted)
    for _ in range(resamples):
        pattern = rng.getrandbits(k)
        total = fixed_a + sum(packed_b[c] if pattern >> j & 1 else packed_a[c] for j, c in enumerate(moving))
        for i, hit in zip(wanted, extreme(total), strict=True):
            hits[i] += hit
    return {i: ((1 + hits[i]) / (1 + resamples), "monte carlo", hits[i] == 0) for i in wanted}
