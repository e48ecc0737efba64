"""Moving a wave's files through a provider: upload, create, poll, download (then `ingest`).

Each step is recorded before the next begins, so a command killed anywhere resumes where it
stopped: a file uploaded but not yet batched is batched; a batch created whose id was never
recorded is found again by its metadata tag and adopted instead of created twice; result files
are saved under `responses/` before they are ingested, and an ingested batch is never ingested
again.

What a week against real providers needs, the same for every backend that can create (the
backend only makes single calls, `providers.base`):

- **Never bill twice.** A create whose answer was lost (timeout, dropped connection, 5xx) may have
  created the batch, or may create it a moment later: its tag is looked up with backoff for a
  grace period (`ProviderOptions.create_grace`, counted from when the create was sent, also after
  a crash) before the file is created again. On every poll the workspace's tagged batches are
  listed (`sweep`), and a live batch that is not its file's recorded batch is cancelled and kept
  aside (`other_batches`); its results are never downloaded, so never applied.
- **Without a tag** (Anthropic's Message Batches carry no metadata), a lost create is looked for
  the same way, by what the listing does show (`_untagged`): a batch created since the create was
  sent (less `CLOCK_SKEW`), holding as many requests as the file, whose id the workspace does not
  know. One such batch is adopted. Several (another client of the account created batches of the
  same size meanwhile) are told apart once they end, by their results: the request ids carry the
  workspace's tag (`request_lines.line_id`); until then the file is neither created again nor
  adopted. A batch adopted wrongly (a stranger's, ours never created) shows at ingest: its lines
  are anomalies, nothing of it is applied, and the file's requests are asked again. The sweep
  cannot tell an untagged duplicate while it runs, so it cancels none: a create that commits
  later than the grace period is the one case left, which a longer `--create-grace` covers.
- **Never get stuck.** A batch the provider answers 404 for, `waves.LOST_AFTER` polls in a row,
  and that its listing does not show, is lost (`waves.mark_lost`): its requests go back to due
  without using up `--retries`.
- **Stay under quotas.** A file is created only while its model's enqueued-token budget has room
  (`budgets`); the rest of a wave goes as earlier batches finish. A batch refused for the quota
  lowers the budget and its file waits to be created again (`waves.refused`); no request fails.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from lexpilot_batch.engine import budgets
from lexpilot_batch.engine.ingest import IngestStats, ingest_file
from lexpilot_batch.engine.result_lines import read_lines
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.base import (
    BatchBackend,
    BatchInfo,
    BatchNotFound,
    BatchSource,
    CreateUncertain,
    RateLimited,
    tagged_by,
)
from lexpilot_batch.providers.ids import id_tag
from lexpilot_batch.providers.shapes import file_api, normaliser
from lexpilot_batch.state.waves import (
    COMPILED,
    CREATING,
    DOWNLOADED,
    IN_FLIGHT,
    LOST,
    LOST_AFTER,
    SUBMITTED,
    TO_SUBMIT,
    UPLOADED,
    close_finished_waves,
    discard_unsent_file,
    file_at,
    file_row,
    files_in,
    mark_lost,
    refused,
    set_file,
    update_file,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util.fileio import file_sha256

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session

CREATE_ATTEMPTS = 6  # create calls for one file in one command, rate-limit refusals included
# A refused file is created again at most this many times; then its requests fail as never run
# and go to the next wave (cut to the lowered budget), where `threads.UNEXECUTED_ATTEMPTS` bounds them.
MAX_QUOTA_REFUSALS = 5
SWEEP_MARGIN = 3600.0  # seconds before the oldest batch in flight that the listing goes back to
# Seconds a provider's clock may run behind ours: an untagged batch created that long before its
# create was sent may still be the one it created.
CLOCK_SKEW = 120.0


def pause(seconds: float) -> None:
    """Wait between tries (a module function, so that tests can make waits zero)."""
    if seconds > 0:
        time.sleep(seconds)


def batch_tag(ws: Workspace, row: dict) -> dict[str, str]:
    """Metadata naming the workspace file and which of its creates this is: how a batch is found
    again after a crash, and how a duplicate is told from its file's own batch."""
    tag = {
        "lexpilot_workspace": ws.workspace_id,
        "lexpilot_file": row["path"],
        "lexpilot_sha256": row["sha256"][:32],
    }
    if row.get("creates"):  # absent from batches of files created before this was counted
        tag["lexpilot_create"] = str(row["creates"])
    return tag


