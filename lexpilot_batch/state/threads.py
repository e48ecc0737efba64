"""The threads table: every write of a thread row, and the record of each `retry`.

A thread (one task of one case of one run, `threads.variant` naming which of the case's) is created
`active` when its run is prepared (`insert_threads`), and finished by a compile, `done` with its
record and scored fields or `failed` with a reason (`finish_threads`); `lexpilot-batch cancel` stops
active ones (`cancel_threads`, recorded by `record_cancel`); `lexpilot-batch retry` makes failed (or,
`--cancelled`, cancelled) ones active again with fresh attempts (`rearm_threads`), and records what
it did (`record_retry`). Each function runs inside the caller's transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping
from typing import Any

from lexpilot_batch.state.states import ThreadState, ThreadStatus
from lexpilot_batch.state.store import read_meta, write_meta

# A thread finished, as `finish_threads` takes it: (status, record, score, reason, pk).
Finished = tuple[ThreadStatus, str | None, str | None, str | None, int]


def insert_threads(db: sqlite3.Connection, rows: Iterable[tuple[int, str, int, str]]) -> int:
    """Create `active` threads `(run_pk, task, case_idx, variant)`, keeping those that exist;
    returns how many are new."""
    before = db.total_changes
    db.executemany(
        f"INSERT OR IGNORE INTO threads (run_pk, task, case_idx, variant, status) VALUES (?, ?, ?, ?, '{ThreadState.ACTIVE}')",
        rows,
    )
    return db.total_changes - before


def finish_threads(db: sqlite3.Connection, rows: Iterable[Finished]) -> None:
    """Finish threads: `done` with their stored record and score, or `failed` with a reason."""
    db.executemany("UPDATE threads SET status = ?, record = ?, score = ?, reason = ? WHERE pk = ?", rows)


def rearm_threads(
    db: sqlite3.Connection, pks: Iterable[int], after_wave: int, status: ThreadStatus = ThreadState.FAILED
) -> None:
    """Make failed (or cancelled) threads active again; attempts made in waves up to `after_wave` no
    longer count against their budgets (`threads.fresh_after`, read by `engine.due`)."""
    db.executemany(
        f"UPDATE threads SET status = '{ThreadState.ACTIVE}', reason = NULL, fresh_after = ? WHERE pk = ? AND status = ?",
        [(after_wave, pk, status) for pk in pks],
    )


def cancel_threads(db: sqlite3.Connection, pks: Iterable[int], reason: str) -> None:
    """`active` -> `cancelled`: nothing more is asked for them; the answers they have are kept."""
    db.executemany(
        f"UPDATE threads SET status = '{ThreadState.CANCELLED}', reason = ? WHERE pk = ? AND status = '{ThreadState.ACTIVE}'",
        [(reason, pk) for pk in pks],
    )


CANCELS_KEY = "cancels"  # (meta) every `cancel`, a JSON list, oldest first


def record_cancel(db: sqlite3.Connection, selection: Mapping[str, Any], threads: int) -> None:
    """Record one `cancel` (meta `cancels`): its filters and the threads it stopped."""
    history = cancel_history(db)
    history.append({"at": time.time(), "selection": dict(selection), "threads": threads})
    write_meta(db, CANCELS_KEY, json.dumps(history, ensure_ascii=False))


def cancel_history(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every `cancel` so far, oldest first."""
    value = read_meta(db, CANCELS_KEY)
    return json.loads(value) if value else []


def record_retry(db: sqlite3.Connection, selection: Mapping[str, Any], threads: int, after_wave: int) -> None:
    """Record one `retry` (`retries`): its filters, the threads it made due again, from which wave."""
    db.execute(
        "INSERT INTO retries (at, selection, threads, after_wave) VALUES (?, ?, ?, ?)",
        (time.time(), json.dumps(selection, ensure_ascii=False), threads, after_wave),
    )
