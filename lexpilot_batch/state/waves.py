"""The life of a wave and of its request files: every state a file passes through, and every move.

A wave is the set of request files one compile writes; it closes once every file of it is
ingested, and only then is the next wave compiled. A file's states (`files.status`):

    compiled --> uploaded --> creating --> submitted --> downloaded --> ingested
       |            ^                       ^   |   |                      ^
       |            +---- refused (quota) --+---+   +--> lost              |
       +------ sync and manual files -------+   +------ manual files ------+

    compile          writes a wave's files, `compiled`, in one transaction
    submit           uploads a file (`uploaded`); when its model's enqueued-token budget has room
                     (`budgets`), marks it `creating`, creates its batch (or adopts the one its
                     metadata tag finds, looking for it for a grace period after a lost answer)
                     and records the batch id (`submitted`): one transaction per step. Sync and
                     manual files only get marked `submitted`.
    poll             saves a terminal batch's results, or runs a sync file (`downloaded`); results
                     that do not hold what the provider reported stay `downloaded`, held
                     (`files.held`), until fetched whole (`engine.downloads`); a batch
                     the provider refused for its enqueued-token quota goes back to `uploaded`
                     (`refused`: created again later, no request failed); a batch the provider no
                     longer knows (404 on `LOST_AFTER` polls in a row, absent from its listing)
                     is `lost`: its requests failed as never run, asked again in the next wave
    ingest           applies a downloaded file's results (`ingested`), one transaction per file;
                     `lexpilot-batch ingest` applies the user's results of manual files, a file
                     becoming `ingested` once none of its requests is pending
    doctor --repair  moves back only where nothing is lost: `downloaded` -> `submitted` (the saved
                     results are forgotten and fetched again), and an unsent file (`unsent`) is
                     discarded with its requests, which the next compile asks again; a batch
                     the provider answered 404 for is declared `lost` at once

`ingested` and `lost` are the two ends: a wave closes when each of its files reached one.

A wave nothing of which has left the workspace (not `wave_started`) is discarded whole
(`discard_unsent_wave`) and compiled again, identically: by the compiler after a crash or when
`prepare` adds a run, and by `doctor` when one of its files changed on disk.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final, TypedDict, cast

from lexpilot_batch.providers.backends import MANUAL, RUN_HERE
from lexpilot_batch.providers.batch import BatchStatus
from lexpilot_batch.state.requests import delete_of_file, delete_of_wave, fail_pending_of_file
from lexpilot_batch.state.states import UNEXECUTED, FileState, FileStatus, RequestState, ThreadState
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock
from lexpilot_batch.util.fileio import file_sha256
from lexpilot_batch.util.redaction import redact_url

COMPILED: Final = FileState.COMPILED  # written and recorded; nothing has left the workspace
UPLOADED: Final = FileState.UPLOADED  # the provider holds the file; no batch yet
CREATING: Final = FileState.CREATING  # a batch is being created: one may exist that the database does not know
SUBMITTED: Final = FileState.SUBMITTED  # its batch is running (or, manual: the user runs it; sync: it runs when polled)
DOWNLOADED: Final = FileState.DOWNLOADED  # the results are saved under responses/, not yet applied
INGESTED: Final = FileState.INGESTED  # the results are applied: the file is done
LOST: Final = FileState.LOST  # the provider lost its batch: its requests failed as never run; the file is done

TO_SUBMIT = (COMPILED, UPLOADED, CREATING)  # what `submit` sends (or finishes sending)
IN_FLIGHT = (SUBMITTED, DOWNLOADED)  # what `poll` follows until it is ingested
OPEN = TO_SUBMIT + IN_FLIGHT  # every state but the ends
DONE = (INGESTED, LOST)  # the ends

# Why a batch is kept aside (`other_batches.why`).
DUPLICATE = "duplicate"  # found besides the file's own and cancelled
TOKEN_LIMIT = "token_limit"  # refused for the enqueued-token quota: it ran nothing
# Made for the file by another copy of the workspace (`state.instances`), or one this copy cannot
# prove its own: left alone, neither cancelled nor applied.
OTHER_COPY = "other_copy"
# The same, but tagged with this folder's own instance while none of its creates of the file lost an
# answer: a copy that could not be told from this one (a cloned machine; `doctor --claim-copy`).
UNTOLD_COPY = "untold_copy"
COPIES = (OTHER_COPY, UNTOLD_COPY)
NO_BATCH = (*sorted(RUN_HERE), MANUAL)  # backends whose files no provider batch carries

# Retrieves in a row answered 404 (and the batch absent from the provider's listing) before a
# batch is declared lost: one 404 may be a provider's hiccup.
LOST_AFTER = 3


# --- files --------------------------------------------------------------------------------------


class FileRow(TypedDict):
    """A request file's row (`files`), as the functions below read it: a dict of every column."""

    pk: int
    wave: int
    path: str  # relative to the workspace root, '/' separated
    roles: str  # the roles of its requests, '+' separated
    model: str
    endpoint: str  # without the credentials a base URL may carry
    shard: int
    n_requests: int
    bytes: int
    sha256: str
    status: FileStatus
    provider_file_id: str | None
    batch_id: str | None  # the backend's name for a file no batch carries (sync, manual)
    batch_status: str | None
    request_counts: str | None  # JSON
    batch_errors: str | None  # JSON
    output_file_id: str | None
    error_file_id: str | None
    output_path: str | None
    error_path: str | None
    submitted_at: float | None
    finished_at: float | None
    backend: str  # `providers.backends`: batch, sync, flex, manual, simulated
    provider: str | None  # the provider prefix of its model; None for a bare name
    url: str | None  # the endpoint path its lines name, which its batch is created for
    tokens: int  # estimated input tokens of its requests (`engine.budgets`)
    creates: int  # batches created for it so far
    creating_at: float | None
    not_found: int  # retrieves in a row answered 404
    uploading_at: float | None
    held: str | None  # why its last download was not believed: held, neither ingested nor asked again
    damaged: int  # damaged downloads of its results seen (`engine.downloads`)
    redacted: int  # secrets replaced in its saved results (`redaction.Scrubber`)
    sent_after: float | None  # by the provider's clock: nothing of its last upload or create is older
    instance: str | None  # the instance (`state.instances`) whose tag its last upload and create carried
    lost_answers: int  # creates of it whose answer was lost
    cancel_asked: float | None  # when this workspace asked to cancel its batch (`--max-wave-age`, `--hedge`, `cancel`)


