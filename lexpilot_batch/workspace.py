"""A workspace: the folder holding requests/, responses/, state/ and runs/, its lock and database.

Only one process may write to a workspace at a time. The lock is an OS file lock (`filelock`:
`fcntl` on POSIX, `msvcrt` on Windows), released by the OS when its holder dies, so a killed
process never leaves the workspace locked.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import uuid
from pathlib import Path

from filelock import FileLock, Timeout

from lexpilot_batch.errors import LexpilotError, WorkspaceBusy
from lexpilot_batch.store import DB_NAME, Store

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


# What a workspace holds at its root: what a failed `prepare` that made the workspace takes away.
_PARTS = ("state", "requests", "responses", "runs")


class Workspace:
    """An open workspace. Use as a context manager; `writable=True` takes the writer lock.

    A folder that holds none is made a workspace only with `create` (the library's default; of the
    commands, `prepare` and `run` only): every other command refuses it, creating nothing there. `abandon()` takes
    back everything a workspace created by this very command holds (a `prepare` that failed).
    """

    def __init__(self, root: Path | None = None, writable: bool = True, create: bool = True) -> None:
        self.given_root = root  # as the user gave it: repeated in printed hints
        self.root = Path(root if root is not None else Path.cwd()).resolve()
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
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.writable:
            self._lock = FileLock(str(self.state_dir / "writer.lock"), timeout=0)
            try:
                self._lock.acquire()
            except Timeout:
                raise WorkspaceBusy(
                    f"{self.root}: another lexpilot-batch command is writing to this workspace; "
                    "wait for it to finish (or stop it) and run this command again"
                ) from None
        try:
            self._store = Store(self.state_dir / DB_NAME)
            if self.writable and self._store.meta("workspace_id") is None:
                self._store.set_meta("workspace_id", uuid.uuid4().hex)
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def abandon(self) -> None:
        """Close a workspace this command created and remove everything it made (a failed `prepare`
        leaves nothing behind). Does nothing to a workspace that existed before."""
        if not self.created:
            return
        self.__exit__()
        for part in _PARTS:
            folder = self.root / part
            if folder not in self._existed:
                shutil.rmtree(folder, ignore_errors=True)
                continue
            for child in folder.iterdir() if folder.is_dir() else ():
                if child not in self._existed:
                    if child.is_dir():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
        if self.root not in self._existed:
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def store(self) -> Store:
        """The open database: `store.conn` to read, `store.transaction()` to write."""
        assert self._store is not None, "workspace not open"
        return self._store

    @property
    def workspace_id(self) -> str:
        return self.store.meta("workspace_id") or ""

    def wave_dir(self, kind: str, wave: int) -> Path:
        base = self.requests_dir if kind == "requests" else self.responses_dir
        return base / f"w{wave:04d}"

    def path(self, relative: str) -> Path:
        return self.root / Path(*relative.split("/"))

    def relative(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()
