"""A prospective plan (`report --plan DELTA`): how many cases, at 1, 3, 5 or 10 runs of each model,
a paired comparison needs to detect a true difference DELTA with 80% power in a two-sided 5% test,
at the variance this report measured.

The variance of a paired difference splits between cases and runs (`estimates.variance`, the
one-way random-effects decomposition; Miller 2024, *Adding Error Bars to Evals*, §3: averaging K
answers per question divides only the within-question part by K): per case, the difference of two
models' influence values has variance `between` + (within_A + within_B) / k with k runs of each,
so the difference over n cases has SE^2 = (between + (within_A + within_B) / k) / n, and n =
(z_0.975 + z_0.80)^2 (between + (within_A + within_B) / k) / DELTA^2 (Bloom 1995, the normal
approximation the permutation tests reach as the cases grow). More runs shrink only the within
part: when `between` dominates, only more cases help.

From each comparison of the report (every metric); a group that is compared with nothing plans a
comparison with another model of its own variance, uncorrelated with it (between and within
doubled: pairing with a correlated model needs fewer cases). A model measured with one run has no
within-case variance of its own: it is taken as the other model's when that has runs, and
otherwise the plan is only for one run. A permutation test also needs enough cases that differ
(fewer than 6 allow no p below 0.05), which a near-deterministic pair may not reach at the n given.
"""

from __future__ import annotations

import math

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.statistics import inference

RUNS = (1, 3, 5, 10)


def cases_needed(between: float, within: float | None, runs: int, delta: float) -> int:
    """The cases a paired comparison needs with `runs` runs of each model (`within`: the sum of the
    two models' within-case variances, None when unknown: only `runs` = the measured ones)."""
    z = inference.normal_quantile(1.0 - inference.ALPHA / 2.0) + inference.normal_quantile(inference.POWER)
    variance = between + (within or 0.0) / runs
    return max(2, math.ceil(z * z * variance / (delta * delta)))


def plan(report: dict, delta: float) -> dict:
    """The `plan` JSON of a built report (`report.document`)."""
    rows = []
    compared: set[str] = set()
    for c in report["comparisons"]:
        compared.update((c["a"]["group_key"], c["b"]["group_key"]))
        for task, metrics in c["tasks"].items():
            for metric, d in metrics.items():
                v = d.get("variance")
                if v is not None:
                    rows.append(_row(c["a"]["model"], c["b"]["model"], task, metric, v, delta))
    for g in report["groups"]:
        if g["group_key"] in compared:
            continue
        for task, summary in g["tasks"].items():
            for metric, s in summary["overall"].items():
                v = s.get("variance")
                if v is None:
                    continue
                within = None if v["within"] is None else 2.0 * v["within"]
                doubled = {
                    "per_case": 2.0 * v["per_case"],
                    "between": None if v["between"] is None else 2.0 * v["between"],
                    "within": within,
                    "runs": g["n_runs"],
                }
                rows.append(_row(g["model"], None, task, metric, doubled, delta))
    return {"delta": delta, "alpha": inference.ALPHA, "power": inference.POWER, "runs": list(RUNS), "rows": rows}


def _row(a: str, b: str | None, task: str, metric: str, v: dict, delta: float) -> dict:
    if v["between"] is None or v["within"] is None:
        # No split: the measured variance holds for the measured runs only.
        cases = {str(v["runs"]): cases_needed(v["per_case"], None, 1, delta)}
    else:
        cases = {str(k): cases_needed(v["between"], v["within"], k, delta) for k in RUNS}
    return {
        "a": a,
        "b": b,
        "task": task,
        "metric": metric,
        "headline": metric == TASKS[task].headline,
        "between": v["between"],
        "within": v["within"],
        "cases": cases,
    }


def paired_variance(per_case: float, within_a: float | None, within_b: float | None, runs_a: int, runs_b: int) -> dict:
    """The split of a paired difference's per-case variance (`compare`): `within` is the sum of the
    two models' within-case variances (one model's taken for both when the other has one run),
    `between` what is left of `per_case` once each model's within part over its runs is taken out."""
    if within_a is None and within_b is None:
        return {"per_case": per_case, "between": None, "within": None, "runs": min(runs_a, runs_b)}
    wa = within_b if within_a is None else within_a
    wb = within_a if within_b is None else within_b
    between = max(0.0, per_case - wa / runs_a - wb / runs_b)  # type: ignore[operator]
    return {"per_case": per_case, "between": between, "within": wa + wb, "runs": min(runs_a, runs_b)}  # type: ignore[operator]