def _marks(states: Sequence[str]) -> str:
    return ", ".join("?" * len(states))


def files_in(db: sqlite3.Connection, states: Sequence[str]) -> list[FileRow]:
    """Every file in one of `states`, in the order they were compiled."""
    rows = [dict(r) for r in db.execute(f"SELECT * FROM files WHERE status IN ({_marks(states)}) ORDER BY pk", states)]
    return cast("list[FileRow]", rows)


def file_row(db: sqlite3.Connection, pk: int) -> FileRow:
    return cast("FileRow", dict(db.execute("SELECT * FROM files WHERE pk = ?", (pk,)).fetchone()))


def cancelled_unasked(db: sqlite3.Connection) -> list[str]:
    """Files whose own batch was cancelled at the provider (or is being) without this workspace
    asking (`files.cancel_asked`): by someone else, another copy of the workspace or the provider's
    console. Files no provider batch carries (sync, flex, manual) are none of them."""
    rows = db.execute(
        f"SELECT path FROM files WHERE batch_status IN (?, ?) AND cancel_asked IS NULL"
        f" AND backend NOT IN ({_marks(NO_BATCH)}) ORDER BY pk",
        (BatchStatus.CANCELLING, BatchStatus.CANCELLED, *NO_BATCH),
    )
    return [r[0] for r in rows]


