"""Calibration of the report's statistics: seeded worlds run through the package's own
`build_report`, measuring the type-I error of every comparison it prints a p-value for and the
coverage of every interval it prints, overall and per cause class, with Monte-Carlo bands.

    python bench/calibration.py --quick                       # a few replications, a minute or two
    python bench/calibration.py --out bench/calibration.json  # the full grid (hours; see bench/README.md)
    python bench/calibration.py --table bench/calibration.json   # docs/report.md's table from a result

The worlds. Every case c has a skill p_c drawn from a beta distribution of mean mu and
intra-case correlation ICC (Beta(a, b), a + b = 1/ICC - 1: ICC is the correlation of two records of
the same case); every record of every run is drawn independently given its case:

- LCA: the complete history labelled right with probability p_c, the underspecified one with
  probability `UNDERSPECIFIED` * p_c (asking is harder than judging);
- DCG: success with probability p_c;
- Direct LJP: 1 to 4 claims, gold verdicts drawn once per case (支持 0.5, 部分支持 0.2, 驳回 0.3),
  each predicted right with probability p_c, else one of the other two verdicts at random.

| world | mu | ICC | what it stands for |
| --- | ---: | ---: | --- |
| central | 0.6 | 0.3 | a typical model |
| low | 0.15 | 0.3 | a low rate (DCG runs about 0.2) |
| stable | 0.6 | 0.8 | stable per-case behaviour |
| deterministic | 0.6 | 0.95 | near-deterministic (a model at low temperature) |

Cases fall into six cause classes of unequal size (shares `CLASS_SHARES`, as unequal as real cause
classes; at 8 cases the held-out set's 1, 1, 1, 1, 2, 2) whose mean skills differ (`CLASS_FACTORS`
times mu), so that a class's truth is its own. Two models A and B are drawn on the same cases:

- `sharp` null: the same model (B's skills are A's);
- `weak` null: different models with the same population metrics: B's skills have the same mean
  in every class but half the ICC (B is less consistent from case to case than A), and rank with
  A's in half of the cases (the same quantile of their distributions), independently in the
  others. A and B are not exchangeable within a case, so no permutation test is exact here; the
  population value of every metric is still the same for both (it depends on the mean skill only);

with A and B having 3 runs each (`3v3`) or 1 and 5 (`1v5`, a new model against a baseline).

The truth of every metric is analytic: a record's expected confusion is linear in p_c, so the
population value of each metric is its value at the scope's mean skill (QWK: `qwk_truth`).

Per cell (world, null, layout, cases) and metric the harness counts: comparisons with p < 0.05
among those with a p-value (`reject`, the type-I error, both nulls being true), comparison
intervals that hold the true difference 0 (`difference`), and intervals of A and B that hold the
truth overall (`overall`) and per class (`class`, every class the report gives an interval; each
class also alone in `classes`). A rate r over N draws has the Monte-Carlo band r +- 1.96
sqrt(r (1 - r) / N).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import random
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lexpilot_batch.report import RunResults, TaskRecords, build_report
from lexpilot_batch.report.statistics.inference import beta_quantile

VERDICTS = ("支持", "部分支持", "驳回")
GOLD_WEIGHTS = (0.5, 0.2, 0.3)
UNDERSPECIFIED = 0.8
CLASS_SHARES = (0.36, 0.22, 0.16, 0.12, 0.08, 0.06)
CLASS_FACTORS = (1.1, 0.9, 1.05, 0.95, 1.15, 0.85)
HELD_OUT_8 = (1, 1, 1, 1, 2, 2)
ALPHA = 0.05
METRICS = (
    ("lca", "macro_f1"),
    ("lca", "f1_u"),
    ("lca", "f1_c"),
    ("lca", "acc_c"),
    ("lca", "acc_u"),
    ("dcg", "success_rate"),
    ("ljp_direct", "qwk"),
    ("ljp_direct", "accuracy"),
)
TITLES = {
    "macro_f1": "Macro-F1",
    "f1_u": "F1_U",
    "f1_c": "F1_C",
    "acc_c": "Acc_C",
    "acc_u": "Acc_U",
    "success_rate": "DCG",
    "qwk": "QWK",
    "accuracy": "LJP acc.",
}


@dataclass(frozen=True)
class World:
    mu: float
    icc: float


WORLDS = {
    "central": World(0.6, 0.3),
    "low": World(0.15, 0.3),
    "stable": World(0.6, 0.8),
    "deterministic": World(0.6, 0.95),
}
NULLS = ("sharp", "weak")
LAYOUTS = {"3v3": (3, 3), "1v5": (1, 5)}
CASES = (6, 8, 20, 50, 432)


# --- The worlds ----------------------------------------------------------------------------------


def class_sizes(n: int) -> list[int]:
    """Six classes of unequal size (largest remainder of `CLASS_SHARES`); 8 cases as the held-out set."""
    if n == 8:
        return list(HELD_OUT_8)
    raw = [n * s for s in CLASS_SHARES]
    sizes = [math.floor(x) for x in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - sizes[i], reverse=True)[: n - sum(sizes)]:
        sizes[i] += 1
    return sizes


def class_mean(world: World, k: int) -> float:
    return min(0.98, world.mu * CLASS_FACTORS[k])


def skill_at(u: float, mean: float, icc: float) -> float:
    """The u-quantile of the skills of a class of this mean and ICC: Beta(a, b), a + b = 1/ICC - 1."""
    total = 1.0 / icc - 1.0
    return beta_quantile(min(max(u, 1e-12), 1 - 1e-12), mean * total, (1.0 - mean) * total)


@dataclass
class Case:
    number: str
    cls: str
    klass: int
    skill_a: float
    skill_b: float
    gold: list[str]


def draw_cases(world: World, n: int, null: str, rng: random.Random) -> list[Case]:
    out = []
    for k, size in enumerate(class_sizes(n)):
        mean = class_mean(world, k)
        for _ in range(size):
            u = rng.random()
            p = skill_at(u, mean, world.icc)
            # Weak null: B has the same mean and half the ICC; its skill ranks with A's in half of the cases.
            q = p if null == "sharp" else skill_at(u if rng.random() < 0.5 else rng.random(), mean, world.icc / 2)
            gold = rng.choices(VERDICTS, GOLD_WEIGHTS, k=rng.randint(1, 4))
            out.append(Case(str(len(out) + 1), f"class{k}", k, p, q, gold))
    return out


_LCA = {
    (h, right): {"history_type": h, "label": "clarification" if right == (h == "underspecified") else "judgment"}
    for h in ("complete", "underspecified")
    for right in (True, False)
}
_DCG = {won: {"success": won, "decisions": ["否", "是" if won else "否"]} for won in (True, False)}


def _predict(gold: str, p: float, rng: random.Random) -> str:
    if rng.random() < p:
        return gold
    return rng.choice([v for v in VERDICTS if v != gold])


def one_run(cases: Sequence[Case], run_id: str, model: str, b: bool, rng: random.Random) -> RunResults:
    tasks = {t: TaskRecords() for t in ("lca", "dcg", "ljp_direct")}
    lca, dcg, ljp = tasks["lca"], tasks["dcg"], tasks["ljp_direct"]
    for case in cases:
        p = case.skill_b if b else case.skill_a
        lca.records.append((case.cls, _LCA[("complete", rng.random() < p)]))
        lca.records.append((case.cls, _LCA[("underspecified", rng.random() < UNDERSPECIFIED * p)]))
        lca.cases += [case.number, case.number]
        dcg.records.append((case.cls, _DCG[rng.random() < p]))
        dcg.cases.append(case.number)
        ljp.records.append((case.cls, {"claims": [{"gold": g, "predicted": _predict(g, p, rng)} for g in case.gold]}))
        ljp.cases.append(case.number)
    return RunResults(run_id, model, "u", "j", f"g-{model}", comparison_key="c", tasks=tasks)


# --- The truth -----------------------------------------------------------------------------------


def qwk_truth(mu: float) -> float:
    """QWK of the population: gold verdict g with probability GOLD_WEIGHTS[g], predicted right with
    probability mu, else each other verdict with (1 - mu) / 2."""
    observed = [[w * (mu if g == p else (1 - mu) / 2) for p in range(3)] for g, w in enumerate(GOLD_WEIGHTS)]
    rows = [sum(r) for r in observed]
    cols = [sum(observed[g][p] for g in range(3)) for p in range(3)]
    weight = [[(g - p) ** 2 / 4 for p in range(3)] for g in range(3)]
    num = sum(weight[g][p] * observed[g][p] for g in range(3) for p in range(3))
    den = sum(weight[g][p] * rows[g] * cols[p] for g in range(3) for p in range(3))
    return 1 - num / den


def truths(mu: float) -> dict[str, float]:
    """Every metric's population value at mean skill mu."""
    u = UNDERSPECIFIED * mu  # acc_u
    tp, fn, tn, fp = u, 1 - u, mu, 1 - mu
    f1_u, f1_c = 2 * tp / (2 * tp + fp + fn), 2 * tn / (2 * tn + fp + fn)
    return {
        "macro_f1": (f1_u + f1_c) / 2,
        "f1_u": f1_u,
        "f1_c": f1_c,
        "acc_c": mu,
        "acc_u": u,
        "success_rate": mu,
        "qwk": qwk_truth(mu),
        "accuracy": mu,
    }


