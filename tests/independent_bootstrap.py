"""An independent bootstrap of the report's intervals, to check `report.bootstrap` and `estimates` against.

Shares nothing with `lexpilot_batch.benchmark.metrics`, `tasks` or `report`: it follows the method as the
README states it, record by record. For each resample (`random.Random(seed)`; each class by name,
`rng.choices(the class's cases in case order, k=len)`) it collects the drawn cases' records of
each run (a case drawn twice counts twice), scores them from the benchmark's definitions, averages
over the runs where the value is defined, and finally takes the percentile interval (numpy's
"linear" = `statistics.quantiles(method="inclusive")`).

    bootstrap(groups, resamples, seed) -> {(group index, task, scope, metric): {"low", "high", "resamples"} | None}
    replicates(...) -> {(group index, task, scope, metric): [value per resample]}

`groups` is a list of groups, each a list of runs: {run_id: {task: [(case, class, record), ...]}}.
"""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Sequence

ORDINAL = {"支持": 0, "部分支持": 1, "驳回": 2}
LCA = ("macro_f1", "f1_u", "f1_c", "acc_c", "acc_u")
LJP = ("qwk", "accuracy")


def natural(text: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p)


def _div(a: float, b: float) -> float | None:
    return None if b == 0 else a / b


def score(task: str, records: list[dict]) -> dict[str, float | None]:
    if task == "lca":
        tp = sum(r["history_type"] == "underspecified" and r["label"] == "clarification" for r in records)
        fn = sum(r["history_type"] == "underspecified" and r["label"] == "judgment" for r in records)
        fp = sum(r["history_type"] == "complete" and r["label"] == "clarification" for r in records)
        tn = sum(r["history_type"] == "complete" and r["label"] == "judgment" for r in records)
        f1_u, f1_c = _div(2 * tp, 2 * tp + fp + fn), _div(2 * tn, 2 * tn + fp + fn)
        macro = None if f1_u is None or f1_c is None else (f1_u + f1_c) / 2
        return dict(zip(LCA, (macro, f1_u, f1_c, _div(tn, tn + fp), _div(tp, tp + fn)), strict=True))
    if task == "dcg":
        return {"success_rate": _div(sum(r["success"] for r in records), len(records))}
    pairs = [(ORDINAL[c["gold"]], ORDINAL[c["predicted"]]) for r in records for c in r["claims"]]
    n = len(pairs)
    if n == 0:
        return {"qwk": None, "accuracy": None}
    # Cohen's kappa with quadratic weights, from the observed and expected weighted matrices.
    observed = [[0.0] * 3 for _ in range(3)]
    for g, p in pairs:
        observed[g][p] += 1 / n
    rows = [sum(observed[i]) for i in range(3)]
    cols = [sum(observed[i][j] for i in range(3)) for j in range(3)]
    weight = [[(i - j) ** 2 / 4 for j in range(3)] for i in range(3)]
    num = sum(weight[i][j] * observed[i][j] for i in range(3) for j in range(3))
    den = sum(weight[i][j] * rows[i] * cols[j] for i in range(3) for j in range(3))
    qwk = None if den < 1e-12 else 1 - num / den
    return {"qwk": qwk, "accuracy": sum(g == p for g, p in pairs) / n}


def _mean(values: list[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


def replicates(groups: list[list[dict]], resamples: int, seed: int) -> dict[tuple, list]:
    classes: dict[str, set[str]] = {}
    for runs in groups:
        for run in runs:
            for rows in run["tasks"].values():
                for case, cls, _ in rows:
                    classes.setdefault(cls, set()).add(case)
    ordered = {cls: sorted(classes[cls], key=natural) for cls in sorted(classes)}
    rng = random.Random(seed)
    out: dict[tuple, list] = {}
    for _ in range(resamples):
        drawn = {cls: rng.choices(cases, k=len(cases)) for cls, cases in ordered.items()}
        for gi, runs in enumerate(groups):
            tasks = sorted({t for run in runs for t in run["tasks"]})
            for task in tasks:
                scopes = [None] + sorted({cls for run in runs for _, cls, _ in run["tasks"].get(task, [])})
                for scope in scopes:
                    per_run = []
                    for run in runs:
                        if task not in run["tasks"]:
                            continue
                        by_case: dict[str, list] = {}
                        for case, _, record in run["tasks"][task]:
                            by_case.setdefault(case, []).append(record)
                        chosen = [
                            record
                            for cls, cases in drawn.items()
                            if scope is None or cls == scope
                            for case in cases
                            for record in by_case.get(case, [])
                        ]
                        per_run.append(score(task, chosen))
                    for metric in per_run[0]:
                        key = (gi, task, scope, metric)
                        out.setdefault(key, []).append(_mean([values[metric] for values in per_run]))
    return out


def interval(values: Sequence[float | None]) -> dict | None:
    defined = [v for v in values if v is not None]
    if not defined:
        return None
    if len(defined) == 1:
        return {"low": defined[0], "high": defined[0], "resamples": 1}
    cuts = statistics.quantiles(defined, n=40, method="inclusive")
    return {"low": cuts[0], "high": cuts[-1], "resamples": len(defined)}


def bootstrap(groups: list[list[dict]], resamples: int, seed: int) -> dict[tuple, dict | None]:
    return {key: interval(values) for key, values in replicates(groups, resamples, seed).items()}


def p_value(differences: list[float | None]) -> float | None:
    defined = [d for d in differences if d is not None]
    if not defined:
        return None
    at_most = len([d for d in defined if d <= 0])
    at_least = len([d for d in defined if d >= 0])
    return min(1.0, 2 * (1 + min(at_most, at_least)) / (1 + len(defined)))