def file_at(db: sqlite3.Connection, rel: str) -> FileRow | None:
    """The file at this workspace-relative path, or None."""
    row = db.execute("SELECT * FROM files WHERE path = ?", (rel,)).fetchone()
    return cast("FileRow", dict(row)) if row is not None else None


def file_of_upload(db: sqlite3.Connection, provider_file_id: str) -> FileRow | None:
    """The file uploaded as `provider_file_id` at its provider, or None."""
    row = db.execute("SELECT * FROM files WHERE provider_file_id = ?", (provider_file_id,)).fetchone()
    return cast("FileRow", dict(row)) if row is not None else None


def held_files(db: sqlite3.Connection) -> list[FileRow]:
    """Files whose batch results stayed damaged (`engine.downloads`): saved, neither ingested nor asked again."""
    rows = db.execute("SELECT * FROM files WHERE status = ? AND held IS NOT NULL ORDER BY pk", (DOWNLOADED,))
    return cast("list[FileRow]", [dict(r) for r in rows])


def file_status(db: sqlite3.Connection, pk: int) -> str:
    return db.execute("SELECT status FROM files WHERE pk = ?", (pk,)).fetchone()["status"]


def has_open_files(db: sqlite3.Connection) -> bool:
    """Whether any file is not yet done: a wave is open or in flight."""
    return db.execute("SELECT 1 FROM files WHERE status NOT IN (?, ?) LIMIT 1", DONE).fetchone() is not None


def files_of_requests(db: sqlite3.Connection, custom_ids: Iterable[str]) -> list[FileRow]:
    """The files holding these requests, each once."""
    found: dict[int, FileRow] = {}
    for chunk in _chunks(sorted(custom_ids), 500):
        marks = ",".join("?" * len(chunk))
        for r in db.execute(
            f"SELECT DISTINCT f.* FROM requests q JOIN files f ON f.pk = q.file_pk WHERE q.custom_id IN ({marks})",
            chunk,
        ):
            found[r["pk"]] = cast("FileRow", dict(r))
    return list(found.values())


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def unsent(row: FileRow) -> bool:
    """Whether nobody has read the file yet: a sync file is only read when it is polled."""
    return row["status"] in (COMPILED, UPLOADED) or (row["status"] == SUBMITTED and row["backend"] in RUN_HERE)


def check_compiled_files(ws: Workspace) -> list[str]:
    """Paths of compiled, unsubmitted files whose bytes no longer match what was compiled."""
    bad = []
    for row in ws.store.conn.execute("SELECT path, sha256 FROM files WHERE status IN (?, ?)", (COMPILED, UPLOADED)):
        if file_sha256(ws.path(row["path"])) != row["sha256"]:
            bad.append(row["path"])
    return bad


def add_compiled_file(
    db: sqlite3.Connection,
    wave: int,
    rel: str,
    model: str,
    provider: str | None,
    endpoint: str,
    backend: str,
    shard: int,
    url: str | None = None,
) -> int:
    """A new file of `wave`, still empty: the writer fills in its lines' count, size, hash and tokens.
    `url` is the endpoint path its lines name, which its batch is created for. The endpoint is
    recorded without the credentials a base URL may carry (nothing reads it back to send)."""
    cur = db.execute(
        "INSERT INTO files (wave, path, roles, model, provider, endpoint, backend, shard, url, n_requests, bytes,"
        " sha256, status) VALUES (?, ?, '', ?, ?, ?, ?, ?, ?, 0, 0, '', ?)",
        (wave, rel, model, provider, redact_url(endpoint), backend, shard, url, COMPILED),
    )
    assert cur.lastrowid is not None
    return cur.lastrowid


def update_file(db: sqlite3.Connection, pk: int, **values: object) -> None:
    """Set columns of one file, inside the caller's transaction."""
    columns = ", ".join(f"{k} = ?" for k in values)
    db.execute(f"UPDATE files SET {columns} WHERE pk = ?", (*values.values(), pk))


