"""Files written whole or not at all, and their hashes.

Every file the product writes for keeps (request and result files, manifests, exports, the
simulated provider's state) goes through `write_atomic`: a crash leaves the old file or the new
one, never half of one. Windows refuses to replace a file another process holds open (a virus
scanner, an indexer, a reader), so the replace is retried for a moment before giving up.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from lexpilot_batch.util import clock

_REPLACE_TRIES = 20
_REPLACE_PAUSE = 0.05  # seconds between tries: a second in all
TMP_SUFFIX = ".tmp"  # `.<name>.<random>.tmp` beside the target, until it replaces it


def write_atomic(path: Path, data: bytes | memoryview | Iterable[bytes]) -> None:
    """Write `data` (bytes, or chunks of them as they arrive) to `path` whole or not at all
    (creating its folder)."""
    with atomic_file(path) as fh:
        if isinstance(data, (bytes, bytearray, memoryview)):
            fh.write(data)
        else:
            for chunk in data:
                fh.write(chunk)


@contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A file to write `path` through, whole or not at all: it replaces `path` when the block ends
    without an error, and is removed otherwise (creating its folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace(source: Path, target: Path) -> None:
    """`os.replace(source, target)`, tried again for a moment while Windows refuses it because
    another process holds one of them open (a sharing violation, `PermissionError`)."""
    for attempt in range(_REPLACE_TRIES):
        try:
            os.replace(source, target)
            return
        except PermissionError:
            if attempt == _REPLACE_TRIES - 1:
                raise
            clock.pause(_REPLACE_PAUSE)


def temp_path(path: Path) -> Path:
    """Where `path` is written before it replaces the target: `.<name>.<random>.tmp` beside it."""
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")


# Windows' ERROR_SHARING_VIOLATION and ERROR_LOCK_VIOLATION: another program holds the file open (a
# spreadsheet showing report.csv), so that it may not be replaced or written
# (https://learn.microsoft.com/en-us/windows/win32/debug/system-error-codes--0-499-).
HELD_OPEN = (32, 33)
HELD_OPEN_ADVICE = "close it there and run the same command again"


def held_open(exc: OSError) -> bool:
    """Whether Windows refused a file because another program holds it open: not a permission the
    user lacks, nor a folder that cannot be written to."""
    return isinstance(exc, PermissionError) and getattr(exc, "winerror", None) in HELD_OPEN


def cannot_write(path: Path, exc: OSError, advice: str) -> str:
    """The message for `path` not written: that it is open in another program (`held_open`), else
    the system's reason and `advice`."""
    if held_open(exc):
        return f"cannot write {path}: it is open in another program; {HELD_OPEN_ADVICE}"
    return f"cannot write {path} ({exc.strerror or exc}); {advice}"


_TEMP_NAME = re.compile(r"\.(.+)\.[0-9a-f]{8}" + re.escape(TMP_SUFFIX))


def temp_target(path: Path) -> Path | None:
    """The file a `temp_path` stands for (`.report.csv.54c36557.tmp`: `report.csv`), else None: an
    error on the temporary file is told of the file asked for, the only one the user knows."""
    match = _TEMP_NAME.fullmatch(path.name)
    return path.with_name(match.group(1)) if match else None


def unlink_quietly(path: Path) -> bool:
    """Remove a file if it is there; whether it was removed. Windows refuses to remove a file
    another process holds open (a scanner, an indexer): it is left for the next command."""
    try:
        path.unlink()
    except (FileNotFoundError, PermissionError):
        return False
    return True


def file_sha256(path: Path) -> str | None:
    """The SHA-256 of a file's bytes, or None when there is no such file."""
    if not path.exists():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