def scope_truths(world: World, n: int) -> dict[str | None, dict[str, float]]:
    """Per scope (None: overall, else a class name) every metric's truth. The overall mean skill
    weighs each class by its cases (LCA and DCG) — and by its expected claims (LJP), which are the
    same per case in every class."""
    sizes = class_sizes(n)
    means = [class_mean(world, k) for k in range(len(sizes))]
    out: dict[str | None, dict[str, float]] = {f"class{k}": truths(m) for k, m in enumerate(means)}
    out[None] = truths(sum(s * m for s, m in zip(sizes, means, strict=True)) / sum(sizes))
    return out


# --- One cell ------------------------------------------------------------------------------------


def _seed(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode("utf-8")).digest()[:8], "little")


def _add(counts: dict, key: str, hit: bool) -> None:
    c = counts.setdefault(key, [0, 0])
    c[0] += hit
    c[1] += 1


def run_cell(world_name: str, null: str, layout: str, n: int, reps: int, resamples: int, first: int = 0) -> dict:
    """Counts of one cell over replications `first` .. `first + reps - 1`."""
    world = WORLDS[world_name]
    runs_a, runs_b = LAYOUTS[layout]
    truth = scope_truths(world, n)
    counts: dict[str, dict] = {f"{t}.{m}": {"classes": {}} for t, m in METRICS}
    for rep in range(first, first + reps):
        rng = random.Random(_seed(world_name, null, layout, n, rep))
        cases = draw_cases(world, n, null, rng)
        runs = [one_run(cases, f"run{r + 1}", "model-a", False, rng) for r in range(runs_a)]
        runs += [one_run(cases, f"run{r + 1}", "model-b", True, rng) for r in range(runs_b)]
        report = build_report(runs, resamples=resamples, seed=rep + 1)
        (comparison,) = report["comparisons"]
        for task, metric in METRICS:
            into = counts[f"{task}.{metric}"]
            d = comparison["tasks"][task][metric]
            if d["p_value"] is not None:
                _add(into, "reject", d["p_value"] < ALPHA)
            if d["ci"] is not None:
                _add(into, "difference", d["ci"]["low"] <= 0.0 <= d["ci"]["high"])
            for group in report["groups"]:
                summaries = group["tasks"][task]
                for scope, by_metric in [(None, summaries["overall"]), *summaries["by_class"].items()]:
                    ci = by_metric[metric]["ci"]
                    if ci is None:
                        continue
                    hit = ci["low"] - 1e-12 <= truth[scope][metric] <= ci["high"] + 1e-12
                    if scope is None:
                        _add(into, f"overall_{group['n_runs']}", hit)
                    else:
                        _add(into, f"class_{group['n_runs']}", hit)
                        _add(into["classes"], f"{scope}_{group['n_runs']}", hit)
    return {"world": world_name, "null": null, "layout": layout, "cases": n, "reps": reps, "counts": counts}