def set_file(ws: Workspace, pk: int, **values: object) -> None:
    """Set columns of one file in a transaction of its own: one step of its way through a provider."""
    with ws.store.transaction() as db:
        update_file(db, pk, **values)


def forget_results(db: sqlite3.Connection, pk: int) -> None:
    """`downloaded` -> `submitted`: the saved results are forgotten, and the next poll downloads them
    again (a sync file is run again). Only for a file nothing was ingested from."""
    db.execute(
        "UPDATE files SET status = ?, output_path = NULL, error_path = NULL, output_file_id = NULL,"
        " error_file_id = NULL, finished_at = NULL WHERE pk = ? AND status = ?",
        (SUBMITTED, pk, DOWNLOADED),
    )


def discard_unsent_file(db: sqlite3.Connection, pk: int) -> None:
    """Forget an unsent file (`unsent`) and its requests: the next compile asks them again. Batches
    the provider refused for it stay recorded (`other_batches`), no longer tied to a file."""
    delete_of_file(db, pk)
    db.execute("UPDATE other_batches SET file_pk = NULL WHERE file_pk = ?", (pk,))
    db.execute("DELETE FROM files WHERE pk = ?", (pk,))


def refused(db: sqlite3.Connection, pk: int, batch_id: str, status: str) -> None:
    """`submitted` -> `uploaded`: the provider refused the file's batch for its enqueued-token quota
    and ran nothing of it; the batch is kept aside (`other_batches`) and the file waits to be
    created again, its requests still pending."""
    path = db.execute("SELECT path FROM files WHERE pk = ?", (pk,)).fetchone()[0]
    keep_aside(db, batch_id, pk, path, TOKEN_LIMIT, status)
    db.execute(
        "UPDATE files SET status = ?, batch_id = NULL, batch_status = NULL, request_counts = NULL,"
        " batch_errors = NULL, submitted_at = NULL, not_found = 0 WHERE pk = ? AND status = ?",
        (UPLOADED, pk, SUBMITTED),
    )


def create_refused(db: sqlite3.Connection, pk: int) -> None:
    """`creating` -> `uploaded`: the provider refused the create for its enqueued-token quota
    before creating anything (Azure's HTTP 400 `token_limit_exceeded`); the file waits to be
    created again, its requests still pending, no attempt used."""
    db.execute("UPDATE files SET status = ?, creating_at = NULL WHERE pk = ? AND status = ?", (UPLOADED, pk, CREATING))


def mark_sent_locally(db: sqlite3.Connection, pk: int, backend: str) -> None:
    """`compiled` -> `submitted` for a file nothing is uploaded for: a sync file runs when polled,
    a manual one is the user's to run. Its `batch_id` is the backend's name (no provider batch)."""
    update_file(
        db, pk, status=SUBMITTED, batch_id=backend, batch_status=BatchStatus.IN_PROGRESS, submitted_at=clock.now()
    )


def mark_uploaded(db: sqlite3.Connection, pk: int, provider_file_id: str) -> None:
    """`compiled` -> `uploaded`: the provider holds the file."""
    update_file(db, pk, status=UPLOADED, provider_file_id=provider_file_id)


def mark_creating(
    db: sqlite3.Connection, pk: int, creates: int, at: float, sent_after: float | None, instance: str | None = None
) -> None:
    """-> `creating`: the file's `creates`-th batch create, tagged with `instance`, is sent at `at`
    (our clock), after `sent_after` (the provider's); a batch may exist from now on that the
    database does not know (`engine.recovery`)."""
    update_file(db, pk, status=CREATING, creates=creates, creating_at=at, sent_after=sent_after, instance=instance)


def lost_answer(db: sqlite3.Connection, pk: int) -> None:
    """A create of the file lost its answer (a timeout, a 5xx, a command that died): a batch the
    workspace does not know may be its own from now on."""
    db.execute("UPDATE files SET lost_answers = lost_answers + 1 WHERE pk = ?", (pk,))


