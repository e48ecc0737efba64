"""Calibration of the report's statistics: seeded worlds run through the package's own
`build_report`, measuring the type-I error of every comparison it prints a p-value for and the
coverage of every interval it prints, overall and per cause class, with Monte-Carlo bands.

    python bench/calibration.py --quick --jobs 2                        # 40/80 replications per cell
    python bench/calibration.py --jobs 2 --out bench/calibration.json  # the full grid (hours)
    python bench/calibration.py --table bench/calibration.json         # docs/report.md's block
    python bench/calibration.py --merge new.json --reason WHY --out bench/calibration.json  # some cells again

A full run saves each finished piece of a cell (`CHUNK` replications) to `<out>.parts.jsonl` as it
goes: interrupted and run again with the same arguments, it does only what is missing, and the
result is the same (every replication's seed is fixed by its cell and number).

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
- `shift`: B worse, its mean skill in every class `SHIFT` below A's (the same ICC, the same rank):
  the comparison's interval at a true difference that is not 0, and the rate at which the test
  tells the two apart (its power, not a type-I error);

with A and B having 3 runs each (`3v3`) or 1 and 5 (`1v5`, a new model against a baseline).

The truth of every metric is analytic: a record's expected confusion is linear in p_c, so the
population value of each metric is its value at the scope's mean skill (QWK: `qwk_truth`).

Per cell (world, scenario, layout, cases) and metric the harness counts: comparisons with p < 0.05
among those with a p-value (`reject` under the nulls, the type-I error; `power` under the shift),
comparison intervals that hold the true difference (`difference`: 0 under the nulls), and
intervals of A and of B that hold the truth overall (`overall_A3`: model A with 3 runs) and per
class (`class_A3`, every class the report gives an interval; each class also alone in
`classes`). A rate r over N draws has the Monte-Carlo band r +- 1.96 sqrt(r (1 - r) / N).
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
from collections.abc import Callable, Iterable, Iterator, Sequence
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
SCENARIOS = (*NULLS, "shift")  # the two nulls, and B worse by SHIFT: the comparison's interval at a difference
SHIFT = 0.1
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


def class_mean(world: World, k: int, side: str = "A", scenario: str = "sharp") -> float:
    """A class's mean skill: A's, and B's, the same but under the shift (`SHIFT` lower)."""
    mean = min(0.98, world.mu * CLASS_FACTORS[k])
    return max(0.01, mean - SHIFT) if side == "B" and scenario == "shift" else mean


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


def draw_cases(world: World, n: int, scenario: str, rng: random.Random) -> list[Case]:
    out: list[Case] = []
    for k, size in enumerate(class_sizes(n)):
        mean = class_mean(world, k)
        for _ in range(size):
            u = rng.random()
            p = skill_at(u, mean, world.icc)
            if scenario == "sharp":
                q = p
            elif scenario == "weak":  # the same mean, half the ICC, ranked with A's in half of the cases
                q = skill_at(u if rng.random() < 0.5 else rng.random(), mean, world.icc / 2)
            else:  # shift: the same ICC and rank, a mean SHIFT lower
                q = skill_at(u, class_mean(world, k, "B", scenario), world.icc)
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


def scope_truths(world: World, n: int, side: str = "A", scenario: str = "sharp") -> dict[str | None, dict[str, float]]:
    """Per scope (None: overall, else a class name) every metric's truth for model A or B. The
    overall mean skill weighs each class by its cases (LCA and DCG) — and by its expected claims
    (LJP), which are the same per case in every class."""
    sizes = class_sizes(n)
    means = [class_mean(world, k, side, scenario) for k in range(len(sizes))]
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


