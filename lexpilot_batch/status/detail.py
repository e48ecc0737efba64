"""`status --verbose` and `status --format json`: what the workspace holds and how far each run has
come, read from the database only."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lexpilot_batch.benchmark.tasks import in_order
from lexpilot_batch.data import SAMPLE_NOTE
from lexpilot_batch.engine import budgets
from lexpilot_batch.engine.rearm import retry_history
from lexpilot_batch.providers.backends import MANUAL, RUN_HERE
from lexpilot_batch.state.states import FileState, ThreadState
from lexpilot_batch.state.waves import OPEN, files_in
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import used_bundled_sample
from lexpilot_batch.util.text import terminal_safe


def collect(ws: Workspace) -> dict[str, Any]:
    """The stable JSON of `status --format json`."""
    db = ws.store.conn
    waves = db.execute("SELECT COUNT(*), MAX(n) FROM waves").fetchone()
    open_wave = db.execute("SELECT MIN(n) FROM waves WHERE closed_at IS NULL").fetchone()[0]
    runs = []
    for run in db.execute("SELECT pk, run_id, model, manifest FROM runs ORDER BY pk").fetchall():
        tasks: dict[str, dict[str, int]] = {}
        for row in db.execute(
            "SELECT task, status, COUNT(*) AS n FROM threads WHERE run_pk = ? GROUP BY task, status", (run["pk"],)
        ):
            entry = tasks.setdefault(row["task"], {"total": 0, "done": 0, "in_flight": 0, "failed": 0})
            entry["total"] += row["n"]
            column = {
                ThreadState.ACTIVE: "in_flight",
                ThreadState.DONE: "done",
                ThreadState.FAILED: "failed",
                ThreadState.CANCELLED: "cancelled",
            }
            entry[column[row["status"]]] = entry.get(column[row["status"]], 0) + row["n"]
        ordered = {t: tasks[t] for t in in_order(tasks)}
        manifest = json.loads(run["manifest"])
        runs.append(
            {
                "run_id": run["run_id"],
                "model": run["model"],
                "bundled_sample": used_bundled_sample(manifest),
                # Each role's model (provider-qualified where it was given so) and its endpoint.
                "models": {"eval": run["model"], "user": manifest["user_model"], "judge": manifest["judge_model"]},
                "endpoints": manifest.get("endpoints", {}),
                "tasks": ordered,
            }
        )
    requests: dict[str, dict[str, int]] = {}
    usage: dict[str, dict[str, int]] = {}
    for row in db.execute(
        "SELECT role, status, COUNT(*) AS n, SUM(COALESCE(prompt_tokens, 0)) AS p,"
        " SUM(COALESCE(completion_tokens, 0)) AS c, SUM(COALESCE(reasoning_tokens, 0)) AS r,"
        " SUM(COALESCE(cached_tokens, 0)) AS k FROM requests GROUP BY role, status"
    ):
        entry = requests.setdefault(row["role"], {"pending": 0, "answered": 0, "failed": 0, "discarded": 0})
        entry[row["status"]] += row["n"]
        u = usage.setdefault(
            row["role"], {"prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0, "cached_tokens": 0}
        )
        u["prompt_tokens"] += row["p"]
        u["completion_tokens"] += row["c"]
        u["reasoning_tokens"] += row["r"]
        u["cached_tokens"] += row["k"]
    files = [
        {
            "wave": r["wave"],
            "path": r["path"],
            "requests": r["n_requests"],
            "status": r["status"],
            "batch_id": r["batch_id"],
            "batch_status": r["batch_status"],
            "request_counts": json.loads(r["request_counts"]) if r["request_counts"] else None,
        }
        for r in files_in(db, OPEN)
    ]
    failures = [
        {
            "run_id": r["run_id"],
            "model": r["model"],
            "task": r["task"],
            "case_number": r["case_number"],
            "variant": r["variant"],
            "reason": r["reason"],
        }
        for r in db.execute(
            "SELECT runs.run_id, runs.model, t.task, t.variant, t.reason, c.case_number FROM threads t"
            " JOIN runs ON runs.pk = t.run_pk JOIN cases c ON c.dataset = runs.dataset AND c.idx = t.case_idx"
            f" WHERE t.status = '{ThreadState.FAILED}' ORDER BY t.pk"
        )
    ]
    anomaly_kinds = dict(db.execute("SELECT kind, COUNT(*) FROM anomalies GROUP BY kind ORDER BY kind").fetchall())
    retried = db.execute("SELECT COUNT(*) FROM requests WHERE attempt > 1").fetchone()[0]
    return {
        "waves": waves[0],
        "current_wave": open_wave if open_wave is not None else waves[1],
        "runs": runs,
        "requests": requests,
        "retried_requests": retried,
        "usage": usage,
        "open_files": files,
        "failed_threads": failures,
        "anomalies": sum(anomaly_kinds.values()),
        "anomaly_kinds": anomaly_kinds,
        "retries": retry_history(ws),
        # Per model of batch files: estimated input tokens compiled but not yet created (queued)
        # and at the provider (submitted), against its enqueued-token budget.
        "token_budgets": budgets.usage_by_model(db),
        "batches_aside": {
            r["why"]: r["n"] for r in db.execute("SELECT why, COUNT(*) AS n FROM other_batches GROUP BY why")
        },
        "lost_batches": db.execute(f"SELECT COUNT(*) FROM files WHERE status = '{FileState.LOST}'").fetchone()[0],
    }


def filtered(status: dict[str, Any], keeps: Callable[[str, str], bool]) -> dict[str, Any]:
    """`status` with only the runs (and their failed threads) that `keeps(run_id, model)`."""
    return {
        **status,
        "runs": [r for r in status["runs"] if keeps(r["run_id"], r["model"])],
        "failed_threads": [f for f in status["failed_threads"] if keeps(f["run_id"], f["model"])],
    }


def render(status: dict[str, Any]) -> str:
    lines = [f"Waves compiled: {status['waves']}   current wave: {status['current_wave'] or '-'}"]
    if not status["runs"]:
        lines.append("No runs yet: start with `lexpilot-batch prepare --stage all --run-id run1 --model M`.")
    for run in status["runs"]:
        lines.append(f"\nRun {run['run_id']}  model {run['model']}")
        for role, name in run["models"].items():
            lines.append(f"  {role:<6}{name}  {run['endpoints'].get(role, '')}".rstrip())
        if run["bundled_sample"]:
            lines.append(f"  !! {SAMPLE_NOTE}")
        lines.append(f"  {'task':<17}{'total':>7}{'done':>7}{'in flight':>11}{'failed':>8}")
        for task, c in run["tasks"].items():
            lines.append(f"  {task:<17}{c['total']:>7}{c['done']:>7}{c['in_flight']:>11}{c['failed']:>8}")
    if status["requests"]:
        lines.append(
            f"\n  {'role':<8}{'answered':>10}{'pending':>9}{'failed':>8}{'discarded':>11}"
            f"{'prompt tok':>12}{'compl. tok':>12}"
        )
        for role, c in sorted(status["requests"].items()):
            u = status["usage"].get(role, {})
            lines.append(
                f"  {role:<8}{c['answered']:>10}{c['pending']:>9}{c['failed']:>8}{c['discarded']:>11}"
                f"{u.get('prompt_tokens', 0):>12}{u.get('completion_tokens', 0):>12}"
            )
        lines.append(f"  retried requests (attempt > 1): {status['retried_requests']}")
    if status["open_files"]:
        lines.append("\nFiles not yet ingested:")
        for f in status["open_files"]:
            counts = f["request_counts"] or {}
            done = f"{counts.get('completed', 0)}+{counts.get('failed', 0)}/{counts.get('total', f['requests'])}"
            # The batch's id and status are the provider's words: one line of them, whatever they hold.
            batch = f"  {terminal_safe(f['batch_id'])}" if f["batch_id"] not in (None, *RUN_HERE, MANUAL) else ""
            shown = terminal_safe(f["batch_status"] or "")
            lines.append(f"  w{f['wave']:04d} {f['path']}  {f['status']}  {shown} {done}{batch}")
    if status["failed_threads"]:
        lines.append(f"\nFailed threads ({len(status['failed_threads'])}):")
        for f in status["failed_threads"][:20]:
            variant = f"/{f['variant']}" if f["variant"] else ""
            # A reason quotes the provider: one line of it, whatever it holds.
            lines.append(
                f"  {f['run_id']} {f['task']} case {f['case_number']}{variant}: {terminal_safe(f['reason'] or '')}"
            )
    if status["anomalies"]:
        kinds = ", ".join(f"{kind} {n}" for kind, n in status["anomaly_kinds"].items())
        lines.append(
            f"\nIngest anomalies recorded: {status['anomalies']} ({kinds}): result lines never applied; "
            "`doctor` lists them"
        )
    if status["token_budgets"]:
        lines.append(f"\n  {'model (batch files)':<32}{'budget':>12}{'queued tok':>13}{'submitted tok':>15}")
        for model, b in sorted(status["token_budgets"].items()):
            budget = f"{b['budget']:,}" + (" *" if b["budget_source"] == "learned" else "") if b["budget"] else "none"
            lines.append(f"  {model[:31]:<32}{budget:>12}{b['queued_tokens']:>13,}{b['submitted_tokens']:>15,}")
        if any(b["budget_source"] == "learned" for b in status["token_budgets"].values()):
            lines.append("  * lowered after the provider refused a batch for its enqueued-token quota")
    if status["retries"]:
        total = sum(r["threads"] for r in status["retries"])
        lines.append(f"\nRetried: {total} thread(s) in {len(status['retries'])} retry command(s):")
        for r in status["retries"]:
            shown = ", ".join(f"{k} {' '.join(v)}" for k, v in r["selection"].items()) or "every failed thread"
            lines.append(f"  {r['threads']} thread(s) after wave {r['after_wave']}: {shown}")
    aside = status["batches_aside"]
    if aside or status["lost_batches"]:
        parts = (
            [f"{status['lost_batches']} lost by the provider (their requests sent again)"]
            if status["lost_batches"]
            else []
        )
        if aside.get("duplicate"):
            parts.append(f"{aside['duplicate']} duplicate(s) cancelled, never applied")
        if aside.get("token_limit"):
            parts.append(f"{aside['token_limit']} refused for the enqueued-token quota (created again)")
        lines.append("\nBatches: " + "; ".join(parts))
    return "\n".join(lines)
