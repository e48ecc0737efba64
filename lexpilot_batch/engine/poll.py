"""Polling the batches in flight: their results saved, checked and ingested; sync files run.

The due sync and flex files of a poll are sent together once the batches are polled, on one event
loop (`providers.sync.at_once`): the files of different models in parallel, each model within its
window and `--concurrency`. Each is then recorded and ingested in its own transaction, as a batch
is; one stopped by an error (a rejected key, an endpoint that is down) stays in flight and its error
is raised once the others are ingested.

A terminal batch's result files are saved under `responses/` before anything is applied, checked
against what the provider reported, fetched again or held when damaged (`downloads`), and ingested
in one transaction (`ingest`). A batch the
provider answers 404 for, `waves.LOST_AFTER` polls in a row, and that its listing does not show,
is lost (`waves.mark_lost`): its requests go back to due without using up `--retries`. A batch
refused for the enqueued-token quota lowers the model's budget and its file waits to be created
again (`waves.refused`); no request fails. A batch older than `--max-wave-age` is cancelled.

A file on the flex tier that the provider keeps refusing for want of capacity (`sync.runner.FlexRefused`)
falls back to batches: in one transaction it is recorded as a cancelled batch whose output holds
the lines answered so far, and its model is named in the workspace's `flex_refused`, so that no
later wave sends it flex (`engine.tail`). Ingest then keeps those answers and fails the rest as
never run, without using up an attempt, and the next wave asks them again as a batch. A crash
before that transaction leaves the file in flight: the next poll resumes it, sending only what has
no saved line, so no request is sent twice.
Once a batch's result files are saved and ingested, the files of it the workspace knows (its input
file, which the workspace uploaded, and the output and error files it saved) are deleted at the
provider where the profile says so (`Limits.delete_files`: Azure, whose resource holds at most 500
files without an expiration), unless `--keep-provider-files`. Never any other file, nor, in a copy
of the workspace, those of a batch sent before the copy was made, which the other copy may still
download (`state.instances`). A delete that fails is left to the file's expiration
(`expires_after`): nothing depends on it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lexpilot_batch.engine import budgets, off_peak
from lexpilot_batch.engine.downloads import checked, collect
from lexpilot_batch.engine.ingest import IngestStats, ingest_file
from lexpilot_batch.engine.submit import TamperedFile
from lexpilot_batch.engine.sweep import sweep
from lexpilot_batch.engine.tail import FLEX_REFUSED, flex_refused
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.backends import MANUAL, RUN_HERE, SYNC
from lexpilot_batch.providers.batch import BatchBackend, BatchInfo, BatchNotFound, BatchStatus
from lexpilot_batch.providers.sync.at_once import SyncJob, run_files
from lexpilot_batch.providers.sync.runner import FlexRefused, saved_custom_ids
from lexpilot_batch.state.store import write_meta
from lexpilot_batch.state.waves import (
    DOWNLOADED,
    IN_FLIGHT,
    LOST_AFTER,
    SUBMITTED,
    TOKEN_LIMIT,
    FileRow,
    close_finished_waves,
    file_row,
    files_in,
    lost_reason,
    mark_downloaded,
    mark_lost,
    refused,
    set_file,
    update_file,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock
from lexpilot_batch.util.fileio import file_sha256
from lexpilot_batch.util.progress import Bar

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session

# A refused file is created again at most this many times; then its requests fail as never run
# and go to the next wave (cut to the lowered budget), where `due.UNEXECUTED_ATTEMPTS` bounds them.
MAX_QUOTA_REFUSALS = 5


@dataclass
class PollResult:
    in_flight: int = 0
    manual: list[str] = field(default_factory=list)  # waiting for `lexpilot-batch ingest`
    cancelled: list[str] = field(
        default_factory=list
    )  # asked to cancel: older than --max-wave-age or the --hedge deadline
    finished: list[str] = field(default_factory=list)
    stats: IngestStats = field(default_factory=IngestStats)
    batches: list[dict] = field(default_factory=list)  # for progress displays
    duplicates: list[str] = field(default_factory=list)  # batch ids cancelled: not their file's own
    refused: list[str] = field(default_factory=list)  # files whose batch the quota refused: waiting again
    held: list[str] = field(default_factory=list)  # files whose results stayed damaged (`downloads`): held
    lost: list[str] = field(default_factory=list)  # files whose batch the provider lost
    # Files `--off-peak` holds (`engine.off_peak`): path -> when their window opens (epoch seconds).
    off_peak: dict[str, float] = field(default_factory=dict)
    deleted: int = 0  # files deleted at the provider after their results were ingested


def poll_files(ws: Workspace, session: Session, max_age: float | None = None) -> PollResult:
    """Retrieve every in-flight batch; save and ingest the terminal ones; run sync files.

    A batch in flight for longer than `max_age` seconds is cancelled. First the workspace's tagged
    batches are listed: live duplicates are cancelled (`sweep`), and the listing tells a batch the
    provider lost from one it failed to answer for.
    """
    result = PollResult()
    rows = files_in(ws.store.conn, IN_FLIGHT)
    due: list[FileRow] = []  # sync and flex files to send now
    listed = sweep(ws, session, rows, result.duplicates)
    for row in rows:
        if row["status"] == SUBMITTED and row["backend"] == MANUAL:
            result.in_flight += 1
            result.manual.append(row["path"])
            continue
        stats: IngestStats | None
        if row["status"] == SUBMITTED and row["backend"] in RUN_HERE:
            until = off_peak.held_until(off_peak.schedule_of(session.tail, row), clock.now())
            if until is None:
                due.append(row)  # sent below, with the pass's other sync and flex files
            else:  # at peak: not begun (`off_peak`)
                result.in_flight += 1
                result.off_peak[row["path"]] = until
            continue
        if row["status"] == DOWNLOADED and checked(row):
            # Saved by an earlier round or command: checked before it is believed. One held is
            # fetched again, once a command (`downloads`).
            stats = None
            if not (row["held"] and row["pk"] in session.refetched):
                stats = _collect_saved(ws, session, row)
            if stats is None:
                result.in_flight += 1
                result.held.append(row["path"])
                continue
        elif row["status"] == SUBMITTED:
            backend: BatchBackend = session.batch_backend(row)
            batch_id = row["batch_id"]
            assert batch_id is not None  # recorded with `submitted` (`waves.mark_submitted`)
            try:
                info = backend.retrieve(batch_id)
            except BatchNotFound as exc:
                if _not_found(ws, row, listed.get(id(backend)), str(exc)):
                    result.lost.append(row["path"])
                else:
                    result.in_flight += 1
                continue
            result.batches.append(
                {
                    "wave": row["wave"],
                    "path": row["path"],
                    "status": info.status,
                    "counts": info.request_counts,
                    "requests": row["n_requests"],
                    "elapsed": clock.now() - (row["submitted_at"] or clock.now()),
                }
            )
            age = clock.now() - (row["submitted_at"] or clock.now())
            if not info.terminal and max_age is not None and age > max_age and info.status != BatchStatus.CANCELLING:
                # Too old: cancel it. Its finished requests are kept when it lands as `cancelled`;
                # the rest go back to due and are retried in the next wave. One that ended in the
                # meantime (its cancel refused) is taken as it ended, below, and was not cancelled.
                # Recorded first: a batch that ends cancelled unasked was cancelled by someone else.
                set_file(ws, row["pk"], cancel_asked=clock.now())
                info = backend.cancel_live(batch_id)
                if info.status in (BatchStatus.CANCELLING, BatchStatus.CANCELLED):
                    result.cancelled.append(row["path"])
            if not info.terminal:
                set_file(
                    ws, row["pk"], batch_status=info.status, request_counts=json.dumps(info.request_counts), not_found=0
                )
                result.in_flight += 1
                continue
            if info.token_limit is not None and _quota_refusal(ws, row, info):
                result.refused.append(row["path"])
                result.in_flight += 1
                continue
            stats = collect(ws, session, backend, row, info)
            if stats is None:
                result.in_flight += 1
                result.held.append(row["path"])
                continue
        else:
            stats = ingest_file(ws, row)
        _finished(ws, session, row, stats, result)
    errors = _run_sync(ws, session, due, result)
    close_finished_waves(ws)
    if errors:
        raise errors[0]  # the other files' answers are ingested: running again sends the rest
    return result


def _finished(ws: Workspace, session: Session, row: FileRow, stats: IngestStats, result: PollResult) -> None:
    result.stats.add(stats)
    result.finished.append(row["path"])
    row = file_row(ws.store.conn, row["pk"])  # as ingested: its result files' ids
    if row["backend"] not in (SYNC, MANUAL):
        result.deleted += _delete_provider_files(ws, session, row)


def _delete_provider_files(ws: Workspace, session: Session, row: FileRow) -> int:
    """Delete at the provider the files of an ingested batch file (module docstring); how many."""
    if session.options.keep_provider_files or not session.file_route(row).limits.delete_files:
        return 0
    if row["instance"] not in (None, ws.instance_id):
        return 0  # sent before this folder was copied: the other copy may still need them (`state.instances`)
    backend: BatchBackend = session.batch_backend(row)
    deleted = 0
    for file_id in (row.get("provider_file_id"), row.get("output_file_id"), row.get("error_file_id")):
        if not file_id:
            continue
        try:
            deleted += backend.delete_file(file_id)
        except LexpilotError:
            continue  # it expires by itself (`expires_after`); the run needs nothing of it
    return deleted


def _not_found(ws: Workspace, row: FileRow, listed: set[str] | None, message: str) -> bool:
    """Count a 404 for the file's batch; after `LOST_AFTER` in a row, and when the provider's own
    listing of our batches works and does not show it, the batch is lost. Returns whether it is."""
    count = (row["not_found"] or 0) + 1
    batch_id = row["batch_id"]
    assert batch_id is not None  # a submitted file's
    with ws.store.transaction() as db:
        update_file(db, row["pk"], not_found=count)
        if count >= LOST_AFTER and listed is not None and batch_id not in listed:
            mark_lost(db, row["pk"], lost_reason(batch_id, f"HTTP 404 {count} times in a row"))
            return True
    return False


def _quota_refusal(ws: Workspace, row: FileRow, info: BatchInfo) -> bool:
    """A batch refused for the enqueued-token quota: lower the model's budget and let the file wait
    to be created again. False once it was refused `MAX_QUOTA_REFUSALS` times: then it is ingested
    as failed, and its requests go to the next wave."""
    error = info.token_limit or {}
    with ws.store.transaction() as db:
        times = db.execute(
            "SELECT COUNT(*) FROM other_batches WHERE file_pk = ? AND why = ?", (row["pk"], TOKEN_LIMIT)
        ).fetchone()[0]
        if times >= MAX_QUOTA_REFUSALS:
            return False
        model = row["model"]
        others = budgets.enqueued(db, model, but=row["pk"])
        budgets.lower_after_refusal(
            db, model, str(error.get("message") or ""), others, row["tokens"], budgets.factor(db, model)
        )
        refused(db, row["pk"], info.id, info.status)
    return True


def _run_sync(ws: Workspace, session: Session, rows: list[FileRow], result: PollResult) -> list[LexpilotError]:
    """Execute the due sync and flex files of a pass at once through their APIs' synchronous calls
    (`providers.sync.at_once.run_files`: one event loop, the files of different models in parallel,
    those of one model sharing its window); each output file grows as answers arrive. Then each file
    is taken in its own transaction: recorded and ingested, or fallen back to batches
    (`FlexRefused`), or left in flight when `--off-peak` stopped it before the end (the next run
    sends the rest) or an error stopped it, which is returned and stops no other file."""
    if not rows:
        return []
    jobs: list[SyncJob] = []
    with ExitStack() as bars:
        for row in rows:
            path = ws.path(row["path"])
            # `submit` only marked the file: it is read now, so this is the last moment to check that it
            # still holds what was compiled (an edit made since would otherwise be sent and scored).
            if file_sha256(path) != row["sha256"]:
                raise TamperedFile(
                    f"request file {row['path']} changed on disk or vanished after it was compiled, so it is not "
                    f"sent. Run `{ws.command('doctor --repair')}` to discard it (its requests are asked again), "
                    "or restore it"
                )
            out = ws.wave_dir("responses", row["wave"]) / f"{Path(row['path']).stem}.output.jsonl"
            # disable=None: a bar on a terminal, silence in logs and pipes.
            bar = bars.enter_context(Bar(total=row["n_requests"], desc=f"sync {path.name}", unit="req", disable=None))
            may_start = off_peak.may_start(off_peak.schedule_of(session.tail, row))
            jobs.append(SyncJob(session.sync_runner(row), path, out, _progress(bar), may_start))
        outcomes = run_files(jobs)
    errors: list[LexpilotError] = []
    for row, job, outcome in zip(rows, jobs, outcomes, strict=True):
        if isinstance(outcome, FlexRefused):
            _fall_back(ws, row, job.output_path, str(outcome))
            session.flex_refused_now(row["model"])
        elif isinstance(outcome, LexpilotError):
            errors.append(outcome)
            result.in_flight += 1
            continue
        elif outcome.stopped and outcome.already_done + outcome.ok + outcome.failed < outcome.total:
            # Begun off-peak and stopped as the window closed (`off_peak`).
            result.in_flight += 1
            schedule = off_peak.schedule_of(session.tail, row)
            result.off_peak[row["path"]] = off_peak.held_until(schedule, clock.now()) or clock.now()
            continue
        else:
            counts = {"total": outcome.total, "completed": outcome.ok, "failed": outcome.failed}
            with ws.store.transaction() as db:
                redacted = row["redacted"] + outcome.redacted
                output = ws.relative(job.output_path)
                ended = outcome.ended_at  # its own end, not the pass's: its rate (`measured_call_rates`)
                mark_downloaded(
                    db, row["pk"], BatchStatus.COMPLETED, counts, output, redacted=redacted, finished_at=ended
                )
        row = file_row(ws.store.conn, row["pk"])
        _finished(ws, session, row, ingest_file(ws, row), result)
    return errors


def _progress(bar: Bar) -> Callable[[int, int], None]:
    def progress(saved: int, total: int) -> None:
        bar.total = total
        bar.update(saved - bar.n)

    return progress


def _fall_back(ws: Workspace, row: FileRow, out: Path, why: str) -> None:
    """A flex file refused for good: its saved lines are its output, its other requests never ran
    (a cancelled batch's), and its model travels by batch from now on (the module docstring)."""
    saved = len(saved_custom_ids(out))
    counts = {"total": row["n_requests"], "completed": saved, "failed": 0}
    with ws.store.transaction() as db:
        refused = set(flex_refused(db)) | {row["model"]}
        write_meta(db, FLEX_REFUSED, json.dumps(sorted(refused)))
        mark_downloaded(
            db,
            row["pk"],
            BatchStatus.CANCELLED,
            counts,
            ws.relative(out),
            batch_errors=json.dumps([{"code": "flex_unavailable", "message": why}], ensure_ascii=False),
        )


def _collect_saved(ws: Workspace, session: Session, row: FileRow) -> IngestStats | None:
    """A batch's results saved by an earlier command: checked and ingested, or fetched again when
    damaged (`downloads.collect`); one held is fetched again at once, its batch retrieved first.
    None while it is held."""
    backend: BatchBackend = session.batch_backend(row)
    info = None
    if row["held"]:
        assert row["batch_id"] is not None  # a batch file's
        try:
            info = backend.retrieve(row["batch_id"])
        except BatchNotFound:
            session.refetched.add(row["pk"])
            return None  # still held: `doctor` says what it can do
    return collect(ws, session, backend, row, info)