def _run_cell(args: tuple) -> dict:
    started = time.perf_counter()
    out = run_cell(*args)
    out["seconds"] = round(time.perf_counter() - started, 1)
    print(f"{out['world']:13s} {out['null']:5s} {out['layout']} n={out['cases']:<4d} {out['seconds']:7.1f} s",
          file=sys.stderr, flush=True)  # fmt: skip
    return out


# --- Reading the counts --------------------------------------------------------------------------


def band(hit: int, total: int) -> tuple[float, float, float]:
    """(rate, low, high): the rate and its Monte-Carlo band, rate +- 1.96 sqrt(r (1 - r) / N)."""
    r = hit / total
    half = 1.96 * math.sqrt(r * (1 - r) / total)
    return r, r - half, r + half


MIN_DRAWS = 100  # a rate over fewer draws (a band of +-4 points or more) is left out of the tables
TYPE_I_BOUND = 0.065  # the bounds: the Monte-Carlo band of 5% and 95% at 1,000 draws
COVERAGE_BOUND = 0.935


def rates(cell: dict, metric: str, kind: str) -> list[tuple[str, int, int]]:
    """(where, hits, total) of each rate of one kind in a cell: "reject" and "difference" (the
    comparison), "overall" (each model, by its runs), "class" (each class, by the runs)."""
    counts = cell["counts"][metric]
    if kind == "class":
        return [(name, h, t) for name, (h, t) in counts["classes"].items() if t]
    return [(k, v[0], v[1]) for k, v in counts.items() if k != "classes" and k.split("_")[0] == kind and v[1]]


