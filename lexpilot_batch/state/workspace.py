"""A workspace: the folder holding requests/, responses/, state/ and runs/, its lock and database.

Only one process may write to a workspace at a time. The lock is an OS file lock (`filelock`:
`fcntl` on POSIX, `msvcrt` on Windows), released by the OS when its holder dies, so a killed
process never leaves the workspace locked.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import re
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from lexpilot_batch.errors import LexpilotError, NoSpace, ReadOnlyWorkspace, WorkspaceBusy
from lexpilot_batch.state import instances, writer
from lexpilot_batch.state.store import DB_NAME, Store
from lexpilot_batch.util.fileio import TMP_SUFFIX, unlink_quietly

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Windows opens these as devices, whatever follows the first dot: `nul.txt` is NUL, `COM1.log` COM1.
_DEVICES = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))})


_SAFE_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


def slug(text: str, length: int = 40) -> str:
    """A filesystem-safe name (also on Windows) that stays unique through a short hash."""
    readable = _UNSAFE.sub("-", text).strip(".-")[:length] or "x"
    name = f"{readable}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"
    return "_" + name if _is_device(name) else name


def seed_name(text: str) -> str:
    """The folder the seed's result layout names after a run id or model: `text` itself when it is
    already a safe file name everywhere, as the original code writes it; otherwise a slug whose hash
    follows a `+`, which no name kept as it is can hold, so the two kinds never meet.

    Kept as it is: 1-100 of `[A-Za-z0-9._-]`, not ending in a dot (Windows drops it: `run.` would be
    `run`), so neither `.` nor `..`, and no Windows device name (`NUL`, `com1.txt`).
    """
    if _SAFE_NAME.fullmatch(text) and not text.endswith(".") and not _is_device(text):
        return text
    readable = _UNSAFE.sub("-", text).strip(".-")[:40] or "x"
    name = f"{readable}+{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"
    return "_" + name if _is_device(name) else name


def _is_device(name: str) -> bool:
    return name.split(".")[0].upper() in _DEVICES


def shell_word(text: str | Path) -> str:
    """`text` as one word of a printed command: double-quoted when it holds spaces or characters a
    shell reads (the same on POSIX shells, cmd and PowerShell for ordinary paths)."""
    shown = str(text)
    if not shown or any(c.isspace() or c in "'\"&;|<>()$`" for c in shown):
        shown = '"' + shown.replace('"', '\\"') + '"'
    return shown


def command_hint(args: str, root: Path | str | None = None) -> str:
    """`lexpilot-batch ARGS`, with the `--root` the user gave, so that a printed hint can be run as
    it stands from where the user is."""
    if root is None:
        return f"lexpilot-batch {args}"
    return f"lexpilot-batch {args} --root {shell_word(root)}"


# What a workspace holds at its root: what a failed first `prepare` that recorded nothing takes away.
_PARTS = ("state", "requests", "responses", "runs")
LOCK_NAME = "writer.lock"  # under state/: held by the one command that writes
# How long a writer waits for the lock: long enough for `status` to have tried it (`writer.busy`).
LOCK_WAIT = 1.0
# The folders a command writes files into through a temporary name beside the final one: a file of
# these names found there under the writer lock is the leftover of a command that was stopped.
_WRITTEN = ("requests", "responses", "runs")
LEFTOVERS = (
    f".*{TMP_SUFFIX}",  # `fileio.temp_path`: any file written whole or not at all
    ".building-*",  # `request_files.WaveWriter`: a shard being compiled
    ".candidate-*",  # `batches`: an untagged batch's results looked at aside
)


class Workspace:
    """An open workspace. Use as a context manager; `writable=True` takes the writer lock.

    A folder that holds none is made a workspace only with `create` (the library's default; of the
    commands, `prepare` and `run` only): every other command refuses it, creating nothing there.
    Once anything is recorded in it (a run registered, a file compiled), no command ever deletes it:
    `abandon()` takes back a workspace this very command created only while it records nothing (a
    first `prepare` refused for its dataset), and otherwise leaves it to be resumed.

    A workspace that cannot be written to (an archive, a read-only mount) is opened read-only by
    readers (`writable=False`); writers are refused, saying so (`ReadOnlyWorkspace`).
    """

    def __init__(self, root: Path | None = None, writable: bool = True, create: bool = True) -> None:
        self.given_root = root  # as the user gave it: repeated in printed hints
        # `--root '~/study'` (quoted, or on Windows, where no shell expands it) means the home folder's.
        self.root = Path(root if root is not None else Path.cwd()).expanduser().resolve()
        self.writable = writable
        self.create = create and writable
        self.created = False  # this command made the workspace: `abandon` may take it back
        self._existed: set[Path] = set()
        self.state_dir = self.root / "state"
        self.requests_dir = self.root / "requests"
        self.responses_dir = self.root / "responses"
        self.runs_dir = self.root / "runs"
        self._lock: FileLock | None = None
        self._store: Store | None = None

    def command(self, args: str) -> str:
        """A hint naming a command on this workspace (`command_hint`)."""
        return command_hint(args, self.given_root)

    def __enter__(self) -> Workspace:
        if self.root.exists() and not self.root.is_dir():
            raise LexpilotError(f"{self.root}: --root must be a folder")
        if not (self.state_dir / DB_NAME).exists():
            if not self.create:
                raise LexpilotError(
                    f"{self.root}: no lexpilot-batch workspace here (no state/{DB_NAME}), so nothing was done; "
                    f"check --root, or start one with `{self.command('prepare --stage all --run-id run1 --model M')}`"
                )
            self.created = True
            self._existed = {p for p in (self.root, *(self.root / part for part in _PARTS)) if p.exists()}
            self._existed |= {
                child for part in _PARTS if (self.root / part).is_dir() for child in (self.root / part).iterdir()
            }
        try:
            with disk_errors(self.root):
                self._open()
        except BaseException:
            self._close_store()
            if self.created and self._lock is not None:
                # Nothing can be recorded in a database that did not open. Only a command that
                # holds the lock takes anything back: one that lost the race for it (another
                # command making the same new workspace) would remove the winner's workspace.
                self._take_back()
            self._release()
            raise
        return self

    def _open(self) -> None:
        if self.writable:
            try:
                self.state_dir.mkdir(parents=True, exist_ok=True)
                self._lock = FileLock(str(self.state_dir / LOCK_NAME), timeout=LOCK_WAIT)
                self._lock.acquire()
                writer.record(self.state_dir)
                if self.created and (self.state_dir / DB_NAME).exists():
                    # Another command made this workspace between our look and our lock (and has
                    # finished): it is its, never this command's to take back.
                    self.created = False
            except Timeout:
                self._lock = None
                raise WorkspaceBusy(
                    f"{self.root}: {writer.described(self.state_dir)} is writing to this workspace; "
                    "wait for it to finish (or stop it) and run this command again"
                ) from None
            except OSError as exc:
                self._lock = None
                if not _read_only_error(exc):
                    raise
                raise ReadOnlyWorkspace(
                    f"{self.root}: the workspace is read-only ({exc.strerror or exc}), so this command, which "
                    "writes to it, did nothing; status, report, export and doctor read it as it is. To go on "
                    "with it, copy it to a writable folder (or make this one writable) and run the command there"
                ) from None
        self._store = Store(self.state_dir / DB_NAME, readonly=not self.writable)
        if self.writable:
            if self._store.meta("workspace_id") is None:
                self._store.set_meta("workspace_id", uuid.uuid4().hex)
            # Which copy of the workspace this folder is: a new instance when it is found to be a copy.
            instances.settle(self._store, self.root, self.state_dir / DB_NAME)
            remove_leftovers(self.root)

    def __exit__(self, exc_type: object = None, exc: BaseException | None = None, tb: object = None) -> None:
        self._close_store()
        self._release()
        if exc is not None and is_disk_full(exc):
            with disk_errors(self.root):
                raise exc

    def _close_store(self) -> None:
        if self._store is not None:
            with contextlib.suppress(sqlite3.Error):  # closing a connection on a full disk
                self._store.close()
            self._store = None

    def _release(self) -> None:
        if self._lock is not None:
            writer.forget(self.state_dir)
            self._lock.release()
            self._lock = None

    def records_anything(self) -> bool:
        """Whether the database records work: a run registered or a request file compiled. True
        when it cannot tell (a database that no longer answers): such a workspace is kept."""
        if self._store is None:
            return (self.state_dir / DB_NAME).exists()
        try:
            db = self._store.conn
            return bool(db.execute("SELECT EXISTS (SELECT 1 FROM runs) OR EXISTS (SELECT 1 FROM files)").fetchone()[0])
        except sqlite3.Error:
            return True

    def abandon(self) -> bool:
        """After a command that created this workspace failed: remove it again, but only while it
        records nothing (`records_anything`), so that a refused first `prepare` leaves the folder as
        it was. Once a run is registered or a file compiled it is kept, to be resumed by running the
        same command again: nothing paid for is ever thrown away. Returns whether it was removed."""
        if not self.created or self.records_anything():
            return False
        self._close_store()
        self._take_back()
        self._release()
        return True

    def _take_back(self) -> None:
        """Remove what this command made of the workspace (never what was in the folder before),
        holding the writer's lock: everything but the lock file first; then, the lock released,
        the lock file and its folders only where no other command has made a database meanwhile
        (one that locked in between keeps its workspace)."""
        lock = self.state_dir / LOCK_NAME
        self._remove_made(keep=lock)
        self._release()
        if not (self.state_dir / DB_NAME).exists():
            self._remove_made(keep=None)

    def _remove_made(self, keep: Path | None) -> None:
        def remove(path: Path) -> None:
            if keep is not None and (path == keep or keep.is_relative_to(path)):
                for child in path.iterdir() if path != keep and path.is_dir() else ():
                    remove(child)
            elif path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                # Quietly: on Windows a lock file that another command has just locked (or a file a
                # scanner holds) cannot be removed, and is theirs to keep.
                unlink_quietly(path)

        for part in _PARTS:
            folder = self.root / part
            if folder not in self._existed:
                remove(folder)
                continue
            for child in folder.iterdir() if folder.is_dir() else ():
                if child not in self._existed:
                    remove(child)
        if self.root not in self._existed:
            remove(self.root)

    @property
    def store(self) -> Store:
        """The open database: `store.conn` to read, `store.transaction()` to write."""
        assert self._store is not None, "workspace not open"
        return self._store

    @property
    def workspace_id(self) -> str:
        return self.store.meta("workspace_id") or ""

    @property
    def instance_id(self) -> str:
        """Which copy of the workspace this folder is (`state.instances`); "" before it was first
        opened for writing by a version that knows."""
        return self.store.meta(instances.INSTANCE) or ""

    def claim_copy(self) -> tuple[str | None, str]:
        """This folder is a copy of the workspace it was copied from: a new instance (`doctor --claim-copy`)."""
        return instances.claim_copy(self.store, self.root, self.state_dir / DB_NAME)

    def wave_dir(self, kind: str, wave: int) -> Path:
        base = self.requests_dir if kind == "requests" else self.responses_dir
        return base / f"w{wave:04d}"

    def path(self, relative: str) -> Path:
        return self.root / Path(*relative.split("/"))

    def relative(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()


# --- what a stopped command leaves, and a full or read-only disk ---------------------------------


def remove_leftovers(root: Path) -> list[Path]:
    """Remove the temporary files stopped commands left in a workspace's folders (`LEFTOVERS`).

    Called under the writer lock, when no other command can be writing them. Returns what it removed.
    """
    removed = []
    for part in _WRITTEN:
        folder = root / part
        if not folder.is_dir():
            continue
        for path in folder.rglob(".*"):
            leftover = any(fnmatch.fnmatchcase(path.name, pattern) for pattern in LEFTOVERS)
            if leftover and path.is_file() and unlink_quietly(path):
                removed.append(path)
    return removed


_NO_SPACE = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


def _read_only_error(exc: OSError) -> bool:
    return isinstance(exc, PermissionError) or exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` says the device is full: an `OSError` ENOSPC/EDQUOT, or SQLite's SQLITE_FULL."""
    if isinstance(exc, OSError):
        return exc.errno in _NO_SPACE
    if isinstance(exc, sqlite3.OperationalError):
        return "database or disk is full" in str(exc)
    return False


@contextmanager
def disk_errors(root: Path) -> Iterator[None]:
    """Inside it, a full device becomes one clear `NoSpace` naming the workspace. Every write of
    a workspace is a transaction or a whole-file replace, so what is on disk is the state before
    the write that failed: freeing space and running the same command again goes on from there."""
    try:
        yield
    except (OSError, sqlite3.OperationalError) as exc:
        if not is_disk_full(exc):
            raise
        where = getattr(exc, "filename", None) or root
        raise NoSpace(
            f"no space left on the device holding {where}; nothing was lost (the workspace holds what was done "
            "before the write that failed): free space and run the same command again"
        ) from None