def run_cell(
    world_name: str,
    scenario: str,
    layout: str,
    n: int,
    reps: int,
    resamples: int,
    first: int = 0,
    models_only: bool = False,
) -> dict:
    """Counts of one cell over replications `first` .. `first + reps - 1`; with `models_only`, only
    the models' own intervals (the report without its Monte Carlo tests, `resamples` 0: those
    intervals do not depend on them, the comparisons' counts do)."""
    world = WORLDS[world_name]
    runs_a, runs_b = LAYOUTS[layout]
    truth = {side: scope_truths(world, n, side, scenario) for side in "AB"}
    counts: dict[str, dict] = {f"{t}.{m}": {"classes": {}} for t, m in METRICS}
    for rep in range(first, first + reps):
        # The nulls' seeds are those of the harness before the shift scenario was added.
        rng = random.Random(_seed(world_name, scenario, layout, n, rep))
        cases = draw_cases(world, n, scenario, rng)
        runs = [one_run(cases, f"run{r + 1}", "model-a", False, rng) for r in range(runs_a)]
        runs += [one_run(cases, f"run{r + 1}", "model-b", True, rng) for r in range(runs_b)]
        report = build_report(runs, resamples=0 if models_only else resamples, seed=rep + 1)
        (comparison,) = report["comparisons"]
        first_side = "A" if comparison["a"]["model"] == "model-a" else "B"
        second_side = "B" if first_side == "A" else "A"
        for task, metric in METRICS:
            into = counts[f"{task}.{metric}"]
            d = comparison["tasks"][task][metric]
            if d["p_value"] is not None and not models_only:
                _add(into, "reject" if scenario in NULLS else "power", d["p_value"] < ALPHA)
            if d["ci"] is not None and not models_only:
                true = truth[first_side][None][metric] - truth[second_side][None][metric]
                _add(into, "difference", d["ci"]["low"] - 1e-12 <= true <= d["ci"]["high"] + 1e-12)
            for group in report["groups"]:
                side = "A" if group["model"] == "model-a" else "B"
                summaries = group["tasks"][task]
                for scope, by_metric in [(None, summaries["overall"]), *summaries["by_class"].items()]:
                    ci = by_metric[metric]["ci"]
                    if ci is None:
                        continue
                    true = truth[side][scope][metric]
                    hit = ci["low"] - 1e-12 <= true <= ci["high"] + 1e-12
                    who = f"{side}{group['n_runs']}"
                    where = "overall" if scope is None else "class"
                    _add(into, f"{where}_{who}", hit)
                    # Which side a miss is on: the truth below the interval (it is too high) or above.
                    _add(into, f"below_{where}_{who}", true < ci["low"] - 1e-12)
                    _add(into, f"above_{where}_{who}", true > ci["high"] + 1e-12)
                    if scope is not None:
                        _add(into["classes"], f"{scope}_{who}", hit)
    return {"world": world_name, "scenario": scenario, "layout": layout, "cases": n, "reps": reps, "counts": counts}


def merge(parts: Sequence[dict]) -> dict:
    """One cell's counts from its pieces (each a `run_cell` over other replications)."""
    out = {k: parts[0][k] for k in ("world", "scenario", "layout", "cases")}
    out["reps"] = sum(p["reps"] for p in parts)
    out["seconds"] = round(sum(p.get("seconds", 0.0) for p in parts), 1)
    counts: dict[str, dict] = {}
    for part in parts:
        for metric, found in part["counts"].items():
            into = counts.setdefault(metric, {"classes": {}})
            for into_, found_ in [(into, {k: v for k, v in found.items() if k != "classes"}),
                                  (into["classes"], found["classes"])]:  # fmt: skip
                for key, (hit, total) in found_.items():
                    c = into_.setdefault(key, [0, 0])
                    c[0], c[1] = c[0] + hit, c[1] + total
    out["counts"] = counts
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
    """(where, hits, total) of each rate of one kind in a cell: "reject", "power" and "difference"
    (the comparison), "overall" (each model, by its runs), "class" (each class of each model)."""
    counts = cell["counts"][metric]
    if kind == "class":
        return [(name, h, t) for name, (h, t) in counts["classes"].items() if t]
    return [(k, v[0], v[1]) for k, v in counts.items() if k != "classes" and k.split("_")[0] == kind and v[1]]