class TamperedFile(LexpilotError):
    """A compiled request file changed or vanished on disk before it was sent."""


class UnresolvedCreate(LexpilotError):
    """Several untagged batches could be the one a lost create made: none is adopted or created yet."""


@dataclass
class SubmitResult:
    submitted: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)  # left for the user to run elsewhere
    waiting: list[str] = field(default_factory=list)  # waiting for room under the enqueued-token budget
    discarded: list[str] = field(default_factory=list)  # larger than the lowered budget: asked again
    unresolved: list[str] = field(default_factory=list)  # a lost create's batch not yet told apart (why)


def submit_files(ws: Workspace, session: Session, on_file: Callable[[str], None] | None = None) -> SubmitResult:
    """Send every compiled file of the workspace on its backend, recording each step; a batch file
    whose model has no room under its enqueued-token budget waits."""
    result = SubmitResult()
    rows = files_in(ws.store.conn, TO_SUBMIT)
    full: set[str] = set()  # models with no room left: their later files wait too, in order
    restored = _Earlier(ws)
    for row in rows:
        if row["backend"] in ("sync", "manual"):
            # Nothing to upload: a sync file is executed when polled, a manual one by the user.
            set_file(
                ws,
                row["pk"],
                status=SUBMITTED,
                batch_id=row["backend"],
                batch_status="in_progress",
                submitted_at=time.time(),
            )
            (result.manual if row["backend"] == "manual" else result.submitted).append(row["path"])
            if on_file:
                on_file(row["path"])
            continue
        backend: BatchBackend = session.batch_backend(row)
        if row["status"] != CREATING:
            room = _room(ws, session, row, full)
            if room is None:
                result.discarded.append(row["path"])
                continue
            if not room:
                result.waiting.append(row["path"])
                continue
        if row["status"] != CREATING:
            earlier = restored.find(backend, row)
            if earlier is not None:
                # Created before this database was restored from a backup (or its record was lost):
                # adopted, never created twice.
                _adopt(ws, row, earlier)
                result.adopted.append(row["path"])
                result.submitted.append(row["path"])
                if on_file:
                    on_file(row["path"])
                continue
        path = ws.path(row["path"])
        if row["status"] == COMPILED:
            file_id = backend.upload(path)
            set_file(ws, row["pk"], status=UPLOADED, provider_file_id=file_id)
            row.update(status=UPLOADED, provider_file_id=file_id)
        batch: BatchInfo | None = None
        try:
            if row["status"] == CREATING:
                # We may have created it and died before recording its id: find it, never duplicate it.
                # A provider may commit a create a moment after answering: look for the grace period.
                sent = row["creating_at"]
                until = sent + session.options.create_grace if sent is not None else time.time()
                batch = _await_batch(_Lookup(ws, backend, row, batch_tag(ws, row)), until, sent)
                if batch is not None:
                    result.adopted.append(row["path"])
            if batch is None:
                row["creates"] = (row["creates"] or 0) + 1
                look = _Lookup(ws, backend, row, batch_tag(ws, row))
                row["creating_at"] = time.time()
                set_file(ws, row["pk"], status=CREATING, creates=row["creates"], creating_at=row["creating_at"])
                batch = _create(look, session.options.create_grace)
        except UnresolvedCreate as exc:
            result.unresolved.append(f"{row['path']}: {exc}")
            continue
        with ws.store.transaction() as db:
            record_batch(db, row["pk"], batch, time.time())
        result.submitted.append(row["path"])
        if on_file:
            on_file(row["path"])
    return result


def _room(ws: Workspace, session: Session, row: dict, full: set[str]) -> bool | None:
    """Whether the file's model has room for it under its enqueued-token budget now; None when it
    never will (larger than the whole budget, which a refusal lowered): then the file is discarded,
    and its requests are asked again in the next wave, in files cut to the budget."""
    model = row["model"]
    if model in full:
        return False
    db = ws.store.conn
    limit = budgets.budget(db, model, session.file_route(row).limits.enqueued_tokens)
    if limit is None:
        return True
    scale = budgets.factor(db, model)
    waiting = budgets.enqueued(db, model)
    if row["tokens"] * scale <= limit - waiting * scale:
        return True
    if row["tokens"] * scale > limit and not waiting:
        with ws.store.transaction() as tx:
            discard_unsent_file(tx, row["pk"])
        ws.path(row["path"]).unlink(missing_ok=True)
        return None
    full.add(model)
    return False


