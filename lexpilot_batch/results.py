"""Reading finished records out of the workspace database, for the report and the export.

Reads only the database: no provider, no network, so rescoring works offline on any finished
workspace, and as often as you like.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any

from lexpilot_batch import records
from lexpilot_batch.compiler import stored_case
from lexpilot_batch.data import Case
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import RunResults, TaskRecords
from lexpilot_batch.workspace import Workspace

# What makes two runs comparable (SPEC §9); informative manifest fields stay out.
_GROUP_FIELDS = ("dataset_sha256", "case_ids", "code_hash", "prompts_hash", "model", "user_model",
                 "judge_model", "settings")


def group_key(manifest: dict) -> str:
    blob = json.dumps({k: manifest.get(k) for k in _GROUP_FIELDS}, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def shown_settings(manifest: dict) -> dict[str, Any]:
    return {
        **manifest["settings"],
        "dataset_sha256": manifest["dataset_sha256"][:12],
        "cases": len(manifest["case_ids"]),
        "code_hash": manifest["code_hash"][:12],
        "prompts_hash": manifest["prompts_hash"][:12],
        "version": manifest.get("version"),
    }


# What a record keeps that no metric reads: the histories and texts, most of its bytes.
_TEXT_FIELDS = ("$.history", "$.continued_history", "$.rounds", "$.response", "$.final_response")


def load_run_results(
    ws: Workspace, run_id: str | None = None, model: str | None = None, *, texts: bool = True
) -> list[RunResults]:
    """One `RunResults` per matching run, with every task that has threads.

    `texts=False` leaves the histories and response texts out of the records (SQLite drops
    them before Python decodes anything): what the report reads, at a fraction of the time and
    memory. The export needs them and keeps the default.
    """
    db = ws.db.db
    record = "t.record" if texts else f"json_remove(t.record, {', '.join(repr(f) for f in _TEXT_FIELDS)})"
    where, args = [], []
    if run_id is not None:
        where.append("run_id = ?")
        args.append(run_id)
    if model is not None:
        where.append("model = ?")
        args.append(model)
    sql = "SELECT pk, run_id, model, manifest FROM runs" + (f" WHERE {' AND '.join(where)}" if where else "")
    runs = db.execute(sql + " ORDER BY pk", args).fetchall()
    if not runs:
        what = " ".join(f"{k} {v!r}" for k, v in (("run", run_id), ("model", model)) if v is not None)
        raise LexpilotError(f"no run{' matching ' + what if what else 's'} in {ws.root}; check --run-id/--model/--root")
    out = []
    for run in runs:
        manifest = json.loads(run["manifest"])
        case_of = _LastCase()
        tasks: dict[str, TaskRecords] = defaultdict(TaskRecords)
        for t in db.execute(
            f"SELECT t.task, t.variant, t.status, t.case_idx, {record} AS record, c.case_number, c.cause_class"
            f"{', c.data' if texts else ''} FROM threads t"
            " JOIN runs r ON r.pk = t.run_pk JOIN cases c ON c.dataset = r.dataset AND c.idx = t.case_idx"
            " WHERE t.run_pk = ? ORDER BY t.case_idx, t.variant",
            (run["pk"],),
        ):
            entry = tasks[t["task"]]
            label = t["case_number"] + (f" ({t['variant']})" if t["variant"] else "")
            if t["status"] == "done":
                stored = json.loads(t["record"])
                if texts and records.has_references(stored):
                    stored = records.expand(stored, case_of(t["case_idx"], t["data"]))
                entry.records.append((t["cause_class"], stored))
            elif t["status"] == "failed":
                entry.failed.append(label)
            else:
                entry.missing.append(label)
        usage = {
            r["role"]: {"requests": r["n"], "prompt_tokens": r["p"] or 0, "completion_tokens": r["c"] or 0}
            for r in db.execute(
                "SELECT role, COUNT(*) AS n, SUM(prompt_tokens) AS p, SUM(completion_tokens) AS c FROM requests"
                " WHERE run_pk = ? AND status != 'pending' GROUP BY role",
                (run["pk"],),
            )
        }
        out.append(
            RunResults(
                run_id=run["run_id"],
                model=run["model"],
                user_model=manifest["user_model"],
                judge_model=manifest["judge_model"],
                group_key=group_key(manifest),
                settings=shown_settings(manifest),
                tasks=dict(tasks),
                usage=usage,
            )
        )
    return out


class _LastCase:
    """Rows come in case order: the case parsed last serves every task and variant of it."""

    def __init__(self) -> None:
        self.idx: int | None = None
        self.case: Case | None = None

    def __call__(self, idx: int, data: str) -> Case:
        if self.case is None or idx != self.idx:
            self.idx, self.case = idx, stored_case(data)
        return self.case


def incomplete(runs: list[RunResults]) -> list[str]:
    """One line per run and task that is not finished, naming (some of) its cases."""
    lines = []
    for run in runs:
        for task, entry in run.tasks.items():
            for kind, cases in (("unfinished", entry.missing), ("failed", entry.failed)):
                if cases:
                    shown = ", ".join(cases[:8]) + (f", ... ({len(cases)} in all)" if len(cases) > 8 else "")
                    lines.append(f"{run.run_id} / {run.model} / {task}: {kind}: {shown}")
    return lines
