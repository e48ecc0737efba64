"""The paired bootstrap over cases that model comparisons of Macro-F1, F1_U, F1_C and QWK use from
`compare.BOOTSTRAP_FROM` cases on (`compare` says when; `inference.bca_interval` and `bca_p` turn
its values into an interval and a p-value).

- Unstratified: each resample draws as many cases as the family has, with replacement, from all
  of them (`random.Random(seed)`, then `rng.choices(cases, k=len(cases))` per resample). Drawing
  within cause classes instead would redraw a one-case class identically every time, and leave
  the resample distribution narrower than the sampling distribution of the benchmark's cases.
- Paired: every group of the family gets the same draws.
- Within a resample each run's metric is recomputed on the drawn cases (a case drawn twice counts
  twice; LCA's two histories and all of an LJP case's claims go with their case), and the value
  is the mean over the runs in which the point estimate is defined (`influence`: held fixed). A
  resample in which one of those runs is undefined is *unusable*, not averaged over fewer runs;
  `compare` counts the usable ones and falls back to the jackknife below `USABLE` of them.

Speed. Each case's statistics for every (group, run, task) the comparisons need are packed as bit
fields of one Python int, each field just wide enough for any sum a resample can reach, so a
resample is one `sum` of the drawn ints (a C loop of arbitrary-precision additions) and a few
shifts decode it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.statistics.family import Family
from lexpilot_batch.report.statistics.influence import READS

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 20250101
USABLE = 0.95  # the share of usable resamples below which a bootstrap result is not used

Need = tuple[int, str, Sequence[int], dict[int, list[int]]]
"""(group, task, its slots, metric position -> the held-fixed runs, as positions in the slots)."""


def paired_bootstrap(
    family: Family, needs: Sequence[Need], resamples: int, seed: int
) -> dict[tuple[int, str], dict[int, list[Metric]]]:
    """For each need (group, task): each metric's value in every resample (None: unusable)."""
    slots = sorted({s for _, _, group_slots, _ in needs for s in group_slots})
    n = len(family.cases)
    if not slots or not n:
        return {}
    fields = _fields(family, needs)
    # A statistic equal in every slot of its task for every case (an LJP case's gold verdicts) is
    # packed once, not once per run and model: the sum of the drawn ints costs time per bit.
    shared: dict[tuple[str, int], list[int]] = {}
    by_task: dict[str, list[int]] = {}
    for s in slots:
        by_task.setdefault(family.slots[s].task, []).append(s)
    for task, task_slots in by_task.items():
        first = family.counts[task_slots[0]]
        for w in fields[task]:
            if all(
                family.counts[s].keys() == first.keys()
                and all(x[w] == first[c][w] for c, x in family.counts[s].items())
                for s in task_slots
            ):
                shared[(task, w)] = task_slots
    # Field layout: each packed field as wide as n times the largest value any case holds in it.
    layout: dict[int, list[tuple[int, int] | None]] = {}  # slot -> per statistic (offset, mask), None: not read
    placed: dict[tuple[str, int], tuple[int, int]] = {}
    bits = 0
    packed = [0] * n

    def place(counts: dict[int, tuple[int, ...]], w: int) -> tuple[int, int]:
        nonlocal bits
        largest = max((x[w] for x in counts.values()), default=0)
        width = (largest * n).bit_length()
        at = (bits, (1 << width) - 1)
        bits += width
        for c, x in counts.items():
            if x[w]:
                packed[c] += x[w] << at[0]
        return at

    for s in slots:
        task = family.slots[s].task
        row: list[tuple[int, int] | None] = [None] * TASKS[task].width
        for w in fields[task]:
            key = (task, w)
            if key in shared:
                if key not in placed:
                    placed[key] = place(family.counts[s], w)
                row[w] = placed[key]
            else:
                row[w] = place(family.counts[s], w)
        layout[s] = row
    plan = [(gi, task, list(group_slots), runs) for gi, task, group_slots, runs in needs]
    out: dict[tuple[int, str], dict[int, list[Metric]]] = {
        (gi, task): {i: [] for i in runs} for gi, task, _, runs in plan
    }
    rng = random.Random(seed)
    for _ in range(resamples):
        total = sum(rng.choices(packed, k=n))
        values = {
            s: TASKS[family.slots[s].task].from_counts(
                [0 if at is None else (total >> at[0]) & at[1] for at in layout[s]]
            )
            for s in slots
        }
        for gi, task, group_slots, runs in plan:
            store = out[(gi, task)]
            for i, held in runs.items():
                acc = 0.0
                for r in held:
                    v = values[group_slots[r]][i]
                    if v is None:
                        store[i].append(None)
                        break
                    acc += v
                else:
                    store[i].append(acc / len(held))
    return out


def _fields(family: Family, needs: Sequence[Need]) -> dict[str, list[int]]:
    """Per task, the statistics its bootstrapped metrics read (`influence.READS`)."""
    out: dict[str, set[int]] = {}
    for _, task, _, runs in needs:
        metrics = TASKS[task].metrics
        out.setdefault(task, set()).update(w for i in runs for w in READS[metrics[i]])
    return {task: sorted(ws) for task, ws in out.items()}
