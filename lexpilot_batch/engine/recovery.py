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
- **No decision compares our clock with the provider's**: it may run hours ahead (WSL2, a VM after
  sleep) or be set back in between. Every listing that looks for what an upload or a create made,
  or sweeps for duplicates, starts at a time by the provider's own clock (`ProviderTimes`: the
  newest batch it listed just before the file was sent, `files.sent_after`), less a margin; the
  grace period is waited out in this process's monotonic time, and after a crash never longer than
  the whole period (`grace_left`), whatever our clock did meanwhile.
- **Duplicates and copies.** On every poll the workspace's batches are listed and a live one that
  is provably a duplicate of a file's own is cancelled; another copy's is left alone
  (`engine.sweep`). A batch carries the copy of the workspace (`state.instances`) that created it
  (`batch_tag`; an upload its name, `upload_name`), and a lost create counts in its file
  (`files.lost_answers`), which is what makes a duplicate provable. Another copy's batch is never
  adopted.
- **Without a tag** (Anthropic's Message Batches and Together's batch jobs carry no metadata), a
  lost create is looked for by what the listing does show (`_untagged`): a batch created since the
  provider's time read before the create was sent (less `PROVIDER_SKEW`), whose id the workspace
  does not know, made from the file's
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
- **A restored backup** (`Earlier`): before a file's first create, a batch of this instance (or of
  a version that tagged no instance) tagged for it that the database does not know is adopted
  instead of created again. A backup restored in the original's place is the same instance and
  adopts what the original made since; a copy elsewhere is another instance and adopts nothing of
  the original's.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from lexpilot_batch.engine.result_lines import read_lines
from lexpilot_batch.errors import LexpilotError
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
    TOKEN_LIMIT,
    FileRow,
    keep_aside,
    lost_answer,
    mark_submitted,
    set_file,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock

CREATE_ATTEMPTS = 6  # create calls for one file in one command, rate-limit refusals included
# Uploads of one file in one command where a lost answer is looked for (`upload_once`), and the
# seconds before each look: about as long as the SDK's own retries ride out, so that a provider
# down for longer stops the command as any other call does ("nothing was lost").
UPLOAD_ATTEMPTS = 3
UPLOAD_LOOKS = (0.5, 1.0)
# Seconds, by the provider's clock, that a listing of tagged batches goes back before the time read
# before the oldest file it looks for was sent (`files.sent_after`): listing more only costs pages.
SWEEP_MARGIN = 3600.0
# Seconds a provider's own times may disagree (its servers, its files and batches services): an
# untagged batch or an upload stamped that much before the time read before it was sent may still
# be the one looked for.
PROVIDER_SKEW = 120.0


class ProviderTimes:
    """The provider's own clock, read before an upload or a create is sent: the time of the newest
    batch it lists (`BatchBackend.latest_created_at`), once per backend in a pass of `submit`.
    Whatever that upload or create made is stamped later by the same clock, so the time, recorded
    with the file (`files.sent_after`), starts every listing that looks for it; our clock, which may
    run hours ahead of the provider's or be set back meanwhile, is never compared with it."""

    def __init__(self) -> None:
        self._read: dict[int, float | None] = {}

    def before_sending(self, backend: BatchBackend) -> float | None:
        """A time the provider's clock has passed (None: it lists no batch yet)."""
        if id(backend) not in self._read:
            self._read[id(backend)] = backend.latest_created_at()
        return self._read[id(backend)]


def listed_since(sent_after: float | None, margin: float) -> float | None:
    """Where a listing for what was sent after `sent_after` (the provider's time) starts: None, the
    whole listing, where no time was read (a file sent before times were recorded)."""
    return sent_after - margin if sent_after is not None else None


def batch_tag(ws: Workspace, row: Mapping[str, Any]) -> dict[str, str]:
    """Metadata naming the workspace, the copy of it that sends the create (`files.instance`), the
    file and which of its creates this is: how a batch is found again after a crash, and how a
    duplicate is told from its file's own batch and from another copy's."""
    tag = {"lexpilot_workspace": ws.workspace_id}
    if row.get("instance"):  # absent from batches created before copies were told apart
        tag["lexpilot_instance"] = str(row["instance"])
    tag |= {"lexpilot_file": row["path"], "lexpilot_sha256": row["sha256"][:32]}
    if row.get("creates"):  # absent from batches of files created before this was counted
        tag["lexpilot_create"] = str(row["creates"])
    return tag