class _Earlier:
    """Batches created for files the database says were never sent: a workspace restored from a
    backup taken before they were created (or whose record of them was lost), whose batches run, or
    ran, at the provider.

    Before a file's first create, the workspace's tagged batches since its first run was registered
    are listed, once per backend and command; a batch tagged for this very file (its path and
    content hash) that the database does not know is adopted, as its create would have been: its
    results are paid for, and one that failed or was refused is handled as it was the first time.
    Several: the latest create. A backend whose batches carry no tag cannot be asked
    (Anthropic's Message Batches): there a restored workspace creates its files again, and what the
    earlier batches answered is paid twice, never applied twice.
    """

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._listed: dict[int, list[BatchInfo]] = {}

    def find(self, backend: BatchBackend, row: dict) -> list[BatchInfo] | None:
        """The file's earlier batches the database does not know, the one to adopt first."""
        if not backend.tags_batches:
            return None
        db = self.ws.store.conn
        if id(backend) not in self._listed:
            start = db.execute("SELECT MIN(created_at) FROM runs").fetchone()[0]
            since = start - SWEEP_MARGIN - CLOCK_SKEW if start is not None else None
            ours = {"lexpilot_workspace": self.ws.workspace_id}
            self._listed[id(backend)] = [b for b in backend.batches(since) if tagged_by(b, ours)]
        mine = {"lexpilot_file": row["path"], "lexpilot_sha256": row["sha256"][:32]}
        found = [b for b in self._listed[id(backend)] if tagged_by(b, mine)]
        if not found:
            return None
        known = known_batches(db)
        found = [b for b in found if b.id not in known]
        # The latest create; a failed batch (refused for the quota, say) is what the file's next
        # create would have followed, and is adopted only when nothing followed it.
        found.sort(key=lambda b: (_create_number(b), b.status != "failed", b.created_at or 0.0), reverse=True)
        return found or None


def known_batches(db: sqlite3.Connection) -> set[str]:
    """Every batch id the workspace knows: its files' own, and those kept aside."""
    query = "SELECT batch_id FROM files WHERE batch_id IS NOT NULL UNION SELECT batch_id FROM other_batches"
    return {r[0] for r in db.execute(query)}


def record_batch(db: sqlite3.Connection, pk: int, info: BatchInfo, at: float, **more: object) -> None:
    """The file's batch is `info`, sent at `at` (`submitted`), inside the caller's transaction."""
    update_file(
        db,
        pk,
        status=SUBMITTED,
        batch_id=info.id,
        batch_status=info.status,
        request_counts=json.dumps(info.request_counts),
        submitted_at=at,
        not_found=0,
        **more,
    )


def _create_number(info: BatchInfo) -> int:
    """Which create of its file a batch was (`batch_tag`), 0 for a batch of an earlier version."""
    try:
        return int(info.metadata.get("lexpilot_create") or 0)
    except ValueError:
        return 0


def _adopt(ws: Workspace, row: dict, earlier: list[BatchInfo]) -> None:
    """Record the first of a file's earlier batches as its own, as its create would have been; the
    ended others are kept aside as they were the first time (refused for the quota, or duplicates),
    and one still running is left to the next poll's sweep, which cancels it. The file's next
    create (after a quota refusal) takes a number after theirs."""
    info = earlier[0]
    with ws.store.transaction() as db:
        creates = max(row["creates"] or 0, *(_create_number(b) for b in earlier))
        record_batch(db, row["pk"], info, info.created_at or time.time(), creates=creates)
        for other in earlier[1:]:
            if other.terminal:
                db.execute(
                    "INSERT OR IGNORE INTO other_batches (batch_id, file_pk, path, why, status, at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        other.id,
                        row["pk"],
                        row["path"],
                        "token_limit" if other.token_limit else "duplicate",
                        other.status,
                        time.time(),
                    ),
                )


