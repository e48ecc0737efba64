"""The workspace's SQLite state: the open database and its transactions.

One database per workspace (`state/lexpilot.sqlite3`, WAL). At open time it is brought to the
newest named version by `state/migrations.py`, each migration in the transaction that records it.
Never edit a released migration: append a new one there.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lexpilot_batch.errors import LexpilotError, WorkspaceBusy
from lexpilot_batch.state.migrations import MIGRATIONS, migrate
from lexpilot_batch.state.readonly import open_for_reading as open_for_reading  # where readers took it from
from lexpilot_batch.state.readonly import open_read_only, writable

DB_NAME = "lexpilot.sqlite3"


class Store:
    """The open database. Writes go through `transaction()`; reads may happen anywhere.

    `readonly`: opened for reading only, for the commands that only read. Where the workspace can
    be written to, that changes nothing (the usual connection, migrated); where it cannot (an
    archive, a read-only mount), the database is opened with SQLite's read-only URI: as `immutable`
    when no write-ahead log is left beside it (the database file then holds every commit), and
    through its log otherwise.
    """

    def __init__(self, path: Path, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly and not writable(path)
        try:
            if self.readonly:
                self.conn = open_read_only(path)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                # isolation_level=None: we issue BEGIN/COMMIT ourselves so a transaction means one thing.
                self.conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
            self.conn.row_factory = sqlite3.Row
            if self.readonly:
                _check_current(self.conn, path)
            else:
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=NORMAL")
                self.conn.execute("PRAGMA foreign_keys=ON")
                migrate(self.conn)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise WorkspaceBusy(f"{path}: the database is busy; another process holds it") from None
            if "database or disk is full" in str(exc):
                raise  # the workspace says which device is full (`workspace.disk_errors`)
            raise LexpilotError(f"{path}: cannot open the workspace database ({exc})") from None
        except sqlite3.DatabaseError as exc:
            raise LexpilotError(
                f"{path}: not a lexpilot-batch database ({exc}); move it away or use another --root"
            ) from None
        self._depth = 0

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic unit of state change; nested uses join the outer transaction."""
        if self._depth:
            self._depth += 1
            try:
                yield self.conn
            finally:
                self._depth -= 1
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self.conn
        except BaseException:
            # SQLite may have rolled back by itself (a full disk, SQLITE_FULL): the error that did
            # it is the one to report, not the ROLLBACK's "no transaction is active".
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")
        finally:
            self._depth = 0

    def meta(self, key: str) -> str | None:
        return read_meta(self.conn, key)

    def set_meta(self, key: str, value: str) -> None:
        """Set one key in a transaction of its own (joining the caller's, if one is open)."""
        with self.transaction() as db:
            write_meta(db, key, value)

    def close(self) -> None:
        self.conn.close()


def read_meta(db: sqlite3.Connection, key: str) -> str | None:
    """The workspace's value for `key` (`meta`: its id, remembered settings, budgets), or None."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def write_meta(db: sqlite3.Connection, key: str, value: str) -> None:
    """Set one key of `meta`, inside the caller's transaction."""
    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))


def _check_current(db: sqlite3.Connection, path: Path) -> None:
    """A read-only database cannot be migrated: refuse one of another version, saying what to do."""
    done = {row[0] for row in db.execute("SELECT name FROM migrations")}
    known = [name for name, _ in MIGRATIONS]
    if done - set(known):
        raise LexpilotError(f"{path}: the workspace database was written by a newer lexpilot-batch; upgrade to read it")
    if set(known) - done:
        raise LexpilotError(
            f"{path}: the workspace was written by an earlier lexpilot-batch and is read-only, so it cannot be "
            "brought up to date; copy it to a writable folder and run the command there"
        )