class UnresolvedCreate(LexpilotError):
    """Several untagged batches could be the one a lost create made: none is adopted or created yet."""


class Earlier:
    """Batches created for files the database says were never sent: a workspace restored from a
    backup taken before they were created (or whose record of them was lost), whose batches run, or
    ran, at the provider.

    Before a file's first create, the workspace's tagged batches since it first sent a file are
    listed, once per backend and command; a batch of this instance (or of a version that tagged
    none) tagged for this very file (its path and content hash) that the database does not know is
    adopted, as its create would have been: its results are paid for, and one that failed or was
    refused is handled as it was the first time. Several: the latest create. Another copy's batch
    (`state.instances`) is never adopted: that copy applies it. A backend whose batches carry no
    tag cannot be asked (Anthropic's Message Batches): there a restored workspace creates its files
    again, and what the earlier batches answered is paid twice, never applied twice.
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
            # Back to the first file the database sent to this endpoint, by the provider's clock; a
            # database that never sent one there lists it all, once per command.
            first = db.execute("SELECT MIN(sent_after) FROM files WHERE endpoint = ?", (row["endpoint"],)).fetchone()[0]
            since = listed_since(first, SWEEP_MARGIN)
            ours = {"lexpilot_workspace": self.ws.workspace_id}
            self._listed[id(backend)] = [b for b in backend.batches(since) if tagged_by(b, ours)]
        mine = {"lexpilot_file": row["path"], "lexpilot_sha256": row["sha256"][:32]}
        instance = self.ws.instance_id
        found = [
            b
            for b in self._listed[id(backend)]
            if tagged_by(b, mine) and b.metadata.get("lexpilot_instance") in (None, instance)
        ]
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


def record_batch(db: sqlite3.Connection, pk: int, info: BatchInfo, **more: object) -> None:
    """The file's batch is `info` (`submitted`, recorded now by our clock), inside the caller's transaction."""
    mark_submitted(db, pk, info.id, info.status, info.request_counts, clock.now(), info.created_at, **more)


def _create_number(info: BatchInfo) -> int:
    """Which create of its file a batch was (`batch_tag`), 0 for a batch of an earlier version."""
    try:
        return int(info.metadata.get("lexpilot_create") or 0)
    except ValueError:
        return 0


def adopt(ws: Workspace, row: FileRow, earlier: list[BatchInfo]) -> None:
    """Record the first of a file's earlier batches as its own, as its create would have been; the
    ended others are kept aside as they were the first time (refused for the quota, or duplicates),
    and one still running is left to the next poll's sweep, which cancels it: two batches of one
    file and instance mean a create of it lost its answer (`files.lost_answers`).
    The file's next create (after a quota refusal) takes a number after theirs."""
    info = earlier[0]
    with ws.store.transaction() as db:
        creates = max(row["creates"] or 0, *(_create_number(b) for b in earlier))
        record_batch(db, row["pk"], info, creates=creates)
        for other in earlier[1:]:
            if other.terminal:
                keep_aside(
                    db, other.id, row["pk"], row["path"], TOKEN_LIMIT if other.token_limit else DUPLICATE, other.status
                )
        if not all(other.terminal for other in earlier[1:]):
            lost_answer(db, row["pk"])


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

    def find(self) -> BatchInfo | None:
        """The batch this file's create made, if the provider shows it: listed back from the
        provider's time read before it was sent (`ProviderTimes`)."""
        if self.backend.tags_batches:
            return self.backend.find(self.tag, listed_since(self.row["sent_after"], SWEEP_MARGIN))
        return _untagged(self)


def _rate_wait(exc: RateLimited, attempt: int) -> None:
    """Wait before the next call refused for the rate: the provider's word, else backoff to 8 s;
    within `--outage-wait` (`clock.wait_for_provider`)."""
    clock.wait_for_provider(clock.RETRY.wait(attempt, exc.retry_after), str(exc), attempt)


