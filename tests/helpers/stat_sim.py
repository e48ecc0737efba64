"""Seeded simulations of the report's statistical behaviour: type-I error of model comparisons and
coverage of intervals (tests/report/statistics/test_statistics.py asserts on them; docs/report.md
quotes them). Runnable for the numbers:
`python tests/helpers/stat_sim.py null|coverage CASES REPS`.

The population. Each case has a skill p drawn at random (`p = u ** 0.6`, u uniform: mean 0.625,
spread over (0, 1)); in every run of every model, independently:

- LCA: each of the two histories gets its right label with probability p;
- DCG: success with probability p;
- Direct LJP: 1 to 4 claims, gold verdicts drawn once per case (支持 0.5, 部分支持 0.2, 驳回 0.3),
  each predicted right with probability p, else one of the other two verdicts at random.

Under the null two models share every case's p (they are the same model); the truth of a metric
for coverage is its value on `TRUTH_CASES` fresh cases of the population (the limit of the
report's estimate as n grows; its own noise is 0.1-0.2 percentage points, a fifth of a percent of
coverage).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report import RunResults, TaskRecords, build_report

VERDICTS = ("支持", "部分支持", "驳回")
GOLD_WEIGHTS = (0.5, 0.2, 0.3)
SIM_TASKS = ("lca", "dcg", "ljp_direct")
ALPHA = 0.05
TRUTH_CASES = 200_000


def skill(rng: random.Random) -> float:
    return rng.random() ** 0.6


def case_world(n: int, classes: Sequence[int] | None, rng: random.Random) -> list[tuple[str, str, float, list[str]]]:
    """(case, class, skill, gold verdicts) of n cases; `classes` gives class sizes (default: six
    classes, round robin)."""
    if classes is None:
        names = [f"class{i % 6}" for i in range(n)]
    else:
        assert sum(classes) == n
        names = [f"class{k}" for k, size in enumerate(classes) for _ in range(size)]
    out = []
    for i, cls in enumerate(names):
        gold = rng.choices(VERDICTS, GOLD_WEIGHTS, k=rng.randint(1, 4))
        out.append((str(i + 1), cls, skill(rng), gold))
    return out


def _predict(gold: str, p: float, rng: random.Random) -> str:
    if rng.random() < p:
        return gold
    return rng.choice([v for v in VERDICTS if v != gold])


def one_run(world, run_id: str, model: str, rng: random.Random, shift: float = 0.0) -> RunResults:
    tasks = {t: TaskRecords() for t in SIM_TASKS}
    for case, cls, p, gold in world:
        p = min(1.0, max(0.0, p + shift))
        for history in ("complete", "underspecified"):
            right = rng.random() < p
            label = "clarification" if right == (history == "underspecified") else "judgment"
            tasks["lca"].records.append((cls, {"history_type": history, "label": label}))
            tasks["lca"].cases.append(case)
        won = rng.random() < p
        tasks["dcg"].records.append((cls, {"success": won, "decisions": ["否", "是" if won else "否"]}))
        tasks["dcg"].cases.append(case)
        claims = [{"gold": g, "predicted": _predict(g, p, rng)} for g in gold]
        tasks["ljp_direct"].records.append((cls, {"claims": claims}))
        tasks["ljp_direct"].cases.append(case)
    return RunResults(run_id, model, "u", "j", f"g-{model}", comparison_key="c", tasks=tasks)


def null_pair(
    n: int,
    runs: int,
    seed: int,
    classes: Sequence[int] | None = None,
    runs_b: int | None = None,
    shift: float = 0.0,
) -> list[RunResults]:
    """Two identical models (the same skills) on the same n cases, `runs` runs each (B: `runs_b`);
    B's skill lower by `shift` in every case."""
    rng = random.Random(seed)
    world = case_world(n, classes, rng)
    out = [one_run(world, f"run{r + 1}", "model-a", rng) for r in range(runs)]
    out += [one_run(world, f"run{r + 1}", "model-b", rng, -shift) for r in range(runs if runs_b is None else runs_b)]
    return out


def truth(seed: int = 12345) -> dict[tuple[str, str], float | None]:
    """Each metric's population value (one run on `TRUTH_CASES` cases)."""
    rng = random.Random(seed)
    run = one_run(case_world(TRUTH_CASES, None, rng), "truth", "m", rng)
    out = {}
    for task in SIM_TASKS:
        spec = TASKS[task]
        values = spec.from_counts(spec.total(r for _, r in run.tasks[task].records))
        out.update({(task, m): v for m, v in zip(spec.metrics, values, strict=True)})
    return out


def rejections(
    n: int,
    runs: int,
    reps: int,
    seed: int,
    classes: Sequence[int] | None = None,
    resamples: int = 200,
    runs_b: int | None = None,
    shift: float = 0.0,
) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (task, metric): (comparisons with p < ALPHA, comparisons with a p-value) over `reps`
    null pairs (B with `runs_b` runs, default `runs`); with `shift`, B's skill is that much lower
    in every case (the rate is then the power)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for rep in range(reps):
        pair = null_pair(n, runs, seed * 100_003 + rep, classes, runs_b, shift)
        report = build_report(pair, resamples=resamples, seed=rep + 1)
        for task, metrics in report["comparisons"][0]["tasks"].items():
            for metric, d in metrics.items():
                c = counts.setdefault((task, metric), [0, 0])
                if d["p_value"] is not None:
                    c[1] += 1
                    c[0] += d["p_value"] < ALPHA
    return {k: (v[0], v[1]) for k, v in counts.items()}


def coverage(
    n: int, runs: int, reps: int, seed: int, classes: Sequence[int] | None = None
) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (task, metric): (intervals of model A holding the truth, intervals given) over `reps`
    samples of n cases."""
    true = truth()
    counts: dict[tuple[str, str], list[int]] = {}
    for rep in range(reps):
        rng = random.Random(seed * 100_003 + rep)
        world = case_world(n, classes, rng)
        report = build_report([one_run(world, f"run{r + 1}", "m", rng) for r in range(runs)], resamples=0)
        for task, summary in report["groups"][0]["tasks"].items():
            for metric, s in summary["overall"].items():
                c = counts.setdefault((task, metric), [0, 0])
                if s["ci"] is not None:
                    c[1] += 1
                    c[0] += s["ci"]["low"] <= (true[(task, metric)] or 0.0) <= s["ci"]["high"]
    return {k: (v[0], v[1]) for k, v in counts.items()}


def _show(result: dict[tuple[str, str], tuple[int, int]]) -> None:
    for (task, metric), (hit, total) in result.items():
        share = f"{hit / total:.3f}" if total else "  -  "
        print(f"{task:12s} {metric:14s} {share} ({hit}/{total})")


if __name__ == "__main__":
    kind, cases, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    sizes = [int(s) for s in sys.argv[5].split(",")] if len(sys.argv) > 5 else None
    if kind == "null":
        _show(rejections(cases, runs, reps, seed=1, classes=sizes))
    else:
        _show(coverage(cases, runs, reps, seed=2, classes=sizes))