def worst(cells: Iterable[dict], metric: str, kinds: Sequence[str], highest: bool) -> tuple[int, int] | None:
    """The (hits, total) of the highest (or lowest) rate of `kinds` over `cells` for one metric,
    among those over at least `MIN_DRAWS` draws."""
    found = [(h, t) for c in cells for kind in kinds for _, h, t in rates(c, metric, kind) if t >= MIN_DRAWS]
    if not found:
        return None
    return (max if highest else min)(found, key=lambda v: v[0] / v[1])


def _percent(value: tuple[int, int] | None) -> str:
    if value is None:
        return "–"
    r, _, _ = band(*value)
    return f"{100 * r:.1f}"


def _binomial_tail(n: int, p: float, above: int) -> float:
    """P(X > above) for X ~ Binomial(n, p)."""
    log = math.log
    total = 0.0
    for k in range(above + 1, n + 1):
        total += math.exp(
            math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log(p) + (n - k) * log(1 - p)
        )
    return total


TABLES = (
    ("Highest type-I error (%): p < 0.05 between equal models, over the sharp and weak nulls and the 3v3 and 1v5 runs", ["reject"], True),
    ("Lowest coverage (%) of the 95% intervals of each model's metric, overall and per class, over both models, nulls and run layouts", ["overall", "class"], False),
    ("Lowest coverage (%) of the 95% intervals of the difference between equal models (true difference 0)", ["difference"], False),
)  # fmt: skip


def table(result: dict) -> str:
    """docs/report.md's "measured behaviour" tables: per world and number of cases, each metric's
    worst rate over at least `MIN_DRAWS` draws ("–": none printed that often)."""
    cells = result["cells"]
    metrics = [f"{t}.{m}" for t, m in METRICS]
    head = "| world | cases | " + " | ".join(TITLES[m.split(".")[1]] for m in metrics) + " |"
    rule = "| --- | ---: | " + " | ".join("---:" for _ in metrics) + " |"
    worlds = list(dict.fromkeys(c["world"] for c in cells))
    sizes = sorted({c["cases"] for c in cells})
    out: list[str] = []
    for title, kinds, highest in TABLES:
        out += [f"{title}:", "", head, rule]
        for world in worlds:
            for n in sizes:
                mine = [c for c in cells if c["world"] == world and c["cases"] == n]
                if mine:
                    row = [_percent(worst(mine, m, kinds, highest)) for m in metrics]
                    out.append(f"| {world} | {n} | " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out).rstrip()