@dataclass
class _Lookup:
    """One file's create at its backend, and how its batch is found again."""

    ws: Workspace
    backend: BatchBackend
    row: dict
    tag: dict[str, str]  # `batch_tag` of this create

    def create(self) -> BatchInfo:
        source = BatchSource(self.ws.path(self.row["path"]), self.row["model"])
        return self.backend.create(self.row["provider_file_id"], self.tag, self.row.get("url"), source)

    def find(self, sent: float | None) -> BatchInfo | None:
        """The batch this file's create (sent at `sent`) made, if the provider shows it."""
        if self.backend.tags_batches:
            return self.backend.find(self.tag, sent - SWEEP_MARGIN if sent is not None else None)
        return _untagged(self, sent)


def _create(look: _Lookup, grace: float) -> BatchInfo:
    """Create the file's batch once: after an answer that may have been lost, its batch is looked
    for during the grace period before another create is sent."""
    last: LexpilotError | None = None
    for attempt in range(CREATE_ATTEMPTS):
        sent = time.time()
        try:
            return look.create()
        except RateLimited as exc:  # refused before anything was created
            last = exc
            pause(exc.retry_after if exc.retry_after is not None else min(0.5 * 2**attempt, 8.0))
        except CreateUncertain as exc:
            last = exc
            found = _await_batch(look, sent + grace, sent)
            if found is not None:
                return found
    assert last is not None
    raise last


def _await_batch(look: _Lookup, until: float, sent: float | None) -> BatchInfo | None:
    """The file's batch, looked for with backoff until `until` (at least once)."""
    wait = min(0.25, max(0.0, until - time.time()) / 8)
    while True:
        found = look.find(sent)
        if found is not None or time.time() >= until:
            return found
        pause(min(wait, max(0.0, until - time.time())))
        wait = min(wait * 2, 5.0)


def _untagged(look: _Lookup, sent: float | None) -> BatchInfo | None:
    """The batch a lost create of a backend without tags made: created since it was sent (less
    `CLOCK_SKEW`), as many requests as the file, an id the workspace does not know. Several are
    told apart by their results once they end; `UnresolvedCreate` until then."""
    db = look.ws.store.conn
    known = known_batches(db)
    since = sent - CLOCK_SKEW if sent is not None else None
    size = look.row["n_requests"]
    found = [b for b in look.backend.batches(since) if b.id not in known and b.request_counts.get("total") == size]
    if len(found) <= 1:
        return found[0] if found else None
    for info in sorted(found, key=lambda b: b.created_at or 0.0):
        if info.terminal and info.output_file_id and _results_are_ours(look, info):
            return info
    raise UnresolvedCreate(
        f"{len(found)} batches of {size} requests appeared at the provider since this file's create, whose answer "
        "was lost, and its batches carry no tag: the one of this workspace is told by its results once they end. "
        "Nothing is created again meanwhile; run the same command later"
    )


def _results_are_ours(look: _Lookup, info: BatchInfo) -> bool:
    """Whether an ended batch's results answer this file's requests (downloaded aside, then dropped)."""
    assert info.output_file_id is not None
    ws, row = look.ws, look.row
    aside = ws.wave_dir("responses", row["wave"]) / f".candidate-{info.id[-24:]}.jsonl"
    try:
        look.backend.download(info.output_file_id, aside)
        read = normaliser(file_api(row), id_tag(ws.workspace_id))
        for _number, line, _raw, _flaw in read_lines(aside):
            if line is None:
                continue
            cid = (read(line) if read else line).get("custom_id")
            mine = ws.store.conn.execute(
                "SELECT 1 FROM requests WHERE custom_id = ? AND file_pk = ?", (cid, row["pk"])
            ).fetchone()
            return mine is not None
        return False
    finally:
        aside.unlink(missing_ok=True)