def upload_name(ws: Workspace, row: FileRow) -> str:
    """The name a workspace file is uploaded under: the workspace's tag, the instance that uploads
    it (`files.instance`: the same file of another copy is another upload), the start of its
    content's hash and its own name, so that an upload in the provider's listing under this name
    holds these very bytes (`upload_once`) and is this copy's, whichever workspace of the account looks."""
    instance = row.get("instance")
    copy = f"{instance[:8]}-" if instance else ""
    return f"lexpilot-{id_tag(ws.workspace_id)}-{copy}{row['sha256'][:12]}-{PurePosixPath(row['path']).name}"


def upload_once(ws: Workspace, backend: BatchBackend, row: FileRow, times: ProviderTimes) -> str:
    """Upload the file once, returning its id at the provider: where an earlier upload may have
    reached it (its answer lost, or the command died before recording the id), the provider's
    listing is looked in first, and an upload found there is the file's; after a lost answer it is
    looked for a moment (`UPLOAD_LOOKS`: a listing may show a stored file a moment late).
    That an upload is sent is recorded before it is sent (`files.uploading_at`), with the provider's
    time read just before (`files.sent_after`), from which its listing is looked through, also
    across a crash. A backend that does not list its uploads uploads again (its SDK retrying as it does)."""
    if row.get("uploading_at") is not None:
        found = _uploaded(ws, backend, row)
        if found is not None:
            return found
    else:  # the first upload: every copy of it is newer than the provider's time read now
        row["uploading_at"] = clock.now()
        row["sent_after"] = times.before_sending(backend) if backend.lists_uploads else None
        row["instance"] = ws.instance_id or None
        set_file(
            ws, row["pk"], uploading_at=row["uploading_at"], sent_after=row["sent_after"], instance=row["instance"]
        )
    last: LexpilotError | None = None
    for attempt in range(UPLOAD_ATTEMPTS):
        try:
            return backend.upload(ws.path(row["path"]), upload_name(ws, row))
        except RateLimited as exc:  # refused before anything was stored
            last = exc
            _rate_wait(exc, attempt)
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
    since = listed_since(row["sent_after"], PROVIDER_SKEW)
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
        try:
            return look.create()
        except RateLimited as exc:  # refused before anything was created
            last = exc
            _rate_wait(exc, attempt)
        except CreateUncertain as exc:
            last = exc
            with look.ws.store.transaction() as db:
                lost_answer(db, look.row["pk"])
            found = await_batch(look, grace)
            if found is not None:
                return found
    assert last is not None
    raise last


LOOKING = "looking for the batch of a create whose answer was lost, before creating it again"


def await_batch(look: Lookup, grace: float) -> BatchInfo | None:
    """The file's batch, looked for with backoff for `grace` seconds of this process (at least once)."""
    until = clock.monotonic() + max(0.0, grace)
    schedule = clock.Backoff(min(0.25, max(0.0, grace) / 8), 5.0)
    for attempt in itertools.count():
        found = look.find()
        left = until - clock.monotonic()
        if found is not None or left <= 0:
            return found
        clock.wait_for_provider(min(schedule.wait(attempt), left), LOOKING, attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def grace_left(creating_at: float | None, grace: float) -> float:
    """What is left of the grace period of a create an earlier command sent at `creating_at` (by our
    clock, then): never more than the whole period, whatever our clock did since (set back by two
    hours, it would otherwise say the period ends two hours from now), none once it has passed."""
    if creating_at is None:
        return 0.0
    return min(grace, max(0.0, creating_at + grace - clock.now()))


def _untagged(look: Lookup) -> BatchInfo | None:
    """The batch a lost create of a backend without tags made: created since the provider's time
    read before it was sent (less `PROVIDER_SKEW`), an id the workspace does not know, and made from the file's own upload where the
    listing names a batch's input file (Together's), else holding as many requests as the file.
    Several of the first kind are all this file's: the oldest is adopted, the others cancelled and
    kept aside as duplicates. Several of the second are told apart by their results once they end;
    `UnresolvedCreate` until then."""
    db = look.ws.store.conn
    known = known_batches(db)
    since = listed_since(look.row["sent_after"], PROVIDER_SKEW)
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
