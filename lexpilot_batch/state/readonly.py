"""Opening a workspace database that may not be written to (an archive, a read-only mount, a share
Windows will not write to): whether it can be, and SQLite's read-only URI for it, on POSIX and
Windows alike. `store.Store` opens through it."""

from __future__ import annotations

import os
import secrets
import sqlite3
from pathlib import Path, PurePath, PureWindowsPath

from lexpilot_batch.util.fileio import unlink_quietly


def writable(path: Path) -> bool:
    """Whether the database and its folder can be written to (SQLite writes its log beside it)."""
    folder = _can_create_in(path.parent) if os.name == "nt" else os.access(path.parent, os.W_OK)
    return folder and (not path.exists() or os.access(path, os.W_OK))


def _can_create_in(folder: Path) -> bool:
    """Whether a file can be created in `folder`, tried with a file of a name of its own.

    On Windows `os.access(folder, os.W_OK)` is always true: it only reads the read-only attribute,
    which Windows ignores for a folder (CPython's `os_access_impl`, Modules/posixmodule.c), and says
    nothing of the permissions (ACLs) or of a read-only share. `O_EXCL` never opens a file that is
    there already; `O_TEMPORARY` (Windows' FILE_FLAG_DELETE_ON_CLOSE) has the file removed when it
    is closed, even if the process is killed first, so nothing is left behind.
    """
    probe = folder / f".lexpilot-write-probe-{secrets.token_hex(8)}"
    temporary = getattr(os, "O_TEMPORARY", 0)
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY | temporary, 0o600)
    except OSError:
        return False
    os.close(fd)
    if not temporary:
        unlink_quietly(probe)
    return True


def open_for_reading(path: Path) -> sqlite3.Connection:
    """A plain connection to read a workspace database, read-only where it cannot be written to."""
    return open_read_only(path) if not writable(path) else sqlite3.connect(path)


def open_read_only(path: Path) -> sqlite3.Connection:
    wal = path.with_name(path.name + "-wal")
    # Without a log the file holds every commit: `immutable` then needs no `-shm` beside it, which a
    # read-only folder could not hold. With one, SQLite reads the commits it holds (its `-shm` too).
    flags = "mode=ro&immutable=1" if not wal.exists() else "mode=ro"
    return sqlite3.connect(f"{sqlite_uri(path.resolve())}?{flags}", uri=True, isolation_level=None, timeout=30.0)


def sqlite_uri(path: PurePath) -> str:
    """The `file:` URI SQLite opens `path` (absolute) by, on POSIX and Windows alike.

    Not `Path.as_uri()`: for a UNC path (`\\\\server\\share\\ws`) that is `file://server/share/ws`,
    whose authority SQLite refuses ("invalid uri authority"): it must be empty or `localhost`
    (https://www.sqlite.org/uri.html). Here the authority is always empty, and the path follows:
    `file:///home/me/ws`, `file:///C:/Users/me/ws` (SQLite drops the `/` before a drive letter),
    `file:////server/share/ws` (the path `//server/share/ws`, which Windows reads as the UNC path).
    `%`, `?` and `#` are percent-encoded: SQLite decodes `%HH` in the path, and `?` and `#` would end it.
    """
    text = path.as_posix()
    if isinstance(path, PureWindowsPath) and path.drive.endswith(":"):
        text = "/" + text  # C:/Users/... -> /C:/Users/...
    return "file://" + text.replace("%", "%25").replace("?", "%3F").replace("#", "%23")