def _found(cells: Iterable[dict], metric: str, kinds: Sequence[str]) -> list[tuple[dict, str, int, int]]:
    return [
        (c, where, h, t) for c in cells for kind in kinds for where, h, t in rates(c, metric, kind) if t >= MIN_DRAWS
    ]


def _percent(found: list[tuple[dict, str, int, int]], highest: bool) -> str:
    if not found:
        return "–"
    _, _, h, t = (max if highest else min)(found, key=lambda v: v[2] / v[3])
    return f"{100 * h / t:.1f}"


def _binomial_tail(n: int, p: float, above: int) -> float:
    """P(X > above) for X ~ Binomial(n, p)."""
    log = math.log
    total = 0.0
    for k in range(above + 1, n + 1):
        total += math.exp(
            math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log(p) + (n - k) * log(1 - p)
        )
    return total


# (label, title, kinds, the highest rate (else the lowest), scenarios, bound, nominal)
TABLES = (
    ("type-I", "Highest type-I error (%): p < 0.05 between models with the same metrics, over the sharp and weak nulls and the 3v3 and 1v5 runs", ["reject"], True, NULLS, TYPE_I_BOUND, 0.05),
    ("coverage", "Lowest coverage (%) of the 95% intervals of each model's metric, overall and per class, over both models, every scenario and both run layouts", ["overall", "class"], False, SCENARIOS, COVERAGE_BOUND, 0.95),
    ("difference coverage at 0", "Lowest coverage (%) of the 95% intervals of the difference between models with the same metrics (true difference 0)", ["difference"], False, NULLS, COVERAGE_BOUND, 0.95),
    (f"difference coverage at a shift of {SHIFT}", f"Lowest coverage (%) of the 95% intervals of the difference when B's skill is {SHIFT} lower in every class (`shift`; true difference 0.08-0.15)", ["difference"], False, ("shift",), COVERAGE_BOUND, 0.95),
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
    for _, title, kinds, highest, scenarios, _, _ in TABLES:
        out += [f"{title}:", "", head, rule]
        for world in worlds:
            for n in sizes:
                mine = [c for c in cells if c["world"] == world and c["cases"] == n and c["scenario"] in scenarios]
                if mine:
                    row = [_percent(_found(mine, m, kinds), highest) for m in metrics]
                    out.append(f"| {world} | {n} | " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out).rstrip()


def summary(result: dict) -> str:
    """Per world: the worst rate of each table with its Monte-Carlo band, and how many rates cross
    the issue's bounds against how many would by chance alone at exactly 5% and 95%."""
    lines = []
    metrics = [f"{t}.{m}" for t, m in METRICS]
    for world in dict.fromkeys(c["world"] for c in result["cells"]):
        parts = []
        for label, _, kinds, highest, scenarios, bound, nominal in TABLES:
            mine = [c for c in result["cells"] if c["world"] == world and c["scenario"] in scenarios]
            found = [(m, *x) for m in metrics for x in _found(mine, m, kinds)]
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
                f"{label} worst {100 * r:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({m}, {c['scenario']} {c['layout']} "
                f"n={c['cases']}, {where}); {crossing} of {len(found)} rates beyond {100 * bound:.1f}% "
                f"({chance:.1f} expected by chance at exactly {100 * nominal:.0f}%)"
            )
        lines.append(f"- {world}: " + "; ".join(parts))
    return "\n".join(lines)