@dataclass
class PollResult:
    in_flight: int = 0
    manual: list[str] = field(default_factory=list)  # waiting for `lexpilot-batch ingest`
    cancelled: list[str] = field(default_factory=list)  # asked to cancel: older than --max-wave-age
    finished: list[str] = field(default_factory=list)
    stats: IngestStats = field(default_factory=IngestStats)
    batches: list[dict] = field(default_factory=list)  # for progress displays
    duplicates: list[str] = field(default_factory=list)  # batch ids cancelled: not their file's own
    refused: list[str] = field(default_factory=list)  # files whose batch the quota refused: waiting again
    lost: list[str] = field(default_factory=list)  # files whose batch the provider lost


def poll_files(ws: Workspace, session: Session, max_age: float | None = None) -> PollResult:
    """Retrieve every in-flight batch; save and ingest the terminal ones; run sync files.

    A batch in flight for longer than `max_age` seconds is cancelled. First the workspace's tagged
    batches are listed: live duplicates are cancelled (`sweep`), and the listing tells a batch the
    provider lost from one it failed to answer for.
    """
    result = PollResult()
    rows = files_in(ws.store.conn, IN_FLIGHT)
    listed = sweep(ws, session, rows, result)
    for row in rows:
        if row["status"] == SUBMITTED and row["backend"] == "manual":
            result.in_flight += 1
            result.manual.append(row["path"])
            continue
        if row["status"] == SUBMITTED and row["backend"] == "sync":
            _run_sync(ws, session, row)
            row = file_row(ws.store.conn, row["pk"])
        elif row["status"] == SUBMITTED:
            backend: BatchBackend = session.batch_backend(row)
            try:
                info = backend.retrieve(row["batch_id"])
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
                    "elapsed": time.time() - (row["submitted_at"] or time.time()),
                }
            )
            if not info.terminal:
                age = time.time() - (row["submitted_at"] or time.time())
                if max_age is not None and age > max_age and info.status != "cancelling":
                    # Too old: cancel it. Its finished requests are kept when it lands as
                    # `cancelled`; the rest go back to due and are retried in the next wave.
                    info = backend.cancel(row["batch_id"])
                    result.cancelled.append(row["path"])
                set_file(
                    ws, row["pk"], batch_status=info.status, request_counts=json.dumps(info.request_counts), not_found=0
                )
                result.in_flight += 1
                continue
            if info.token_limit is not None and _quota_refusal(ws, row, info):
                result.refused.append(row["path"])
                result.in_flight += 1
                continue
            _download(ws, backend, row, info)
            row = file_row(ws.store.conn, row["pk"])
        result.stats.add(ingest_file(ws, row))
        result.finished.append(row["path"])
    close_finished_waves(ws)
    return result


def sweep(ws: Workspace, session: Session, rows: list[dict], result: PollResult) -> dict[int, set[str]]:
    """List the workspace's tagged batches at each provider that holds a batch of ours in flight;
    cancel every live one that is not its file's recorded batch (a create committed after its
    answer was lost, and created again), and keep it aside. Returns the ids listed, per backend."""
    listed: dict[int, set[str]] = {}
    by_backend: dict[int, tuple[BatchBackend, float]] = {}
    ours = {"lexpilot_workspace": ws.workspace_id}
    for row in rows:
        if row["status"] != SUBMITTED or row["backend"] in ("sync", "manual"):
            continue
        backend = session.batch_backend(row)
        started = min(t for t in (row["creating_at"], row["submitted_at"], time.time()) if t is not None)
        known = by_backend.get(id(backend))
        by_backend[id(backend)] = (backend, min(started, known[1]) if known else started)
    db = ws.store.conn
    for key, (backend, oldest) in by_backend.items():
        every = list(backend.batches(oldest - SWEEP_MARGIN))
        listed[key] = {b.id for b in every}
        # An untagged backend's batches are no one's here: its duplicates cannot be told while they run.
        for info in (b for b in every if tagged_by(b, ours)):
            path = info.metadata.get("lexpilot_file", "")
            owner = file_at(db, path)
            if owner is None or owner["status"] in TO_SUBMIT:
                continue  # not ours to judge; or a file being created, whose batch `submit` adopts
            if owner["batch_id"] == info.id and (owner["status"] != LOST or info.terminal):
                continue  # its file's own (a lost one that came back is not: its requests went again)
            seen = db.execute("SELECT status FROM other_batches WHERE batch_id = ?", (info.id,)).fetchone()
            if seen is not None and seen["status"] == info.status:
                continue
            if not info.terminal and info.status != "cancelling":
                info = backend.cancel(info.id)
                result.duplicates.append(info.id)
            with ws.store.transaction() as tx:
                tx.execute(
                    "INSERT INTO other_batches (batch_id, file_pk, path, why, status, at)"
                    " VALUES (?, ?, ?, 'duplicate', ?, ?) ON CONFLICT (batch_id) DO UPDATE SET status = excluded.status",
                    (info.id, owner["pk"], owner["path"], info.status, time.time()),
                )
    return listed


