"""Building the report: comparable runs grouped, each metric per run, then mean, sample SD, n, a
standard error and an interval; model comparisons, interaction statistics, what the sample size
allows (each group's `warnings`), usage and cost.

Comparable runs are those with the same `group_key` (dataset hash, selected cases, cause-class
mapping, code/prompt hash, models and generation settings); runs are never pooled across keys.
Each metric is computed within each run, overall and per cause class that has records in the
group, and only then averaged: mean and sample SD (ddof=1) over the runs where the metric is
defined (see `metrics.mean_sd`). What a task scores, and how, is `tasks.TASKS[task]`'s to say.

Groups that share a `comparison_key` (the same but for the evaluated model) form a family: their
cases are the clusters of every interval and test (`family.Family`), which gives each group's
intervals (`estimates`) and each pair's paired comparison (`compare`).

Cost. Each role's model is priced by `prices.price_for` (a `--prices` file by model or role, else
the bundled table); each backend's tokens cost what `prices.cost_usd` says (batch work at the
batch discount, 0.5 by default; sync work at list price; manual work unpriced), unless the provider
reported the cost of all of that work (OpenRouter's `usage.cost`), which is then its cost, the role
also showing the sum it reported (`reported_cost_usd`). A role without a price, or with unpriced
work, has `cost_usd: null`, and then so does the total. A provider that prices by the hour
(`providers.schedules`: DeepSeek's peak and off-peak) has its sync work priced at the factor of the
minute each request was answered (`requests.answered_at`), the role also showing the same requests
at the listed peak price (`peak_cost_usd`) and how many were recorded without a time
(`untimed_requests`, priced at the peak: a workspace older than the column).
"""

from __future__ import annotations

import re
from typing import Any

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.charges import all_reported, backend_cost
from lexpilot_batch.providers.prices import DEFAULT_BATCH_DISCOUNT, Prices, check_prices, price_for
from lexpilot_batch.providers.prices import total as total_cost
from lexpilot_batch.providers.schedules import schedule_for
from lexpilot_batch.report.document import Report, RunResults
from lexpilot_batch.report.statistics import compare, estimates, inference, swap
from lexpilot_batch.report.statistics import plan as planning
from lexpilot_batch.report.statistics.compare import check_adjust, check_baseline
from lexpilot_batch.report.statistics.family import Family, cases_by_class
from lexpilot_batch.report.statistics.interaction import interaction_stats

ROLE_ORDER = ("eval", "user", "judge")
BENCHMARK_CASES = 432  # the LexPilot benchmark's cases (the seed README): fewer is a subset or another dataset

