"""`lexpilot-batch cancel`: stop a study, or part of it, after it was submitted.

The selected active threads become `cancelled` in one transaction (recorded for `status`): no
compile asks anything more for them, and nothing they have is lost. Then each open request file
is looked at, from the database alone, so that a cancel interrupted at any instant and run again
ends the same:

- a file nothing of which has left the workspace, none of whose requests an active thread still
  needs, is forgotten with its requests (set aside as `NAME.cancelled`); when that is the whole of
  a wave nothing of which was sent, the wave is compiled again for the threads still active;
- a batch in flight none of whose pending requests an active thread needs is cancelled at its
  provider (`BatchBackend.cancel_live`: one that ended meanwhile is taken as it ended). It lands
  `cancelled` with the answers it had finished (OpenAI, Anthropic, Gemini, Mistral, Together all
  return them), which the next poll saves and ingests as for any batch; the rest fail as never
  run (`unexecuted`), which uses up no `--retries`;
- a batch that also carries requests of threads still active (a judge file shared by the models
  of a study, when only one is cancelled) is left to finish: its answers are kept;
- a file being created (`creating`) may hold a batch the database does not know yet: the next
  poll finds it, and the same `cancel` run again cancels it.

`retry --cancelled` makes cancelled threads active again; each resumes from the answers it has.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from lexpilot_batch.benchmark.protocols import PROTOCOLS
from lexpilot_batch.benchmark.tasks import in_order
from lexpilot_batch.engine.compiler import compile_wave
from lexpilot_batch.engine.rearm import expand_tasks
from lexpilot_batch.engine.session import Session
from lexpilot_batch.providers.backends import MANUAL, RUN_HERE
from lexpilot_batch.providers.batch import BatchStatus
from lexpilot_batch.state.queries import check_run_filters
from lexpilot_batch.state.states import RequestState, ThreadState
from lexpilot_batch.state.threads import cancel_threads, record_cancel
from lexpilot_batch.state.waves import (
    CREATING,
    OPEN,
    SUBMITTED,
    discard_unsent_file,
    discard_unsent_wave,
    drop_empty_wave,
    files_in,
    set_file,
    target_wave,
    unsent,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import fileio

REASON = "cancelled by `lexpilot-batch cancel`"


@dataclass(frozen=True)
class CancelSelection:
    """Which active threads to cancel; an empty filter takes every value."""

    run_ids: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()  # task or stage names, as `retry --task` reads them

    def to_json(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in (("run_ids", self.run_ids), ("models", self.models), ("tasks", self.tasks)) if v}


@dataclass
class CancelResult:
    threads: int = 0  # threads this cancel stopped
    by_task: dict[str, int] = field(default_factory=dict)
    already: int = 0  # threads of the selection an earlier cancel stopped
    kept: int = 0  # answers the cancelled threads have, kept
    cancelled: list[str] = field(default_factory=list)  # batch files cancelled at their provider
    ended: list[str] = field(default_factory=list)  # their batch had ended before the cancel reached it
    discarded: list[str] = field(default_factory=list)  # unsent files forgotten
    unsent_requests: int = 0  # requests of those files: never sent
    shared: list[str] = field(default_factory=list)  # batches also carrying active threads' requests
    creating: list[str] = field(default_factory=list)  # being created: run cancel again after a poll
    manual: list[str] = field(default_factory=list)  # files the user runs: theirs to stop
    recompiled: int = 0  # requests of a wave compiled again for the threads still active


def cancel_study(ws: Workspace, session: Session, selection: CancelSelection) -> CancelResult:
    """Cancel the selected active threads, then the open files and batches only they need."""
    tasks = expand_tasks(selection.tasks)
    result = CancelResult()
    with ws.store.transaction() as db:
        check_run_filters(db, selection.run_ids, selection.models)
        rows = db.execute(
            "SELECT t.pk, t.task, t.status, runs.run_id, runs.model FROM threads t JOIN runs ON runs.pk = t.run_pk"
            " WHERE t.status IN (?, ?) ORDER BY t.pk",
            (ThreadState.ACTIVE, ThreadState.CANCELLED),
        ).fetchall()
        chosen = [
            r
            for r in rows
            if (not selection.run_ids or r["run_id"] in selection.run_ids)
            and (not selection.models or r["model"] in selection.models)
            and (not tasks or r["task"] in tasks)
        ]
        new = [r for r in chosen if r["status"] == ThreadState.ACTIVE]
        result.already = len(chosen) - len(new)
        if new:
            cancel_threads(db, [r["pk"] for r in new], REASON)
            record_cancel(db, selection.to_json(), len(new))
    counts = Counter(r["task"] for r in new)
    result.threads = len(new)
    result.by_task = {t: counts[t] for t in in_order(counts)}
    _files(ws, session, result)
    result.kept = _answers_of_cancelled(ws)
    return result


def _needed(ws: Workspace) -> dict[tuple[int, int], set[str]]:
    """The step prefixes each (run, case) with an active thread still reads (`Protocol.reads`)."""
    needed: dict[tuple[int, int], set[str]] = defaultdict(set)
    for run_pk, case_idx, task, variant in ws.store.conn.execute(
        f"SELECT run_pk, case_idx, task, variant FROM threads WHERE status = '{ThreadState.ACTIVE}'"
    ):
        needed[(run_pk, case_idx)].update(PROTOCOLS[task].reads(variant))
    return needed


def _still_needed(ws: Workspace, file_pk: int, needed: dict[tuple[int, int], set[str]]) -> bool:
    """Whether an active thread reads any pending request of the file."""
    for run_pk, case_idx, step in ws.store.conn.execute(
        f"SELECT run_pk, case_idx, step FROM requests WHERE file_pk = ? AND status = '{RequestState.PENDING}'",
        (file_pk,),
    ):
        if any(step.startswith(prefix) for prefix in needed.get((run_pk, case_idx), ())):
            return True
    return False


def _files(ws: Workspace, session: Session, result: CancelResult) -> None:
    needed = _needed(ws)
    rows = files_in(ws.store.conn, OPEN)
    unsent_rows = [r for r in rows if unsent(r) and r["backend"] != MANUAL]
    # A wave nothing of which was sent is forgotten whole and compiled again for the active threads.
    wave, exists = target_wave(ws.store.conn)
    if exists and wave is not None and any(not _still_needed(ws, r["pk"], needed) for r in unsent_rows):
        with ws.store.transaction() as db:
            n = db.execute("SELECT COUNT(*) FROM requests WHERE wave = ?", (wave,)).fetchone()[0]
            paths = discard_unsent_wave(db, wave)
        for rel in paths:
            _set_aside(ws, rel)
        compiled = compile_wave(ws, session.route, session.options.retries, session.tail_policy())
        result.recompiled = compiled.requests
        result.unsent_requests += n - compiled.requests
        result.discarded.extend(p for p in paths if p not in compiled.files)
        return
    for row in rows:
        if row["backend"] == MANUAL and row["status"] == SUBMITTED:
            result.manual.append(row["path"])
            continue
        if _still_needed(ws, row["pk"], needed):
            if row["status"] == SUBMITTED and row["backend"] not in RUN_HERE:
                result.shared.append(row["path"])
            continue
        if unsent(row):
            with ws.store.transaction() as db:
                discard_unsent_file(db, row["pk"])
                if not db.execute("SELECT 1 FROM files WHERE wave = ? LIMIT 1", (row["wave"],)).fetchone():
                    drop_empty_wave(db, row["wave"])
            _set_aside(ws, row["path"])
            if row["output_path"]:  # a sync file run in part: those answers go with it, unapplied
                _set_aside(ws, row["output_path"])
            result.discarded.append(row["path"])
            result.unsent_requests += row["n_requests"]
        elif row["status"] == CREATING:
            result.creating.append(row["path"])
        elif row["status"] == SUBMITTED:
            batch_id = row["batch_id"]
            assert batch_id is not None  # recorded with `submitted`
            info = session.batch_backend(row).cancel_live(batch_id)
            set_file(ws, row["pk"], batch_status=info.status, request_counts=json.dumps(info.request_counts))
            if info.status in (BatchStatus.CANCELLING, BatchStatus.CANCELLED):
                result.cancelled.append(row["path"])
            else:
                result.ended.append(row["path"])


def _set_aside(ws: Workspace, rel: str) -> None:
    """Keep a file the workspace no longer uses beside it (`NAME.cancelled`), out of every glob."""
    path = ws.path(rel)
    if path.exists():
        fileio.replace(path, path.with_name(f"{path.name}.cancelled"))


def _answers_of_cancelled(ws: Workspace) -> int:
    """Answered requests of the (run, case)s that hold a cancelled thread: what a cancel keeps."""
    return ws.store.conn.execute(
        "SELECT COUNT(*) FROM requests q WHERE q.status = ? AND EXISTS (SELECT 1 FROM threads t"
        " WHERE t.run_pk = q.run_pk AND t.case_idx = q.case_idx AND t.status = ?)",
        (RequestState.ANSWERED, ThreadState.CANCELLED),
    ).fetchone()[0]
