"""Which copy of a workspace a folder is: its instance.

A workspace's id (`meta.workspace_id`) travels with its folder, and so do its requests' ids, which
carry it: a copy (`cp -r`, a backup restored beside the original, a colleague's copy) asks the very
same requests under the very same ids, and an answer to one is an answer to it in either copy. What
tells the copies apart is the instance: an id of its own (`meta.instance_id`), made when the folder
is first opened for writing and made again when the folder is found to be a copy of the one it was
(`settle`), or when the user says it is one (`doctor --claim-copy`, `claim_copy`). Every batch
carries the instance that created it (`engine.recovery.batch_tag`), so that a copy cancels and adopts
only batches that are provably its own, and leaves another copy's alone.

Where a folder was last opened for writing is its place (`Place`): the machine, the folder, and the
database file's identity as the file system gives it (`os.stat`'s device and file number, on
Windows the volume serial and file index; none where it gives none). It is a copy when it is opened
on another machine or in another folder and its database is not the very file it was; it is not
when it is the same folder on the same machine (a backup restored in place of the original is the
original), nor when the database is the same file elsewhere (the folder moved or renamed, a share
mounted at another path or opened from another machine, a container mounting it). A copy put in the
original's place, or a clone of a whole machine, cannot be told: `doctor --claim-copy` says it.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lexpilot_batch.state.store import Store, read_meta, write_meta
from lexpilot_batch.util import clock

INSTANCE = "instance_id"  # meta: this folder's instance
PLACE = "instance_place"  # meta: where it was last opened for writing (`Place`, JSON)
FIRST, COPY, CLAIMED = "first", "copy", "claimed"  # `instances.why`


@dataclass(frozen=True)
class Place:
    """Where a workspace is opened: the machine, the folder, the database file's identity."""

    machine: str
    folder: str
    file: tuple[int, int] | None  # (device, file number); None where the file system gives none

    @classmethod
    def of(cls, root: Path, database: Path) -> Place:
        try:
            st = os.stat(database)
        except OSError:
            identity = None
        else:
            identity = (st.st_dev, st.st_ino) if st.st_ino else None
        return cls(platform.node(), os.path.normcase(str(root)), identity)

    @classmethod
    def from_json(cls, text: str | None) -> Place | None:
        try:
            data = json.loads(text or "")
            return cls(str(data["machine"]), str(data["folder"]), tuple(data["file"]) if data.get("file") else None)
        except (ValueError, KeyError, TypeError):
            return None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


def is_copy(was: Place, now: Place) -> bool:
    """Whether a folder last opened at `was` and opened now at `now` is a copy of that one."""
    if was.file is not None and was.file == now.file:
        return False  # the very database file: moved, renamed, mounted elsewhere
    return (was.machine, was.folder) != (now.machine, now.folder)


def new_id() -> str:
    return secrets.token_hex(8)


def settle(store: Store, root: Path, database: Path) -> str:
    """This folder's instance, opened for writing now: made for a folder that has none, made anew
    for one found to be a copy (`is_copy`), its place brought up to date otherwise; in one
    transaction. Returns its id."""
    now = Place.of(root, database)
    db = store.conn
    current, was = read_meta(db, INSTANCE), Place.from_json(read_meta(db, PLACE))
    if current is not None and was is not None and not is_copy(was, now):
        if was != now:
            store.set_meta(PLACE, now.to_json())
        return current
    with store.transaction() as tx:
        return _make(tx, current, now, COPY if current is not None else FIRST)


def claim_copy(store: Store, root: Path, database: Path) -> tuple[str | None, str]:
    """`doctor --claim-copy`: this folder is a copy, whatever `settle` found; a new instance, in
    one transaction. Returns (the instance it was, the one it is)."""
    with store.transaction() as tx:
        was = read_meta(tx, INSTANCE)
        return was, _make(tx, was, Place.of(root, database), CLAIMED)


def _make(db: sqlite3.Connection, parent: str | None, place: Place, why: str) -> str:
    """A new instance of this folder, inside the caller's transaction."""
    made = new_id()
    db.execute(
        "INSERT INTO instances (id, parent, why, place, at) VALUES (?, ?, ?, ?, ?)",
        (made, parent, why, place.to_json(), clock.now()),
    )
    write_meta(db, INSTANCE, made)
    write_meta(db, PLACE, place.to_json())
    return made


def current(db: sqlite3.Connection) -> dict[str, Any] | None:
    """This folder's instance as `status` shows it (id, parent, why, at), or None before one was made."""
    found = read_meta(db, INSTANCE)
    if found is None:
        return None
    row = db.execute("SELECT id, parent, why, at FROM instances WHERE id = ?", (found,)).fetchone()
    return dict(row) if row is not None else {"id": found, "parent": None, "why": FIRST, "at": None}
