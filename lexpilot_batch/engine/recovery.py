"""Never billed twice: a batch whose create answer was lost found again, duplicates swept, and the
batches of a workspace restored from a backup adopted.

Each step of a file's way through a provider is recorded before the next begins (`state.waves`),
so a command killed anywhere resumes where it stopped; what this module adds is the policy around a
create, the same for every backend that can create (a backend only makes single calls,
`providers.batch`):

- **A lost upload.** An upload whose answer was lost, or whose command died before the file id
  was recorded, may have left the file at the provider: where the backend lists its files
  (`lists_uploads`: the OpenAI-shaped APIs), the file is looked for by the name it was uploaded
  under (`upload_name`: the workspace's tag, its content's hash) before it is uploaded again
  (`upload_once`), so that no copy is left at the provider, unreferenced (Azure's resources
  hold 500 files).
- **A lost answer.** A create whose answer was lost (timeout, dropped connection, 5xx) may have
  created the batch, or may create it a moment later: its tag (`batch_tag`) is looked up with
  backoff for a grace period (`ProviderOptions.create_grace`, counted from when the create was
  sent, also after a crash) before the file is created again (`create_once`, `await_batch`).
- **Duplicates.** On every poll the workspace's tagged batches are listed (`sweep`), and a live
  batch that is not its file's recorded batch is cancelled and kept aside (`other_batches`); its
  results are never downloaded, so never applied.
- **Without a tag** (Anthropic's Message Batches and Together's batch jobs carry no metadata), a
  lost create is looked for by what the listing does show (`_untagged`): a batch created since the
  create was sent (less `CLOCK_SKEW`), whose id the workspace does not know, made from the file's
  own upload where the listing names a batch's input file (Together's: only this workspace knows
  that id, so every such batch is this file's; the oldest is adopted, later ones are cancelled and
  kept aside), else holding as many requests as the file (Anthropic's). One such batch is adopted.
  Several of the latter (another client of the account created batches of the same size
  meanwhile) are told apart once they end, by their results: the request ids carry the workspace's
  tag (`providers.lines.line_id`); until then the file is neither created again nor adopted. A
  batch adopted wrongly (a stranger's) shows at ingest: its lines are anomalies, nothing of it is
  applied, and the file's requests are asked again. The sweep cannot tell an untagged duplicate
  that names no input file while it runs, so it cancels none: a create that commits later than the
  grace period is the one case left, which a longer `--create-grace` covers. One that names its
  input file (Together's) is swept as a tagged one is: owned by the file uploaded as that id.
- **A restored backup** (`Earlier`): before a file's first create, a batch tagged for it that the
  database does not know is adopted instead of created again.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from lexpilot_batch.engine.result_lines import read_lines
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.backends import MANUAL, RUN_HERE
from lexpilot_batch.providers.batch import (
    BatchBackend,
    BatchInfo,
    BatchSource,
    BatchStatus,
    CreateUncertain,
    RateLimited,
    UploadUncertain,
    tagged_by,
)
from lexpilot_batch.providers.ids import id_tag
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.registry import file_api, result_reader
from lexpilot_batch.state.waves import (
    DUPLICATE,
    LOST,
    SUBMITTED,
    TO_SUBMIT,
    TOKEN_LIMIT,
    FileRow,
    file_at,
    file_of_upload,
    keep_aside,
    mark_submitted,
    set_file,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session

CREATE_ATTEMPTS = 6  # create calls for one file in one command, rate-limit refusals included
# Uploads of one file in one command where a lost answer is looked for (`upload_once`), and the
# seconds before each look: about as long as the SDK's own retries ride out, so that a provider
# down for longer stops the command as any other call does ("nothing was lost").
UPLOAD_ATTEMPTS = 3
UPLOAD_LOOKS = (0.5, 1.0)
SWEEP_MARGIN = 3600.0  # seconds before the oldest batch in flight that the listing goes back to
# Seconds a provider's clock may run behind ours: an untagged batch created that long before its
# create was sent may still be the one it created.
CLOCK_SKEW = 120.0


def batch_tag(ws: Workspace, row: Mapping[str, Any]) -> dict[str, str]:
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


class UnresolvedCreate(LexpilotError):
    """Several untagged batches could be the one a lost create made: none is adopted or created yet."""


class Earlier:
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

    def find(self, backend: BatchBackend, row: FileRow) -> list[BatchInfo] | None:
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
        found.sort(key=lambda b: (_create_number(b), b.status != BatchStatus.FAILED, b.created_at or 0.0), reverse=True)
        return found or None


def known_batches(db: sqlite3.Connection) -> set[str]:
    """Every batch id the workspace knows: its files' own, and those kept aside."""
    query = "SELECT batch_id FROM files WHERE batch_id IS NOT NULL UNION SELECT batch_id FROM other_batches"
    return {r[0] for r in db.execute(query)}


def record_batch(db: sqlite3.Connection, pk: int, info: BatchInfo, at: float, **more: object) -> None:
    """The file's batch is `info`, sent at `at` (`submitted`), inside the caller's transaction."""
    mark_submitted(db, pk, info.id, info.status, info.request_counts, at, **more)


