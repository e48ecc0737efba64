"""Building the report: comparable runs grouped, each metric per run, then mean and sample SD; usage and cost.

Comparable runs are those with the same `group_key` (dataset hash, selected cases, cause-class
mapping, code/prompt hash, models and generation settings); runs are never pooled across keys.
Each metric is computed within each run, overall and per cause class that has records in the
group, and only then averaged: mean and sample SD (ddof=1) over the runs where the metric is
defined (see `metrics.mean_sd`). What a task scores, and how, is `tasks.TASKS[task]`'s to say.

Cost. `prices` maps a role to `{"input": USD per 1M prompt tokens, "output": USD per 1M
completion tokens}`; each backend's tokens cost what `costs.cost_usd` says (batch work at the
batch discount, 0.5 by default; sync work at list price; manual work unpriced). A role without a
price, or with unpriced work, has `cost_usd: null`, and then so does the total.
"""

from __future__ import annotations

import re
from typing import Any

from lexpilot_batch import metrics
from lexpilot_batch.costs import DEFAULT_BATCH_DISCOUNT, Prices, check_prices, cost_usd
from lexpilot_batch.costs import total as total_cost
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.metrics import Metric
from lexpilot_batch.report.model import Report, RunResults
from lexpilot_batch.tasks import TASKS, Record

ROLE_ORDER = ("eval", "user", "judge")
USAGE_FIELDS = ("requests", "prompt_tokens", "completion_tokens")


def _natural_key(text: str) -> tuple:
    """Sort "run2" before "run10" and case "9" before "10"."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", str(text)) if part
    )


def _scored(run: RunResults, task: str, records: list[Record]) -> tuple[dict[str, Metric], int]:
    try:
        return TASKS[task].score(records), TASKS[task].size(records)
    except (KeyError, TypeError, ValueError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise LexpilotError(
            f"Cannot score task {task} of run {run.run_id} (model {run.model}): {detail}. "
            "The stored records are not in the shape the protocol writes; re-ingest the run "
            "or report this as a bug."
        ) from exc


def _summary(per_run: dict[str, Metric]) -> dict:
    mean, sd = metrics.mean_sd(per_run.values())
    return {"mean": mean, "sd": sd, "n_defined": metrics.n_defined(per_run.values()), "per_run": per_run}


def _summarise_task(task: str, runs: list[RunResults]) -> dict:
    names = TASKS[task].metrics
    present = [run for run in runs if task in run.tasks]
    classes = sorted({cls for run in present for cls, _ in run.tasks[task].records})
    overall: dict[str, dict[str, Metric]] = {m: {} for m in names}
    by_class: dict[str, dict[str, dict[str, Metric]]] = {cls: {m: {} for m in names} for cls in classes}
    n: dict[str, int] = {}
    missing: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for run in present:
        task_records = run.tasks[task]
        records: list[Record] = [record for _, record in task_records.records]
        values, n[run.run_id] = _scored(run, task, records)
        for m in names:
            overall[m][run.run_id] = values[m]
        for cls in classes:
            in_class: list[Record] = [record for c, record in task_records.records if c == cls]
            values, _ = _scored(run, task, in_class)
            for m in names:
                by_class[cls][m][run.run_id] = values[m]
        missing[run.run_id] = sorted(map(str, task_records.missing), key=_natural_key)
        failed[run.run_id] = sorted(map(str, task_records.failed), key=_natural_key)
    return {
        "overall": {m: _summary(overall[m]) for m in names},
        "by_class": {cls: {m: _summary(by_class[cls][m]) for m in names} for cls in classes},
        "n": n,
        "partial": any(missing.values()) or any(failed.values()),
        "missing": missing,
        "failed": failed,
    }


def _usage(runs: list[RunResults], prices: Prices | None, discount: float) -> dict:
    """Requests and tokens per role over the group's runs, and their cost: `costs.cost_usd` of each
    backend's tokens (batch work at the discount, sync work at list price, manual work unpriced)."""
    by_backend: dict[str, dict[str, dict[str, int]]] = {}
    for run in runs:
        for role, backends in run.usage.items():
            for backend, counts in backends.items():
                into = by_backend.setdefault(role, {}).setdefault(backend, dict.fromkeys(USAGE_FIELDS, 0))
                for key in USAGE_FIELDS:
                    into[key] += int(counts.get(key, 0) or 0)
    order = [r for r in ROLE_ORDER if r in by_backend] + sorted(set(by_backend) - set(ROLE_ORDER))
    roles = {}
    for role in order:
        price = None if prices is None else prices.get(role)
        parts = by_backend[role].items()
        roles[role] = {
            **{key: sum(counts[key] for _, counts in parts) for key in USAGE_FIELDS},
            "cost_usd": total_cost(
                cost_usd(counts["prompt_tokens"], counts["completion_tokens"], price, backend, discount)
                for backend, counts in parts
            ),
        }
    total: dict[str, Any] = {key: sum(r[key] for r in roles.values()) for key in USAGE_FIELDS}
    total["cost_usd"] = total_cost(r["cost_usd"] for r in roles.values()) if prices is not None else None
    return {"roles": roles, "total": total, "batch_discount": discount if prices is not None else None}


def build_report(
    runs: list[RunResults],
    prices: dict | None = None,
    *,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
) -> dict:
    """The report of `runs` as the stable JSON-ready dict documented in `report.model`."""
    check_prices(prices, batch_discount)
    for run in runs:
        unknown = sorted(set(run.tasks) - set(TASKS))
        if unknown:
            raise LexpilotError(
                f"Run {run.run_id} has unknown task(s) {', '.join(unknown)}; the report knows {', '.join(TASKS)}."
            )
    by_key: dict[tuple[str, str, str, str], list[RunResults]] = {}
    for run in runs:
        key = (run.model, run.user_model, run.judge_model, run.group_key)
        by_key.setdefault(key, []).append(run)
    groups = []
    for key in sorted(by_key):
        members = sorted(by_key[key], key=lambda r: _natural_key(r.run_id))
        ids = [r.run_id for r in members]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise LexpilotError(
                f"Run id(s) {', '.join(twice)} appear more than once for model {key[0]}; each run must be given once."
            )
        model, user_model, judge_model, group_key = key
        groups.append(
            {
                "model": model,
                "user_model": user_model,
                "judge_model": judge_model,
                "group_key": group_key,
                "runs": ids,
                "n_runs": len(ids),
                "settings": dict(members[0].settings),
                # One dataset hash per group: its runs all used the bundled sample, or none did.
                "bundled_sample": any(r.bundled_sample for r in members),
                "tasks": {
                    task: _summarise_task(task, members) for task in TASKS if any(task in r.tasks for r in members)
                },
                "usage": _usage(members, prices, batch_discount),
            }
        )
    report = {"groups": groups}
    Report.model_validate(report)  # the documented shape is a promise; hold ourselves to it
    return report
