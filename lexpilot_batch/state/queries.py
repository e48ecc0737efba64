"""Small reads of the workspace's tables that several layers ask for, written once.

The modules that own a table's moves hold its writes (`waves` the files', `engine.ingest` the
requests', `engine.compiler` the threads'); what is only counted or listed by others, the CLI above
all (which holds no SQL), is asked here.
"""

from __future__ import annotations

import sqlite3

from lexpilot_batch.state.states import ThreadState, ThreadStatus


def count_threads(db: sqlite3.Connection, status: ThreadStatus) -> int:
    """How many threads of the workspace are in `status`."""
    return int(db.execute("SELECT COUNT(*) FROM threads WHERE status = ?", (status,)).fetchone()[0])


def failed_threads(db: sqlite3.Connection) -> int:
    """How many threads failed (`lexpilot-batch retry` makes them due again)."""
    return count_threads(db, ThreadState.FAILED)
