"""Who holds a workspace's writer lock: recorded beside the lock (`state/writer.json`: process id,
command, since when) by the command that takes it, removed when it lets go, so that a command
refused for the lock (`workspace.Workspace`) and `status` (`busy`) can name the other process.

A command killed outright leaves its record behind, but never the lock (the OS releases it):
`busy` tests the lock itself, and a record is only believed while the lock is held.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

from filelock import FileLock, Timeout

from lexpilot_batch.util import clock
from lexpilot_batch.util.fileio import unlink_quietly, write_atomic
from lexpilot_batch.util.redaction import redact

WRITER_NAME = "writer.json"


def record(state_dir: Path) -> None:
    """Say who holds the lock (called by its holder, just after taking it)."""
    from lexpilot_batch.state.workspace import shell_word

    command = " ".join(["lexpilot-batch", *(shell_word(a) for a in sys.argv[1:])])
    about = {"pid": os.getpid(), "command": redact(command)[:500], "since": clock.now()}
    with contextlib.suppress(OSError):  # only a courtesy to other commands: never a reason to stop this one
        write_atomic(state_dir / WRITER_NAME, json.dumps(about, ensure_ascii=False).encode("utf-8"))


def forget(state_dir: Path) -> None:
    """Remove the record (called by the holder, just before letting go of the lock)."""
    unlink_quietly(state_dir / WRITER_NAME)


def described(state_dir: Path) -> str:
    """The lock's holder as its record says: "process 1234 (`lexpilot-batch run ...`, since 01:02 UTC)",
    or "another lexpilot-batch command" without a readable record."""
    try:
        about = json.loads((state_dir / WRITER_NAME).read_text(encoding="utf-8"))
        since = time.strftime("%H:%M:%S UTC", time.gmtime(float(about["since"])))
        return f"process {int(about['pid'])} (`{about['command']}`, since {since})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another lexpilot-batch command"


def _own(state_dir: Path) -> bool:
    """Whether the record names this very process (it holds the lock itself: nobody else writes)."""
    try:
        return int(json.loads((state_dir / WRITER_NAME).read_text(encoding="utf-8"))["pid"]) == os.getpid()
    except (OSError, ValueError, KeyError, TypeError):
        return False


def busy(state_dir: Path, lock_name: str) -> str | None:
    """Who else is writing to the workspace now (`described`), or None when nobody holds the lock or
    this process does (a command that holds it asks what is next: only itself writes). Takes
    the lock for an instant to tell; a writer starting in that instant waits for it
    (`workspace.LOCK_WAIT`). None too where the lock cannot be tried (a read-only folder)."""
    lock_path = state_dir / lock_name
    if not lock_path.exists():
        return None
    lock = FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        return None if _own(state_dir) else described(state_dir)
    except OSError:
        return None
    lock.release()
    return None