def mark_submitted(
    db: sqlite3.Connection,
    pk: int,
    batch_id: str,
    batch_status: str,
    counts: Mapping[str, int],
    at: float,
    created_at: float | None = None,
    **more: object,
) -> None:
    """-> `submitted`: the file's batch is `batch_id`, recorded at `at` (our clock). `created_at`, the
    batch's time by the provider's clock, is the file's `sent_after` where it has none (sent before
    it was recorded, or a batch adopted)."""
    update_file(
        db,
        pk,
        status=SUBMITTED,
        batch_id=batch_id,
        batch_status=batch_status,
        request_counts=json.dumps(dict(counts)),
        submitted_at=at,
        not_found=0,
        **more,
    )
    if created_at is not None:
        db.execute("UPDATE files SET sent_after = COALESCE(sent_after, ?) WHERE pk = ?", (created_at, pk))


def mark_downloaded(
    db: sqlite3.Connection,
    pk: int,
    batch_status: str,
    counts: Mapping[str, int],
    output_path: str | None,
    error_path: str | None = None,
    finished_at: float | None = None,
    **more: object,
) -> None:
    """`submitted` -> `downloaded`: the results are saved under `responses/`, not yet applied;
    `finished_at` when the last was saved (now, if not given)."""
    update_file(
        db,
        pk,
        status=DOWNLOADED,
        batch_status=batch_status,
        request_counts=json.dumps(dict(counts)),
        output_path=output_path,
        error_path=error_path,
        finished_at=clock.now() if finished_at is None else finished_at,
        **more,
    )


def keep_aside(db: sqlite3.Connection, batch_id: str, file_pk: int, path: str, why: str, status: str) -> None:
    """Record a batch of a file besides its own (`other_batches`): a duplicate found (`DUPLICATE`),
    a batch the provider refused for its quota (`TOKEN_LIMIT`), another copy's (`OTHER_COPY`); its
    results are never applied."""
    db.execute(
        "INSERT INTO other_batches (batch_id, file_pk, path, why, status, at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (batch_id) DO UPDATE SET status = excluded.status",
        (batch_id, file_pk, path, why, status, clock.now()),
    )


def lost_reason(batch_id: str, why: str) -> str:
    """The failure reason of the requests of a batch the provider lost: `why` says how it is known."""
    return f"batch_lost: the provider no longer knows batch {batch_id} ({why}); sent again"


def mark_lost(db: sqlite3.Connection, pk: int, reason: str) -> int:
    """`submitted` -> `lost`: the provider no longer knows the file's batch. Its pending requests
    fail as never run (`unexecuted`, which does not use up --retries) and the next wave asks them
    again. Returns how many."""
    n = fail_pending_of_file(db, pk, reason, UNEXECUTED)
    db.execute(
        f"UPDATE files SET status = ?, batch_status = '{FileState.LOST}', finished_at = ? WHERE pk = ? AND status = ?",
        (LOST, clock.now(), pk, SUBMITTED),
    )
    return n


# --- waves --------------------------------------------------------------------------------------


def wave_started(db: sqlite3.Connection, wave: int) -> bool:
    """Whether anything of `wave` has left the workspace: then it may never be compiled again. An
    upload sent counts, its answer lost or not (`files.uploading_at`): the provider may hold the
    file, which `submit` looks for by its name, and a compile again would upload it a second time."""
    return bool(
        db.execute(
            "SELECT 1 FROM files WHERE wave = ? AND (status != ? OR uploading_at IS NOT NULL) LIMIT 1", (wave, COMPILED)
        ).fetchone()
        or db.execute(  # a file the provider refused holds no batch, but was sent
            "SELECT 1 FROM other_batches b JOIN files f ON f.pk = b.file_pk WHERE f.wave = ? LIMIT 1", (wave,)
        ).fetchone()
        or db.execute(  # a manual ingest may answer requests of a file never submitted
            f"SELECT 1 FROM requests WHERE wave = ? AND status != '{RequestState.PENDING}' LIMIT 1", (wave,)
        ).fetchone()
    )


