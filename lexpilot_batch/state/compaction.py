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
"""

from __future__ import annotations

import gzip
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from lexpilot_batch.state.waves import DONE
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util.fileio import atomic_file, file_sha256, unlink_quietly

SUFFIX = ".gz"
LEVEL = 6  # zlib's default: 1x benchmark workspace 0.72 GB of files -> 32 MB (level 1: 57 MB, 2x faster)
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


def compact_finished_waves(ws: Workspace) -> CompactStats:
    """Compress every request and result file of the closed waves that is still plain."""
    stats = CompactStats()
    db = ws.store.conn
    done = {r[0]: (r[1], r[2]) for r in db.execute("SELECT path, sha256, stored_bytes FROM compacted")}
    todo: dict[str, str | None] = {}  # path -> the SHA-256 its bytes must have (request files)
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
    for rel, expected in todo.items():
        plain = ws.path(rel)
        if rel in done and _stored_size(plain) == done[rel][1]:
            # Compacted and recorded; a command may have stopped before the plain file was removed.
            if file_sha256(plain) == done[rel][0]:
                unlink_quietly(plain)
            continue
        if plain.exists():
            _compact(ws, rel, expected, stats)
    return stats


def _compact(ws: Workspace, rel: str, expected: str | None, stats: CompactStats) -> None:
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
                    digest.update(chunk)
                    size += len(chunk)
                    gz.write(chunk)
            if expected is not None and digest.hexdigest() != expected:
                raise _Changed  # the half-made copy is removed, nothing is recorded
    except _Changed:
        # Not what was compiled (and sent): left plain, so that nothing hides the difference.
        stats.skipped.append(rel)
        return
    stored_bytes = packed.stat().st_size
    _record(ws, rel, digest.hexdigest(), size, stored_bytes)
    unlink_quietly(plain)
    stats.files += 1
    stats.bytes += size
    stats.stored_bytes += stored_bytes


def _record(ws: Workspace, rel: str, sha256: str, size: int, stored_bytes: int) -> None:
    """The compressed copy is whole: record it, before the plain file goes."""
    with ws.store.transaction() as db:
        db.execute(
            "INSERT OR REPLACE INTO compacted (path, sha256, bytes, stored_bytes, at) VALUES (?, ?, ?, ?, ?)",
            (rel, sha256, size, stored_bytes, time.time()),
        )


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
    """Compacted files kept neither compressed nor plain: a cheap check (no file is read)."""
    return [
        r[0]
        for r in ws.store.conn.execute("SELECT path FROM compacted ORDER BY path")
        if not saved_exists(ws.path(r[0]))
    ]