def _not_found(ws: Workspace, row: dict, listed: set[str] | None, message: str) -> bool:
    """Count a 404 for the file's batch; after `LOST_AFTER` in a row, and when the provider's own
    listing of our batches works and does not show it, the batch is lost. Returns whether it is."""
    count = (row["not_found"] or 0) + 1
    with ws.store.transaction() as db:
        db.execute("UPDATE files SET not_found = ? WHERE pk = ?", (count, row["pk"]))
        if count >= LOST_AFTER and listed is not None and row["batch_id"] not in listed:
            mark_lost(
                db,
                row["pk"],
                f"batch_lost: the provider no longer knows batch {row['batch_id']} (HTTP 404 {count} times in a row); "
                "sent again",
            )
            return True
    return False


def _quota_refusal(ws: Workspace, row: dict, info: BatchInfo) -> bool:
    """A batch refused for the enqueued-token quota: lower the model's budget and let the file wait
    to be created again. False once it was refused `MAX_QUOTA_REFUSALS` times: then it is ingested
    as failed, and its requests go to the next wave."""
    error = info.token_limit or {}
    with ws.store.transaction() as db:
        times = db.execute(
            "SELECT COUNT(*) FROM other_batches WHERE file_pk = ? AND why = 'token_limit'", (row["pk"],)
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


def _run_sync(ws: Workspace, session: Session, row: dict) -> None:
    """Execute a file through its API's synchronous call (`providers.sync`); its output file grows as answers arrive."""
    path = ws.path(row["path"])
    # `submit` only marked the file: it is read now, so this is the last moment to check that it
    # still holds what was compiled (an edit made since would otherwise be sent and scored).
    if file_sha256(path) != row["sha256"]:
        raise TamperedFile(
            f"request file {row['path']} changed on disk or vanished after it was compiled, so it is not sent. "
            f"Run `{ws.command('doctor --repair')}` to discard it (its requests are asked again), or restore it"
        )
    out = ws.wave_dir("responses", row["wave"]) / f"{Path(row['path']).stem}.output.jsonl"
    runner = session.sync_runner(row)
    # disable=None: a bar on a terminal, silence in logs and pipes.
    with tqdm(total=row["n_requests"], desc=f"sync {Path(row['path']).name}", unit="req", disable=None) as bar:

        def progress(saved: int, total: int) -> None:
            bar.total = total
            bar.update(saved - bar.n)

        stats = runner.run(path, out, on_progress=progress)
    counts = {"total": stats.total, "completed": stats.ok, "failed": stats.failed}
    set_file(
        ws,
        row["pk"],
        status=DOWNLOADED,
        batch_status="completed",
        request_counts=json.dumps(counts),
        output_path=ws.relative(out),
        finished_at=time.time(),
    )


def _download(ws: Workspace, backend: BatchBackend, row: dict, info: BatchInfo) -> None:
    """Save the batch's result files untouched, then record that they are saved."""
    stem = Path(row["path"]).stem
    out_dir = ws.wave_dir("responses", row["wave"])
    paths: dict[str, str | None] = {"output_path": None, "error_path": None}
    for kind, file_id in (("output", info.output_file_id), ("error", info.error_file_id)):
        if file_id:
            dest = out_dir / f"{stem}.{kind}.jsonl"
            backend.download(file_id, dest)
            paths[f"{kind}_path"] = ws.relative(dest)
    set_file(
        ws,
        row["pk"],
        status=DOWNLOADED,
        batch_status=info.status,
        request_counts=json.dumps(info.request_counts),
        batch_errors=json.dumps(info.errors, ensure_ascii=False),
        output_file_id=info.output_file_id,
        error_file_id=info.error_file_id,
        finished_at=time.time(),
        **paths,
    )