def latest_wave_started(db: sqlite3.Connection) -> bool:
    latest = db.execute("SELECT MAX(n) FROM waves").fetchone()[0]
    return latest is not None and wave_started(db, latest)


def target_wave(db: sqlite3.Connection) -> tuple[int | None, bool]:
    """The wave to compile into and whether it exists already; None while a wave is under way.

    The latest wave may be compiled again only while none of its files has left the workspace.
    """
    latest = db.execute("SELECT n, closed_at FROM waves ORDER BY n DESC LIMIT 1").fetchone()
    if latest is None:
        return 1, False
    if latest["closed_at"] is not None:
        return latest["n"] + 1, False
    if wave_started(db, latest["n"]):
        return None, False
    return latest["n"], True


def open_wave(db: sqlite3.Connection, wave: int) -> None:
    db.execute("INSERT INTO waves (n, compiled_at) VALUES (?, ?)", (wave, clock.now()))


def drop_empty_wave(db: sqlite3.Connection, wave: int) -> None:
    """A compile that found nothing due leaves no wave behind."""
    db.execute("DELETE FROM waves WHERE n = ?", (wave,))


def discard_unsent_wave(db: sqlite3.Connection, wave: int) -> list[str]:
    """Forget a wave nothing of which has left the workspace (`target_wave` returns it as existing):
    its requests, its files and the wave itself, as if it had never been compiled. Returns the
    paths of its files, for the caller to replace or set aside.

    Compiling is deterministic, so compiling that wave again writes the same requests, byte for byte.
    """
    files = [r["path"] for r in db.execute("SELECT path FROM files WHERE wave = ?", (wave,))]
    delete_of_wave(db, wave)
    db.execute(
        "UPDATE other_batches SET file_pk = NULL WHERE file_pk IN (SELECT pk FROM files WHERE wave = ?)", (wave,)
    )
    db.execute("DELETE FROM files WHERE wave = ?", (wave,))
    db.execute("DELETE FROM waves WHERE n = ?", (wave,))
    return files


def close_finished_waves(ws: Workspace) -> None:
    """Close every wave all of whose files are done: the next compile opens a new wave."""
    with ws.store.transaction() as db:
        db.execute(
            "UPDATE waves SET closed_at = ? WHERE closed_at IS NULL AND NOT EXISTS"
            " (SELECT 1 FROM files WHERE files.wave = waves.n AND files.status NOT IN (?, ?))"
            " AND EXISTS (SELECT 1 FROM files WHERE files.wave = waves.n)",
            (clock.now(), *DONE),
        )


def work_left(ws: Workspace) -> dict[str, int]:
    """Files to submit, files in flight (of them, waiting for the user: manual; held: their
    download stayed damaged, `engine.downloads`), active threads, and all threads (the study's
    size: its progress is how many are no longer active)."""
    db = ws.store.conn

    def count(sql: str, *params: object) -> int:
        return db.execute(sql, params).fetchone()[0]

    return {
        "unsubmitted": count(f"SELECT COUNT(*) FROM files WHERE status IN ({_marks(TO_SUBMIT)})", *TO_SUBMIT),
        "in_flight": count(f"SELECT COUNT(*) FROM files WHERE status IN ({_marks(IN_FLIGHT)})", *IN_FLIGHT),
        "waiting_manual": count("SELECT COUNT(*) FROM files WHERE status = ? AND backend = 'manual'", SUBMITTED),
        "held": count("SELECT COUNT(*) FROM files WHERE status = ? AND held IS NOT NULL", DOWNLOADED),
        "active_threads": count(f"SELECT COUNT(*) FROM threads WHERE status = '{ThreadState.ACTIVE}'"),
        "threads": count("SELECT COUNT(*) FROM threads"),
    }
