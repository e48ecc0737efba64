"""Compact workspaces: the request and result files of finished waves, kept gzip-compressed.

A wave's request files are read while it is open (uploaded, run by the sync backend or by you for
the manual backend) and its result files until they are ingested; once the wave is closed nothing
in the product reads either again, and they are kept as a record of what was sent and received.
Kept plain they are most of a workspace (full prompts: 0.7 GB for the 5-run benchmark), so
`poll-and-advance` compresses them (`compact_finished_waves`) into `NAME.gz` beside where `NAME`
was: a standard gzip file (`zcat`, `gzip -d`) holding the same bytes. The open wave's files stay
plain. A closed wave's files are each ingested or lost (`waves.DONE`): a lost file's requests were
asked again in a later wave, and `retry` makes threads due again in a new wave, so neither reads an
old request file. Batches kept aside (`other_batches`: duplicates, quota refusals) have no files
here: their results are never downloaded.

Each compacted file is recorded in the `compacted` table with the SHA-256 and size of its plain
bytes, so it stays verifiable (`verify`): a request file against the hash recorded when it was
compiled, a result file against the hash taken when it was compacted. Compacting one file is
crash-safe: the `.gz` is written whole (`fileio.atomic_file`) and recorded before the plain file
is removed, and a run that stops in between is finished by the next one.

Whatever reads a saved file that may be compacted goes through this module (`open_saved`,
`read_saved`, `saved_exists`, `saved_files`): it reads the plain file where there is one, the
compressed one otherwise.

Compressing is off the engine's critical path: `Compactor` gzips on a worker thread while the next
wave is compiled, submitted and polled, and records what it packed from the caller's thread (the
database is one connection, never shared with the worker), at the start of the next round or when
the command ends. The worker only reads plain files and writes whole `.gz` files; nothing it does
needs undoing if the process stops, since an unrecorded `.gz` is simply made again.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from lexpilot_batch.state.waves import DONE
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock
from lexpilot_batch.util.fileio import atomic_file, file_sha256, unlink_quietly
from lexpilot_batch.util.waiting import result

SUFFIX = ".gz"
# zlib level 1: the 1x benchmark's 0.72 GB of finished files -> 57 MB, twice as fast as the default
# level 6 (32 MB); the workspace stays well under its 150 MB bound and the worker's CPU, which
# competes with compiling on a two-core machine, is halved.
LEVEL = 1
_CHUNK = 1 << 20


def stored(path: Path) -> Path:
    """Where a compacted `path` is kept."""
    return path.with_name(path.name + SUFFIX)


def saved_exists(path: Path) -> bool:
    """Whether the file is kept, plain or compacted."""
    return path.exists() or stored(path).exists()


def open_saved(path: Path) -> BinaryIO:
    """The file's plain bytes for reading, from the plain file or its compacted copy.

    `FileNotFoundError` names `path` when neither exists.
    """
    try:
        return open(path, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        packed = stored(path)
        if not packed.exists():
            raise
        return gzip.open(packed, "rb")  # type: ignore[return-value]


def read_saved(path: Path) -> bytes:
    with open_saved(path) as fh:
        return fh.read()


def saved_files(folder: Path, pattern: str = "*.jsonl") -> list[Path]:
    """The files under `folder` matching `pattern`, plain or compacted, each by its plain path, sorted
    (hidden ones, being written, left out)."""
    found = {p for p in folder.rglob(pattern) if not p.name.startswith(".")}
    found |= {p.with_name(p.name[: -len(SUFFIX)]) for p in folder.rglob(pattern + SUFFIX) if not p.name.startswith(".")}
    return sorted(found)


# --- compacting ---------------------------------------------------------------------------------


@dataclass
class CompactStats:
    files: int = 0
    bytes: int = 0  # plain bytes compacted
    stored_bytes: int = 0  # what they take now
    skipped: list[str] = field(default_factory=list)  # request files changed since they were compiled

    def add(self, packed: Packed) -> None:
        self.files += 1
        self.bytes += packed[2]
        self.stored_bytes += packed[3]


def compact_finished_waves(ws: Workspace) -> CompactStats:
    """Compress every request and result file of the closed waves that is still plain, now."""
    stats = CompactStats()
    for rel, expected in _todo(ws).items():
        packed = _pack(ws, rel, expected)
        if packed is None:
            stats.skipped.append(rel)
            continue
        _record(ws, [packed])
        unlink_quietly(ws.path(rel))
        stats.add(packed)
    return stats


def _todo(ws: Workspace) -> dict[str, str | None]:
    """The closed waves' files still plain: path -> the SHA-256 its bytes must have (request files).
    Finishes what a command that stopped half-way left: a recorded `.gz` whose plain file remains."""
    db = ws.store.conn
    done = {r[0]: (r[1], r[2]) for r in db.execute("SELECT path, sha256, stored_bytes FROM compacted")}
    todo: dict[str, str | None] = {}
    # A closed wave's files are all done (`waves.DONE`): ingested, or lost by the provider (its
    # requests went to a later wave; nothing reads its request file again, and it has no results).
    for r in db.execute(
        f"SELECT f.wave, f.path, f.sha256, f.output_path, f.error_path FROM files f JOIN waves w ON w.n = f.wave"
        f" WHERE w.closed_at IS NOT NULL AND f.status IN ({', '.join('?' * len(DONE))}) ORDER BY f.pk",
        DONE,
    ):
        todo.setdefault(r["path"], r["sha256"])
        for rel in (r["output_path"], r["error_path"]):
            if rel:
                todo.setdefault(rel, None)
    out: dict[str, str | None] = {}
    for rel, expected in todo.items():
        plain = ws.path(rel)
        if rel in done and _stored_size(plain) == done[rel][1]:
            # Compacted and recorded; a command may have stopped before the plain file was removed.
            if file_sha256(plain) == done[rel][0]:
                unlink_quietly(plain)
            continue
        if plain.exists():
            out[rel] = expected
    return out


Packed = tuple[str, str, int, int]  # (path, SHA-256 and size of the plain bytes, size stored)


def _pack(ws: Workspace, rel: str, expected: str | None, stop: threading.Event | None = None) -> Packed | None:
    """Write `rel`'s `.gz` whole; None (and no `.gz`) for a request file whose bytes are not the ones
    compiled, or when `stop` is set. Touches no database: it may run on the worker."""
    plain = ws.path(rel)
    packed = stored(plain)
    digest = hashlib.sha256()
    size = 0
    try:
        with atomic_file(packed) as raw:
            # No name and mtime 0: the same plain bytes always make the same compressed bytes.
            with (
                open(plain, "rb") as src,
                gzip.GzipFile(filename="", mode="wb", compresslevel=LEVEL, fileobj=raw, mtime=0) as gz,
            ):
                for chunk in iter(lambda: src.read(_CHUNK), b""):
                    if stop is not None and stop.is_set():
                        raise _Changed  # stopping: the half-made copy is removed
                    digest.update(chunk)
                    size += len(chunk)
                    gz.write(chunk)
            if expected is not None and digest.hexdigest() != expected:
                raise _Changed  # the half-made copy is removed, nothing is recorded
    except _Changed:
        # Not what was compiled (and sent): left plain, so that nothing hides the difference.
        return None
    return rel, digest.hexdigest(), size, packed.stat().st_size


def _record(ws: Workspace, packed: list[Packed]) -> None:
    """The compressed copies are whole: record them, in one transaction, before the plain files go.
    A kill before it leaves `.gz` files nothing records (packed again by the next command); after
    it, plain files beside their recorded copies (removed by the next command)."""
    with ws.store.transaction() as db:
        db.executemany(
            "INSERT OR REPLACE INTO compacted (path, sha256, bytes, stored_bytes, at) VALUES (?, ?, ?, ?, ?)",
            [(*p, clock.now()) for p in packed],
        )


class Compactor:
    """Compacts finished waves on one worker thread while the caller goes on (the module docstring).

    `run` records what the worker packed since the last call (returning it), then hands it the files
    finished since; `finish` waits for the worker and records the rest. Only the caller's thread
    touches the database.
    """

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.pool: ThreadPoolExecutor | None = None
        self.pending: Future[list[tuple[str, Packed | None]]] | None = None
        self.stop = threading.Event()
        self.worker_seconds = 0.0  # the worker's time packing, for the bench

    def run(self) -> CompactStats:
        stats = self.collect()
        todo = _todo(self.ws)
        if todo:
            if self.pool is None:
                self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="compaction")
            self.pending = self.pool.submit(self._pack_all, todo)
        return stats

    def _pack_all(self, todo: dict[str, str | None]) -> list[tuple[str, Packed | None]]:
        start = time.perf_counter()
        try:
            return [(rel, _pack(self.ws, rel, expected, self.stop)) for rel, expected in todo.items()]
        finally:
            self.worker_seconds += time.perf_counter() - start

    def collect(self) -> CompactStats:
        """Wait for the worker's current files and record them; their plain files are then removed."""
        stats = CompactStats()
        if self.pending is None:
            return stats
        pending, self.pending = self.pending, None
        # In steps (`waiting`): packing a wave can take a minute, and a bare wait would not let
        # Ctrl-C through on Windows before Python 3.14. Raises what the worker raised.
        packed = result(pending)
        done = [p for _, p in packed if p is not None]
        if done:
            _record(self.ws, done)
        for rel, p in packed:
            if p is None:
                if not self.stop.is_set():
                    stats.skipped.append(rel)
                continue
            unlink_quietly(self.ws.path(rel))
            stats.add(p)
        return stats

    def finish(self) -> CompactStats:
        """Wait for the worker, record what it packed, and stop it.

        Ctrl-C (or the worker's error) during the wait abandons the rest (`abandon`): the worker
        stops at its next chunk rather than being waited for through every file it was given, in
        a join that Ctrl-C could not stop on Windows. Once `collect` has returned the worker is
        idle, and shutting it down is at once."""
        try:
            stats = self.collect()
        except BaseException:
            self.abandon()
            raise
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        return stats

    def abandon(self) -> None:
        """Stop the worker at its next chunk without recording anything (an error or Ctrl-C): what
        it had packed is made again by the next command."""
        self.stop.set()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
        self.pending = None
        self.stop.clear()