METHOD = (
    "95% interval of the mean over runs, the cases the clusters (runs, histories and claims nested in them): "
    "for accuracies and DCG success the exact binomial interval with one run (clopper-pearson), else "
    "Clopper-Pearson at the case-clustered effective sample size (korn-graubard), exact bounds at 0 and 1; for "
    "Macro-F1, F1_U, F1_C and QWK a t interval with the jackknife SE on the logit scale of the metric's range "
    "(jackknife-logit-t); the t quantiles' df Satterthwaite's for the kurtosis of the case influence values, at "
    f"most cases - 1; none below {estimates.MIN_CASES} cases"
)
TEST = (
    "paired by case at every number of cases, on as many runs of each model (the first ones): the sign-flip "
    "test of per-case differences (accuracies, DCG success), the swap of the models' records of a case "
    "(Macro-F1, F1, QWK); exact over every pattern when cheap, else Monte Carlo; its 95% interval the "
    "differences it would not reject; p_adjusted: Holm over the report's comparisons (the headline metrics "
    "one family, the others another)"
)
THRESHOLDS: dict[str, float] = {
    "min_cases": estimates.MIN_CASES,
    "exact_swaps": swap.EXACT_SWAPS,
    "exact_work": inference.EXACT_WORK,
    "benchmark_cases": BENCHMARK_CASES,
}
USAGE_FIELDS = ("requests", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens")
# What a provider reported of a backend's cost: requests that report one, their sum, and those that
# used tokens without one (`state.usage.usage_by_run`).
REPORTED = ("reported", "reported_cost_usd", "unreported")


def _natural_key(text: str) -> tuple:
    """Sort "run2" before "run10" and case "9" before "10"."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", str(text)) if part
    )


def _task_status(task: str, runs: list[RunResults]) -> dict:
    """What a task's numbers rest on: which cases are not scored, per run."""
    missing: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for run in runs:
        if task in run.tasks:
            missing[run.run_id] = sorted(map(str, run.tasks[task].missing), key=_natural_key)
            failed[run.run_id] = sorted(map(str, run.tasks[task].failed), key=_natural_key)
    return {
        "partial": any(missing.values()) or any(failed.values()),
        "missing": missing,
        "failed": failed,
    }


def _usage(runs: list[RunResults], prices: Prices | None, discount: float) -> dict:
    """Requests and tokens per role over the group's runs, and their cost (`_cost`)."""
    by_backend: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        for role, backends in run.usage.items():
            for backend, counts in backends.items():
                into = by_backend.setdefault(role, {}).setdefault(backend, dict.fromkeys(USAGE_FIELDS + REPORTED, 0))
                for key in USAGE_FIELDS:
                    into[key] += int(counts.get(key, 0) or 0)
                for key in REPORTED:
                    into[key] += counts.get(key, 0) or 0
                if "timed" in counts:  # (`state.usage`: sync work by the minute it was answered)
                    into.setdefault("timed", []).extend(counts["timed"])
    order = [r for r in ROLE_ORDER if r in by_backend] + sorted(set(by_backend) - set(ROLE_ORDER))
    first = runs[0] if runs else None  # a group's runs share their models
    model_of = {} if first is None else {"eval": first.model, "user": first.user_model, "judge": first.judge_model}
    roles = {}
    priced = False
    for role in order:
        price = price_for(prices, role, model_of.get(role))
        schedule = schedule_for(prices, model_of.get(role))
        parts = by_backend[role].items()
        priced = priced or price is not None or any(all_reported(counts) for _, counts in parts)
        roles[role] = {
            **{key: int(sum(counts[key] for _, counts in parts)) for key in USAGE_FIELDS},
            "cost_usd": total_cost(
                backend_cost(counts, price, backend, discount, schedule) for backend, counts in parts
            ),
        }
        if any(counts["reported"] for _, counts in parts):  # (only then: a report without it is unchanged)
            roles[role]["reported_cost_usd"] = sum(float(counts["reported_cost_usd"]) for _, counts in parts)
        if schedule is not None and any("timed" in counts for _, counts in parts):
            # Priced by the hour (`providers.schedules`): the same requests at the listed peak price
            # beside, and those answered before answer times were kept, which took that price.
            roles[role]["peak_cost_usd"] = total_cost(
                backend_cost(counts, price, backend, discount) for backend, counts in parts
            )
            untimed = sum(t[1] for _, counts in parts for t in counts.get("timed", []) if t[0] is None)
            if untimed:
                roles[role]["untimed_requests"] = untimed
    total: dict[str, Any] = {key: sum(r[key] for r in roles.values()) for key in USAGE_FIELDS}
    total["cost_usd"] = total_cost(r["cost_usd"] for r in roles.values()) if priced else None
    if any("peak_cost_usd" in r for r in roles.values()) and total["cost_usd"] is not None:
        total["peak_cost_usd"] = total_cost(r.get("peak_cost_usd", r["cost_usd"]) for r in roles.values())
    return {"roles": roles, "total": total, "batch_discount": discount if priced else None}


def build_report(
    runs: list[RunResults],
    prices: dict | None = None,
    *,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
    resamples: int = compare.DEFAULT_RESAMPLES,
    seed: int = compare.DEFAULT_SEED,
    baseline: str | None = None,
    adjust: str = compare.DEFAULT_ADJUST,
    plan: float | None = None,
) -> dict:
    """The report of `runs` as the stable JSON-ready dict documented in `report.document`.

    `resamples` are the Monte Carlo permutation tests' random patterns (0: a comparison that an
    exact enumeration cannot test gets no p-value, with the reason; intervals do not need them); `baseline` compares every model with that one instead of
    every pair; `adjust="holm"` (the default) adds Holm-adjusted p-values over the report's
    comparisons (`compare.holm_over`); `plan` DELTA adds the cases needed to detect DELTA (`plan`).
    """
    check_prices(prices, batch_discount)
    check_adjust(adjust)
    if resamples < 0:
        raise LexpilotError(f"--bootstrap must be 0 or more resamples, not {resamples}.")
    if plan is not None and not 0.0 < plan <= 1.0:
        raise LexpilotError(f"--plan {plan}: give the difference to detect, above 0 and at most 1 (e.g. 0.05).")
    for run in runs:
        unknown = sorted(set(run.tasks) - set(TASKS))
        if unknown:
            raise LexpilotError(
                f"Run {run.run_id} has unknown task(s) {', '.join(unknown)}; the report knows {', '.join(TASKS)}."
            )
    check_baseline(baseline, [run.model for run in runs])
    members = _groups(runs)
    groups: list[dict[str, Any]] = [
        {
            "model": model,
            "user_model": user_model,
            "judge_model": judge_model,
            "group_key": group_key,
            "comparison_key": runs_[0].comparison_key,
            "runs": [r.run_id for r in runs_],
            "n_runs": len(runs_),
            "settings": dict(runs_[0].settings),
            # One dataset hash per group: its runs all used the bundled sample, or none did.
            "bundled_sample": any(r.bundled_sample for r in runs_),
            "warnings": [],
            "cases": {},
            "tasks": {},
            "interaction": {},
            "usage": _usage(runs_, prices, batch_discount),
        }
        for (model, user_model, judge_model, group_key), runs_ in members
    ]
    families: dict[str, list[int]] = {}
    for i, group in enumerate(groups):
        families.setdefault(group["comparison_key"], []).append(i)
    comparisons: list[dict] = []
    for indices in families.values():
        family = Family([members[i][1] for i in indices], _natural_key)
        found = estimates.estimate(family)
        for local, i in enumerate(indices):
            tasks = found.tasks[local]
            groups[i]["tasks"] = {
                task: {**tasks[task], **_task_status(task, members[i][1])} for task in TASKS if task in tasks
            }
            # The group's own cases (a family's other groups may have scored more under --partial).
            mine = cases_by_class(members[i][1], _natural_key) if len(indices) > 1 else family.classes
            by_class = {cls: len(cases) for cls, cases in mine.items()}
            groups[i]["cases"] = {"total": sum(by_class.values()), "by_class": by_class}
            groups[i]["warnings"] = sample_warnings(groups[i]["cases"], groups[i]["bundled_sample"])
            groups[i]["interaction"] = interaction_stats(members[i][1])
        comparisons += compare.compare(groups, indices, family, found, baseline, resamples=resamples, seed=seed)
    if adjust == "holm":
        compare.holm_over(comparisons)
    report = {
        "groups": groups,
        "comparisons": comparisons,
        "bootstrap": {
            "resamples": resamples,
            "seed": seed,
            "level": inference.LEVEL,
            "method": METHOD,
            "test": TEST,
            "adjust": adjust,
            "thresholds": THRESHOLDS,
        },
        "plan": None,
    }
    if plan is not None:
        report["plan"] = planning.plan(report, plan)
    Report.model_validate(report)  # the documented shape is a promise; hold ourselves to it
    return report


def sample_warnings(cases: dict, bundled_sample: bool) -> list[str]:
    """What a reader must know about a group's sample size before reading any of its numbers."""
    total, by_class = cases["total"], cases["by_class"]
    least = estimates.MIN_CASES
    out = []
    if 0 < total < BENCHMARK_CASES and not bundled_sample:  # the sample dataset has its own warning
        out.append(
            f"{total} case{'s' if total != 1 else ''}, not the LexPilot benchmark's {BENCHMARK_CASES}: "
            "a --limit run, a subset or another dataset"
        )
    if 0 < total < least:
        out.append(
            f"only {total} case{'s' if total != 1 else ''}: no intervals or standard errors (they need "
            f"{least} cases); model comparisons are exact permutation tests, whose p-value cannot fall below "
            "0.05 with fewer than 6 cases that differ"
        )
    elif total:
        small = {cls: k for cls, k in by_class.items() if k < least}
        if small:
            listed = ", ".join(f"{cls} ({k})" for cls, k in small.items())
            out.append(f"cause classes with fewer than {least} cases, shown without intervals: {listed}")
    return out


def _groups(runs: list[RunResults]) -> list[tuple[tuple[str, str, str, str], list[RunResults]]]:
    """Comparable runs together, in report order: runs are never pooled across group keys."""
    by_key: dict[tuple[str, str, str, str], list[RunResults]] = {}
    for run in runs:
        key = (run.model, run.user_model, run.judge_model, run.group_key)
        by_key.setdefault(key, []).append(run)
    out = []
    for key in sorted(by_key):
        members = sorted(by_key[key], key=lambda r: _natural_key(r.run_id))
        ids = [r.run_id for r in members]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise LexpilotError(
                f"Run id(s) {', '.join(twice)} appear more than once for model {key[0]}; each run must be given once."
            )
        out.append((key, members))
    return out
