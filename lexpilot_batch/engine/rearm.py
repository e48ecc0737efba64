"""`lexpilot-batch retry`: failed threads become due again, with fresh attempts, in the same run.

A thread fails when one of its steps used up an attempt budget (`due.exhausted`): a provider
outage, a judge that misbehaved for a day. The original benchmark reruns a stage and the case is
tried again; here the thread becomes active again under the same run id and manifest, and its
attempts count anew from the next wave (`threads.fresh_after`: attempts made in the waves closed
so far no longer count). Its earlier attempts stay in the database, and each retry is recorded
(`retries`) for `status` to show. Nothing answered is asked again: a retried thread resumes from
the answers it has.

Only closed waves hold a failed thread's attempts (threads fail when a wave is compiled, which
happens once the previous one is closed), so `after_wave` is the last closed wave.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from lexpilot_batch.benchmark.protocols import STAGES
from lexpilot_batch.benchmark.tasks import in_order
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.state.queries import check_run_filters
from lexpilot_batch.state.states import ThreadState, ThreadStatus
from lexpilot_batch.state.threads import rearm_threads, record_retry
from lexpilot_batch.state.workspace import Workspace


@dataclass(frozen=True)
class RetrySelection:
    """Which failed threads to retry; an empty filter takes every value."""

    run_ids: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()  # task or stage names: `lca`, `ljp-direct`, `ljp`...
    cases: tuple[str, ...] = ()  # case numbers as the dataset writes them
    cancelled: bool = False  # the threads `cancel` stopped, instead of the failed ones

    def to_json(self) -> dict[str, list[str] | bool]:
        chosen: dict[str, list[str] | bool] = {
            k: list(v)
            for k, v in (
                ("run_ids", self.run_ids),
                ("models", self.models),
                ("tasks", self.tasks),
                ("cases", self.cases),
            )
            if v
        }
        if self.cancelled:
            chosen["cancelled"] = True
        return chosen


@dataclass
class RetryResult:
    threads: int = 0
    by_task: dict[str, int] = field(default_factory=dict)
    after_wave: int = 0
    failed_left: int = 0  # failed (or, `cancelled`, cancelled) threads the selection left alone
    cancelled_left: int = 0  # cancelled threads a retry of failed ones leaves alone


def expand_tasks(names: tuple[str, ...]) -> set[str]:
    """Task names from `--task` values: a task (`ljp_direct`) or a stage (`ljp-direct`, `ljp`, `all`)."""
    tasks: set[str] = set()
    for name in names:
        stage = name.replace("_", "-")
        if stage not in STAGES:
            raise ConfigError(f"--task must be one of {', '.join(STAGES)}, not {name!r}")
        tasks.update(STAGES[stage])
    return tasks


def retry_failed(ws: Workspace, selection: RetrySelection) -> RetryResult:
    """Make the selected failed (or, `selection.cancelled`, cancelled) threads active again with
    fresh attempts, in one transaction."""
    tasks = expand_tasks(selection.tasks)
    result = RetryResult()
    wanted: ThreadStatus = ThreadState.CANCELLED if selection.cancelled else ThreadState.FAILED
    with ws.store.transaction() as db:
        check_run_filters(db, selection.run_ids, selection.models)
        rows = db.execute(
            "SELECT t.pk, t.task, runs.run_id, runs.model, c.case_number FROM threads t"
            " JOIN runs ON runs.pk = t.run_pk JOIN cases c ON c.dataset = runs.dataset AND c.idx = t.case_idx"
            " WHERE t.status = ? ORDER BY t.pk",
            (wanted,),
        ).fetchall()
        if not selection.cancelled:
            result.cancelled_left = db.execute(
                f"SELECT COUNT(*) FROM threads WHERE status = '{ThreadState.CANCELLED}'"
            ).fetchone()[0]
        if selection.cases:
            numbers = {r[0] for r in db.execute("SELECT DISTINCT case_number FROM cases")}
            unknown = sorted(set(selection.cases) - numbers)
            if unknown:
                raise ConfigError(f"--case {', '.join(unknown)}: no case with that number in this workspace")
        chosen = [
            r
            for r in rows
            if (not selection.run_ids or r["run_id"] in selection.run_ids)
            and (not selection.models or r["model"] in selection.models)
            and (not tasks or r["task"] in tasks)
            and (not selection.cases or r["case_number"] in selection.cases)
        ]
        result.failed_left = len(rows) - len(chosen)
        if not chosen:
            return result
        after = db.execute("SELECT COALESCE(MAX(n), 0) FROM waves WHERE closed_at IS NOT NULL").fetchone()[0]
        rearm_threads(db, [r["pk"] for r in chosen], after, wanted)
        record_retry(db, selection.to_json(), len(chosen), after)
    counts = Counter(r["task"] for r in chosen)
    result.threads = len(chosen)
    result.by_task = {t: counts[t] for t in in_order(counts)}
    result.after_wave = after
    return result


def retry_history(ws: Workspace) -> list[dict]:
    """Every `retry` so far, oldest first, for `status`."""
    return [
        {"at": r["at"], "selection": json.loads(r["selection"]), "threads": r["threads"], "after_wave": r["after_wave"]}
        for r in ws.store.conn.execute("SELECT * FROM retries ORDER BY pk")
    ]