class _Changed(Exception):
    """A request file whose bytes are not the ones compiled."""


def _stored_size(plain: Path) -> int | None:
    try:
        return stored(plain).stat().st_size
    except FileNotFoundError:
        return None


# --- checking -----------------------------------------------------------------------------------


def verify(ws: Workspace) -> list[str]:
    """What is wrong with the compacted files, one line each (nothing: every one is there and holds
    the bytes recorded, and each request file the bytes it was compiled as). Reads them all."""
    db = ws.store.conn
    compiled = {r[0]: r[1] for r in db.execute("SELECT path, sha256 FROM files")}
    problems = []
    for r in db.execute("SELECT path, sha256, bytes FROM compacted ORDER BY path"):
        plain = ws.path(r["path"])
        if not stored(plain).exists():
            if not plain.exists():
                problems.append(f"{r['path']}{SUFFIX} is gone")
            continue
        digest = hashlib.sha256()
        size = 0
        try:
            with gzip.open(stored(plain), "rb") as fh:
                for chunk in iter(lambda: fh.read(_CHUNK), b""):  # noqa: B023 - fh is this iteration's
                    digest.update(chunk)
                    size += len(chunk)
        except (OSError, EOFError) as exc:
            problems.append(f"{r['path']}{SUFFIX} cannot be read ({exc})")
            continue
        if digest.hexdigest() != r["sha256"] or size != r["bytes"]:
            problems.append(f"{r['path']}{SUFFIX} does not hold the {r['bytes']} bytes it was compacted from")
        elif r["path"] in compiled and compiled[r["path"]] != r["sha256"]:
            problems.append(f"{r['path']}{SUFFIX} does not hold the request file as it was compiled")
    return problems


def missing(ws: Workspace) -> list[str]:
    """Files of finished waves kept neither compressed nor plain: those compacted, and those gone
    before they could be (the compactor finds nothing to pack and records nothing). A cheap check:
    no file is read."""
    marks = ", ".join("?" * len(DONE))
    finished = ws.store.conn.execute(
        "SELECT path FROM compacted UNION SELECT path FROM files WHERE status IN (" + marks + ")"
        " UNION SELECT output_path FROM files WHERE status IN (" + marks + ") AND output_path IS NOT NULL"
        " UNION SELECT error_path FROM files WHERE status IN (" + marks + ") AND error_path IS NOT NULL ORDER BY 1",
        (*DONE, *DONE, *DONE),
    )
    return [r[0] for r in finished if not saved_exists(ws.path(r[0]))]