def replications_line(result: dict) -> str:
    """How many replications the cells of each size hold (the nulls', and the shift's where they
    differ): read from the cells, so that a grid stopped early says so."""
    parts = []
    missing = [tuple(m) for m in result.get("settings", {}).get("missing", [])]
    for n in sorted({c["cases"] for c in result["cells"]} | {m[3] for m in missing}):
        by = {}
        for label, scenarios in (("", NULLS), ("shift ", ("shift",))):
            reps = sorted({c["reps"] for c in result["cells"] if c["cases"] == n and c["scenario"] in scenarios})
            if reps:
                by[label] = f"{reps[0]:,}" if len(reps) == 1 else f"{reps[0]:,}-{reps[-1]:,}"
        text = by.get("", by.get("shift ", "none"))
        if "" in by and "shift " in by and by["shift "] != by[""]:
            text += f" (shift {by['shift ']})"
        gone = [m for m in missing if m[3] == n]
        if gone:
            text += f" ({len(gone)} cells not run: " + ", ".join(" ".join(map(str, m[:3])) for m in gone) + ")"
        parts.append(f"{n} cases {text}")
    resamples = result.get("settings", {}).get("resamples")
    tail = f", the report's Monte Carlo tests at {resamples:,} patterns" if resamples else ""
    return "Replications per cell: " + "; ".join(parts) + tail + "."


def remeasured_line(result: dict) -> str:
    """Which cells a later version of the report's code measured again (`--merge`), each batch
    with its code version and the reason given; "" when none."""
    parts = []
    for batch in result.get("settings", {}).get("remeasured", []):
        cells = ", ".join(" ".join(map(str, c)) for c in batch["cells"])
        parts.append(f"with code {batch['code']} ({batch['reason']}): {cells}")
    if not parts:
        return ""
    code = result["settings"]["code"]
    return f"Cells measured again after the grid (the others are of code {code}): " + "; ".join(parts) + "."


MODEL_KEYS = ("overall", "class", "below", "above")  # the counts of the models' own intervals


def _models_into(cell: dict, newer: dict) -> dict:
    """`cell` with the counts of its models' intervals from `newer` (a `--models-only` run of its
    first `models_reps` replications, at most all), its comparisons' counts kept."""
    if newer["reps"] > cell["reps"]:
        raise SystemExit(f"--merge: a --models-only cell has more replications ({newer['reps']}) than the one "
                         f"it updates ({cell['reps']})")  # fmt: skip
    counts = {}
    for metric, found in cell["counts"].items():
        kept = {k: v for k, v in found.items() if k != "classes" and k.split("_")[0] not in MODEL_KEYS}
        counts[metric] = {**kept, **newer["counts"][metric]}
    seconds = cell.get("seconds", 0.0) + newer.get("seconds", 0.0)
    return dict(cell, counts=counts, seconds=seconds, models_reps=newer["reps"])


def merge_into(result: dict, newer: dict, reason: str) -> dict:
    """`result` with each cell of `newer` (another code version's run of some cells) in place of
    its own, the batch listed in `settings.remeasured` with `newer`'s code and `reason`; of a
    `--models-only` run (`settings.models_only`), only the counts of the models' intervals."""
    key = ("world", "scenario", "layout", "cases")
    fresh = {tuple(c[k] for k in key): c for c in newer["cells"]}
    if newer["settings"].get("models_only"):
        olds = {tuple(c[k] for k in key): c for c in result["cells"]}
        fresh = {k: _models_into(olds[k], c) if k in olds else c for k, c in fresh.items()}
        reps = sorted({c["reps"] for c in newer["cells"]})
        count = f"{reps[0]:,}" if len(reps) == 1 else f"{reps[0]:,}-{reps[-1]:,}"
        reason += f" (the models' intervals, {count} replications; the comparisons' counts are the earlier code's)"
    cells = [fresh.pop(tuple(c[k] for k in key), c) for c in result["cells"]]
    if fresh:
        raise SystemExit(f"--merge: cells not in the grid of --out: {sorted(fresh)}")
    settings = dict(result["settings"])
    done = [list(c) for c in (tuple(c[k] for k in key) for c in newer["cells"])]
    # Each earlier batch keeps the cells this one did not measure again (a batch of the same code
    # too: two merges of one code's runs, say the 6- and 8-case cells then the 20-case ones, are
    # two batches, each naming its own cells).
    kept = [dict(b, cells=[c for c in b["cells"] if c not in done]) for b in settings.get("remeasured", [])]
    settings["remeasured"] = [b for b in kept if b["cells"]] + [
        {"code": newer["settings"]["code"], "reason": reason, "cells": done}
    ]
    # A grid stopped at a deadline (`--assemble`) is complete once merges bring every cell to its
    # planned replications (a cell measured again with more, to settle a rate, counts as well).
    planned = {"small": settings["reps"], "large": settings["reps_large"], "shift_large": settings["reps_shift_large"]}
    settings["complete"] = not settings.get("missing") and all(
        c["reps"] >= replications(c["scenario"], c["cases"], planned) for c in cells
    )
    return {"settings": settings, "seconds": result["seconds"] + newer["seconds"], "cells": cells}