def summary(result: dict) -> str:
    """Per world: the worst type-I error and coverage with their Monte-Carlo bands, and how many
    rates cross the issue's bounds against how many would by chance alone at exactly 5% and 95%."""
    lines = []
    metrics = [f"{t}.{m}" for t, m in METRICS]
    for world in dict.fromkeys(c["world"] for c in result["cells"]):
        mine = [c for c in result["cells"] if c["world"] == world]
        parts = []
        for label, kinds, highest, bound, nominal in (
            ("type-I", ["reject"], True, TYPE_I_BOUND, 0.05),
            ("coverage", ["overall", "class"], False, COVERAGE_BOUND, 0.95),
            ("difference coverage", ["difference"], False, COVERAGE_BOUND, 0.95),
        ):
            found = [
                (m, c, where, h, t)
                for m in metrics
                for c in mine
                for kind in kinds
                for where, h, t in rates(c, m, kind)
                if t >= MIN_DRAWS
            ]
            if not found:
                continue
            m, c, where, h, t = (max if highest else min)(found, key=lambda x: x[3] / x[4])
            r, lo, hi = band(h, t)
            crossing = sum((x[3] / x[4] > bound) if highest else (x[3] / x[4] < bound) for x in found)
            if highest:
                chance = sum(_binomial_tail(x[4], nominal, math.floor(bound * x[4])) for x in found)
            else:  # misses above (1 - bound) t
                chance = sum(_binomial_tail(x[4], 1 - nominal, math.floor((1 - bound) * x[4])) for x in found)
            parts.append(
                f"{label} worst {100 * r:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({m}, {c['null']} {c['layout']} "
                f"n={c['cases']}, {where}); {crossing} of {len(found)} rates beyond {100 * bound:.1f}% "
                f"({chance:.1f} expected by chance at exactly {100 * nominal:.0f}%)"
            )
        lines.append(f"- {world}: " + "; ".join(parts))
    return "\n".join(lines)


# --- The grid ------------------------------------------------------------------------------------


def grid(worlds: Sequence[str], nulls: Sequence[str], layouts: Sequence[str], sizes: Sequence[int]) -> list[tuple]:
    return [(w, nu, lay, n) for w in worlds for nu in nulls for lay in layouts for n in sizes]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000, help="replications per cell below 50 cases")
    parser.add_argument("--reps-large", type=int, default=1600, help="replications per cell from 50 cases")
    parser.add_argument("--resamples", type=int, default=1000, help="the report's --bootstrap (Monte Carlo tests)")
    parser.add_argument("--world", action="append", choices=list(WORLDS), help="repeatable; default every world")
    parser.add_argument("--null", action="append", choices=NULLS)
    parser.add_argument("--layout", action="append", choices=list(LAYOUTS))
    parser.add_argument("--cases", action="append", type=int, help=f"repeatable; default {CASES}")
    parser.add_argument("--quick", action="store_true", help="40 replications per cell (80 from 50 cases)")
    parser.add_argument("--jobs", type=int, default=1, help="cells run in parallel")
    parser.add_argument("--out", type=Path, help="write the counts as JSON here")
    parser.add_argument("--table", type=Path, help="print docs/report.md's tables from a result file, and exit")
    args = parser.parse_args(argv)
    if args.table is not None:
        result = json.loads(args.table.read_text(encoding="utf-8"))
        print(table(result))
        print()
        print(summary(result))
        return 0
    reps, reps_large = (40, 80) if args.quick else (args.reps, args.reps_large)
    cells = grid(args.world or list(WORLDS), args.null or NULLS, args.layout or list(LAYOUTS), args.cases or CASES)
    work = [(w, nu, lay, n, reps_large if n >= 50 else reps, args.resamples) for w, nu, lay, n in cells]
    work.sort(key=lambda c: -c[3])  # the long cells first, so that parallel jobs end together
    started = time.perf_counter()
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            done = pool.map(_run_cell, work, chunksize=1)
    else:
        done = [_run_cell(c) for c in work]
    order = {c: i for i, c in enumerate(cells)}
    done.sort(key=lambda d: order[(d["world"], d["null"], d["layout"], d["cases"])])
    result = {
        "settings": {"reps": reps, "reps_large": reps_large, "resamples": args.resamples, "alpha": ALPHA},
        "seconds": round(time.perf_counter() - started),
        "cells": done,
    }
    if args.out is not None:
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(table(result))
    print()
    print(summary(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