def _create_number(info: BatchInfo) -> int:
    """Which create of its file a batch was (`batch_tag`), 0 for a batch of an earlier version."""
    try:
        return int(info.metadata.get("lexpilot_create") or 0)
    except ValueError:
        return 0


def adopt(ws: Workspace, row: FileRow, earlier: list[BatchInfo]) -> None:
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
                keep_aside(
                    db, other.id, row["pk"], row["path"], TOKEN_LIMIT if other.token_limit else DUPLICATE, other.status
                )


@dataclass
class Lookup:
    """One file's create at its backend, and how its batch is found again."""

    ws: Workspace
    backend: BatchBackend
    row: FileRow
    tag: dict[str, str]  # `batch_tag` of this create

    def create(self) -> BatchInfo:
        source = BatchSource(self.ws.path(self.row["path"]), parse_model(self.row["model"]).sent)
        file_id = self.row["provider_file_id"]
        assert file_id is not None  # a file is uploaded before its batch is created
        return self.backend.create(file_id, self.tag, self.row.get("url"), source)

    def find(self, sent: float | None) -> BatchInfo | None:
        """The batch this file's create (sent at `sent`) made, if the provider shows it."""
        if self.backend.tags_batches:
            return self.backend.find(self.tag, sent - SWEEP_MARGIN if sent is not None else None)
        return _untagged(self, sent)


def _rate_wait(exc: RateLimited, attempt: int) -> float:
    """Seconds before the next call refused for the rate: the provider's word, else backoff to 8 s."""
    return clock.RETRY.wait(attempt, exc.retry_after)


def upload_name(ws: Workspace, row: FileRow) -> str:
    """The name a workspace file is uploaded under: the workspace's tag, the start of its content's
    hash and its own name, so that an upload in the provider's listing under this name holds these
    very bytes (`upload_once`), whichever workspace of the account looks."""
    return f"lexpilot-{id_tag(ws.workspace_id)}-{row['sha256'][:12]}-{PurePosixPath(row['path']).name}"


def upload_once(ws: Workspace, backend: BatchBackend, row: FileRow) -> str:
    """Upload the file once, returning its id at the provider: where an earlier upload may have
    reached it (its answer lost, or the command died before recording the id), the provider's
    listing is looked in first, and an upload found there is the file's; after a lost answer it is
    looked for a moment (`UPLOAD_LOOKS`: a listing may show a stored file a moment late).
    The first upload's time is recorded before it is sent (`files.uploading_at`), also across a
    crash. A backend that does not list its uploads uploads again (its SDK retrying as it does)."""
    if row.get("uploading_at") is not None:
        found = _uploaded(ws, backend, row)
        if found is not None:
            return found
    else:  # the first upload's time: every copy of it is newer
        row["uploading_at"] = time.time()
        set_file(ws, row["pk"], uploading_at=row["uploading_at"])
    last: LexpilotError | None = None
    for attempt in range(UPLOAD_ATTEMPTS):
        try:
            return backend.upload(ws.path(row["path"]), upload_name(ws, row))
        except RateLimited as exc:  # refused before anything was stored
            last = exc
            clock.pause(_rate_wait(exc, attempt))
        except UploadUncertain as exc:
            last = exc
            for wait in UPLOAD_LOOKS:
                clock.pause(wait)
                found = _uploaded(ws, backend, row)
                if found is not None:
                    return found
    assert last is not None
    raise last


def _uploaded(ws: Workspace, backend: BatchBackend, row: FileRow) -> str | None:
    """The id of the file's earlier upload, if the provider holds one; of several (more than one
    answer lost), the newest is the file's and the others are deleted where the backend deletes."""
    name = upload_name(ws, row)
    uploading_at = row["uploading_at"]
    assert uploading_at is not None  # recorded before the first upload is sent (`upload_once`)
    since = uploading_at - CLOCK_SKEW
    found = [u for u in backend.uploads(since) if u.name == name and u.bytes in (None, row["bytes"])]
    if not found:
        return None
    found.sort(key=lambda u: u.created_at or 0.0, reverse=True)
    for other in found[1:]:
        backend.delete_file(other.id)
    return found[0].id


def create_once(look: Lookup, grace: float) -> BatchInfo:
    """Create the file's batch once: after an answer that may have been lost, its batch is looked
    for during the grace period before another create is sent."""
    last: LexpilotError | None = None
    for attempt in range(CREATE_ATTEMPTS):
        sent = time.time()
        try:
            return look.create()
        except RateLimited as exc:  # refused before anything was created
            last = exc
            clock.pause(_rate_wait(exc, attempt))
        except CreateUncertain as exc:
            last = exc
            found = await_batch(look, sent + grace, sent)
            if found is not None:
                return found
    assert last is not None
    raise last