def report(result: dict) -> str:
    """The block docs/report.md shows between its calibration markers: how many replications (and
    which cells were measured again), the tables, then the summary."""
    head = "\n\n".join(x for x in (replications_line(result), remeasured_line(result)) if x)
    return head + "\n\n" + table(result) + "\n\n" + summary(result)


# --- The grid ------------------------------------------------------------------------------------

CHUNK = 200  # replications per piece of work: what an interrupted run loses at most, per job


def grid(worlds: Sequence[str], scenarios: Sequence[str], layouts: Sequence[str], sizes: Sequence[int]) -> list[tuple]:
    return [(w, s, lay, n) for w in worlds for s in scenarios for lay in layouts for n in sizes]


def _run_piece(args: tuple) -> dict:
    started = time.perf_counter()
    out = run_cell(*args[:7], models_only=args[5] == 0)
    out["first"] = args[6]
    out["resamples"] = args[5]
    out["code"] = args[7]
    out["seconds"] = round(time.perf_counter() - started, 1)
    print(f"{out['world']:13s} {out['scenario']:5s} {out['layout']} n={out['cases']:<4d} reps {out['first']}+{out['reps']}"
          f" {out['seconds']:7.1f} s", file=sys.stderr, flush=True)  # fmt: skip
    return out


def code_version() -> str:
    """A hash of the report's code and of this harness's worlds and counting (the source above
    "Reading the counts"): pieces saved by other code are not reused."""
    import lexpilot_batch.report as package

    digest = hashlib.sha256()
    for path in sorted(Path(package.__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    own = Path(__file__).read_text(encoding="utf-8")
    digest.update(own[: own.index("# --- Reading the counts")].encode("utf-8"))
    return digest.hexdigest()[:16]


def _piece_key(piece: dict) -> tuple:
    return (piece["world"], piece["scenario"], piece["layout"], piece["cases"], piece["first"], piece["reps"],
            piece["resamples"], piece["code"])  # fmt: skip


def replications(scenario: str, n: int, reps: dict[str, int]) -> int:
    """A cell's replications: `reps["small"]` below 50 cases, `reps["large"]` from 50 (the shift's
    `reps["shift_large"]`: its cells are a third of the grid's time, and a coverage far from 95% is
    told from it with 400)."""
    if n < 50:
        return reps["small"]
    return reps["shift_large"] if scenario == "shift" else reps["large"]


def run_grid(
    cells: Sequence[tuple],
    reps: dict[str, int],
    resamples: int,
    jobs: int,
    parts: Path | None,
    code: str,
    run: bool = True,
) -> list[dict]:
    """Every cell's counts, in `cells` order, its replications run in pieces of `CHUNK` (`jobs` at
    a time); with `parts`, pieces found there are not run again and new ones are added as they end.
    With `run` False nothing is run: each cell gets the pieces found, from its first replication on
    without a gap (a grid stopped early), and a cell with none is an error."""
    work = [
        (w, s, lay, n, min(CHUNK, total - first), resamples, first, code)
        for w, s, lay, n in cells
        for total in [replications(s, n, reps)]
        for first in range(0, total, CHUNK)
    ]
    done: dict[tuple, dict] = {}
    if parts is not None and parts.exists():
        for line in parts.read_text(encoding="utf-8").splitlines():
            if line.strip():
                piece = json.loads(line)
                done[_piece_key(piece)] = piece
    todo = [a for a in work if (*a[:4], a[6], a[4], a[5], code) not in done] if run else []
    # The small cells first (their tables fill first), and of a size, every cell's first piece
    # before any cell's second: a grid stopped early has every cell, each with fewer replications.
    todo.sort(key=lambda a: (a[3], a[6]))
    sink = parts.open("a", encoding="utf-8") if parts is not None else None
    try:
        with multiprocessing.Pool(jobs) if jobs > 1 else _Serial() as pool:
            for piece in pool.imap_unordered(_run_piece, todo):
                done[_piece_key(piece)] = piece
                if sink is not None:
                    sink.write(json.dumps(piece, ensure_ascii=False) + "\n")
                    sink.flush()
    finally:
        if sink is not None:
            sink.close()
    wanted = {(*a[:4], a[6], a[4], a[5], code) for a in work}
    out = []
    for cell in cells:
        pieces = [p for k, p in sorted(done.items(), key=lambda kv: kv[0][4]) if k[:4] == cell and k in wanted]
        if not run:  # the pieces from replication 0 on, up to the first one missing
            contiguous, upto = [], 0
            for p in pieces:
                if p["first"] != upto:
                    break
                contiguous.append(p)
                upto += p["reps"]
            pieces = contiguous
        if not pieces:
            if run:
                raise SystemExit(f"no replications of {cell} saved for this code ({code}) in {parts}")
            continue  # assembled without it: `main` lists it in the settings' "missing"
        out.append(merge(pieces))
    return out


def verify(parts: Path, code: str, count: int) -> list[list]:
    """Recompute `count` of the pieces that code version `code` saved in `parts` (spread over the
    sizes, worlds and scenarios: every k-th piece in grid order) with this code; exit unless every
    one gives the same counts. The pieces checked, as (world, scenario, layout, cases, first)."""
    pieces = [json.loads(line) for line in parts.read_text(encoding="utf-8").splitlines() if line.strip()]
    pieces = sorted((p for p in pieces if p["code"] == code), key=lambda p: (p["cases"], p["world"], p["scenario"],
                                                                              p["layout"], p["first"]))  # fmt: skip
    if not pieces:
        raise SystemExit(f"no pieces of code {code} in {parts}")
    step = max(1, len(pieces) // count)
    checked = []
    for p in pieces[::step][:count]:
        again = run_cell(p["world"], p["scenario"], p["layout"], p["cases"], p["reps"], p["resamples"], p["first"])
        where = [p["world"], p["scenario"], p["layout"], p["cases"], p["first"]]
        if again["counts"] != p["counts"]:
            raise SystemExit(f"the piece {where} of code {code} gives other counts with this code: not reused")
        print(f"checked {where}: the same counts", file=sys.stderr, flush=True)
        checked.append(where)
    return checked


class _Serial:
    """`multiprocessing.Pool`'s `imap_unordered` in this process (`--jobs 1`)."""

    def __enter__(self) -> _Serial:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def imap_unordered(self, fn: Callable[[tuple], dict], items: Iterable[tuple]) -> Iterator[dict]:
        return map(fn, items)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=1000, help="replications per cell below 50 cases")
    parser.add_argument("--reps-large", type=int, default=1600, help="replications per cell from 50 cases")
    parser.add_argument("--reps-shift-large", type=int, default=400, help="the shift's replications from 50 cases")
    parser.add_argument("--resamples", type=int, default=1000, help="the report's --bootstrap (Monte Carlo tests)")
    parser.add_argument("--world", action="append", choices=list(WORLDS), help="repeatable; default every world")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="repeatable; default all three")
    parser.add_argument("--layout", action="append", choices=list(LAYOUTS))
    parser.add_argument("--cases", action="append", type=int, help=f"repeatable; default {CASES}")
    parser.add_argument("--quick", action="store_true", help="40 replications per cell (80 from 50 cases)")
    parser.add_argument(
        "--models-only",
        action="store_true",
        help="count only the models' own intervals (the report without Monte Carlo tests, which they "
        "do not depend on: several times faster); --merge then keeps the comparisons' counts",
    )
    parser.add_argument("--jobs", type=int, default=1, help="pieces run in parallel")
    parser.add_argument("--out", type=Path, help="write the counts as JSON here (pieces go to <out>.parts.jsonl)")
    parser.add_argument("--table", type=Path, help="print docs/report.md's block from a result file, and exit")
    parser.add_argument(
        "--assemble",
        action="store_true",
        help="run nothing: write --out from the pieces saved so far (a grid stopped early)",
    )
    parser.add_argument(
        "--code",
        help="with --assemble: the pieces of this other code version, once --verify "
        "pieces of them recomputed with this code give the same counts",
    )
    parser.add_argument("--verify", type=int, default=0, help="with --code: how many pieces to recompute")
    parser.add_argument(
        "--merge",
        type=Path,
        help="run nothing: put the cells of this result file (a newer code's run of some cells) in "
        "place of theirs in --out, listed with their code and --reason",
    )
    parser.add_argument("--reason", default="", help="with --merge: why those cells were measured again")
    args = parser.parse_args(argv)
    if args.merge is not None:
        if args.out is None or not args.reason:
            parser.error("--merge needs --out (the result to update) and --reason")
        merged = merge_into(json.loads(args.out.read_text(encoding="utf-8")),
                            json.loads(args.merge.read_text(encoding="utf-8")), args.reason)  # fmt: skip
        args.out.write_text(json.dumps(merged, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(report(merged))
        return 0
    if args.table is not None:
        print(report(json.loads(args.table.read_text(encoding="utf-8"))))
        return 0
    reps = {"small": args.reps, "large": args.reps_large, "shift_large": args.reps_shift_large}
    if args.quick:
        reps = {"small": 40, "large": 80, "shift_large": 80}
    cells = grid(args.world or list(WORLDS), args.scenario or SCENARIOS, args.layout or list(LAYOUTS),
                 args.cases or CASES)  # fmt: skip
    if args.models_only:
        args.resamples = 0  # pieces with 0 resamples are models-only pieces (`_run_piece`)
    parts = None if args.out is None else args.out.with_name(args.out.name + ".parts.jsonl")
    started = time.perf_counter()
    code = code_version()
    if args.assemble and parts is None:
        parser.error("--assemble needs --out (the pieces are read from <out>.parts.jsonl)")
    checked = None
    if args.code is not None and args.code != code:
        if not args.assemble or args.verify < 1:
            parser.error("--code needs --assemble and --verify N (N >= 1)")
        checked = {"code": code, "pieces": verify(parts, args.code, args.verify)}  # type: ignore[arg-type]
        code = args.code
    done = run_grid(cells, reps, args.resamples, args.jobs, parts, code, run=not args.assemble)
    present = {(c["world"], c["scenario"], c["layout"], c["cases"]) for c in done}
    missing = [list(cell) for cell in cells if tuple(cell) not in present]
    settings: dict[str, object] = {"reps": reps["small"], "reps_large": reps["large"], "reps_shift_large": reps["shift_large"],
                     "resamples": args.resamples, "alpha": ALPHA,
                     "shift": SHIFT, "chunk": CHUNK, "code": code, "complete": not args.assemble or not missing
                     and all(c["reps"] == replications(c["scenario"], c["cases"], reps) for c in done),
                     "missing": missing, "models_only": args.models_only}  # fmt: skip
    if checked is not None:  # pieces of other code, checked to give this code's counts
        settings["checked_with"] = checked
    result = {"settings": settings, "seconds": round(time.perf_counter() - started), "cells": done}
    if args.out is not None:
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        if parts is not None and settings["complete"]:
            parts.unlink(missing_ok=True)  # the result holds it all now
    print(report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