def await_batch(look: Lookup, until: float, sent: float | None) -> BatchInfo | None:
    """The file's batch, looked for with backoff until `until` (at least once)."""
    schedule = clock.Backoff(min(0.25, max(0.0, until - time.time()) / 8), 5.0)
    for attempt in itertools.count():
        found = look.find(sent)
        if found is not None or time.time() >= until:
            return found
        clock.pause(min(schedule.wait(attempt), max(0.0, until - time.time())))
    raise AssertionError("unreachable")  # pragma: no cover


def _untagged(look: Lookup, sent: float | None) -> BatchInfo | None:
    """The batch a lost create of a backend without tags made: created since it was sent (less
    `CLOCK_SKEW`), an id the workspace does not know, and made from the file's own upload where the
    listing names a batch's input file (Together's), else holding as many requests as the file.
    Several of the first kind are all this file's: the oldest is adopted, the others cancelled and
    kept aside as duplicates. Several of the second are told apart by their results once they end;
    `UnresolvedCreate` until then."""
    db = look.ws.store.conn
    known = known_batches(db)
    since = sent - CLOCK_SKEW if sent is not None else None
    size, upload = look.row["n_requests"], look.row["provider_file_id"]
    listed = [b for b in look.backend.batches(since) if b.id not in known]
    mine = [b for b in listed if b.input_file_id is not None and b.input_file_id == upload]
    if mine:
        return _oldest_of_own(look, mine)
    found = [b for b in listed if b.input_file_id is None and b.request_counts.get("total") == size]
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


def _oldest_of_own(look: Lookup, mine: list[BatchInfo]) -> BatchInfo:
    """The first batch created from the file's own upload; any later one (a create that committed
    after its answer was lost, and was sent again) is cancelled and kept aside, never applied."""
    first, *later = sorted(mine, key=lambda b: (b.created_at or 0.0, b.id))
    for other in later:
        if not other.terminal and other.status != BatchStatus.CANCELLING:
            other = look.backend.cancel_live(other.id)
        with look.ws.store.transaction() as tx:
            keep_aside(tx, other.id, look.row["pk"], look.row["path"], DUPLICATE, other.status)
    return first


def _results_are_ours(look: Lookup, info: BatchInfo) -> bool:
    """Whether an ended batch's results answer this file's requests (downloaded aside, then dropped)."""
    assert info.output_file_id is not None
    ws, row = look.ws, look.row
    aside = ws.wave_dir("responses", row["wave"]) / f".candidate-{info.id[-24:]}.jsonl"
    try:
        look.backend.download(info.output_file_id, aside)
        read = result_reader(file_api(row), id_tag(ws.workspace_id))
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


def _owner(db: sqlite3.Connection, info: BatchInfo, ours: dict[str, str]) -> FileRow | None:
    """The workspace file a listed batch is of: by its tag, or, untagged, by the upload it was made
    from (an id only this workspace holds); None for a batch of no file of ours."""
    if tagged_by(info, ours):
        return file_at(db, info.metadata.get("lexpilot_file", ""))
    if info.input_file_id is None:
        return None
    return file_of_upload(db, info.input_file_id)


def sweep(ws: Workspace, session: Session, rows: list[FileRow], duplicates: list[str]) -> dict[int, set[str]]:
    """List the workspace's tagged batches at each provider that holds a batch of ours in flight;
    cancel every live one that is not its file's recorded batch (a create committed after its
    answer was lost, and created again), and keep it aside; the ids cancelled are added to
    `duplicates`. Returns the ids listed, per backend."""
    listed: dict[int, set[str]] = {}
    by_backend: dict[int, tuple[BatchBackend, float]] = {}
    ours = {"lexpilot_workspace": ws.workspace_id}
    for row in rows:
        if row["status"] != SUBMITTED or row["backend"] in (*RUN_HERE, MANUAL):
            continue
        backend = session.batch_backend(row)
        started = min(t for t in (row["creating_at"], row["submitted_at"], time.time()) if t is not None)
        known = by_backend.get(id(backend))
        by_backend[id(backend)] = (backend, min(started, known[1]) if known else started)
    db = ws.store.conn
    for key, (backend, oldest) in by_backend.items():
        every = list(backend.batches(oldest - SWEEP_MARGIN))
        listed[key] = {b.id for b in every}
        # An untagged backend's batches are no one's here, unless they name the upload they were
        # made from (Together's): otherwise its duplicates cannot be told while they run.
        for info in every:
            owner = _owner(db, info, ours)
            if owner is None or owner["status"] in TO_SUBMIT:
                continue  # not ours to judge; or a file being created, whose batch `submit` adopts
            if owner["batch_id"] == info.id and (owner["status"] != LOST or info.terminal):
                continue  # its file's own (a lost one that came back is not: its requests went again)
            seen = db.execute("SELECT status FROM other_batches WHERE batch_id = ?", (info.id,)).fetchone()
            if seen is not None and seen["status"] == info.status:
                continue
            if not info.terminal and info.status != BatchStatus.CANCELLING:
                info = backend.cancel_live(info.id)
                duplicates.append(info.id)
            with ws.store.transaction() as tx:
                keep_aside(tx, info.id, owner["pk"], owner["path"], DUPLICATE, info.status)
    return listed
