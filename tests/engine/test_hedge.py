"""The hedge deadline (`engine.hedge.hedge_deadline`) counts each batch still running at its age: a
wave's first three completed batches, the quickest, do not set a deadline its other batches pass."""

from __future__ import annotations

import sqlite3

import pytest

from lexpilot_batch.engine.hedge import hedge_deadline, quantile
from lexpilot_batch.providers.batch import BatchStatus
from lexpilot_batch.state.states import FileState


def files(completed: list[float], running: int, submitted_at: float = 0.0) -> sqlite3.Connection:
    """A workspace's `files` as `hedge_deadline` reads them: `completed` batches of these durations
    and `running` batches submitted at `submitted_at`, all at an OpenAI-style batch backend."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE files (backend TEXT, status TEXT, batch_status TEXT, submitted_at REAL, finished_at REAL)")
    for took in completed:
        db.execute(
            "INSERT INTO files VALUES ('batch', ?, ?, ?, ?)",
            (FileState.INGESTED, BatchStatus.COMPLETED, submitted_at, submitted_at + took),
        )
    for _ in range(running):
        db.execute("INSERT INTO files VALUES ('batch', ?, 'in_progress', ?, NULL)", (FileState.SUBMITTED, submitted_at))
    db.execute(
        "INSERT INTO files VALUES ('sync', ?, NULL, ?, NULL)", (FileState.SUBMITTED, submitted_at)
    )  # not a batch
    return db


def test_a_wave_s_running_batches_count_at_their_age():
    # 3 of a wave of 20 completed by 300 s: the 17 others have run 300 s, the 90th percentile is
    # their age, which none of them is past.
    db = files([100.0, 200.0, 300.0], running=17)
    assert hedge_deadline(db, now=300.0) == pytest.approx(300.0)
    assert hedge_deadline(db, now=5000.0) == pytest.approx(5000.0)  # never past it while 17 of 20 run
    # 18 of 20 completed: the two running are past the 90th percentile of the 20.
    done = [100.0 * k for k in range(1, 19)]
    db = files(done, running=2)
    deadline = hedge_deadline(db, now=4000.0)
    assert deadline is not None and deadline < 4000.0
    assert deadline == pytest.approx(quantile(done + [4000.0, 4000.0], 0.9))
    # Fewer than 3 completed: nothing hedged, whatever runs.
    assert hedge_deadline(files([100.0, 200.0], running=1), now=9e9) is None
    # Nothing running: the completed alone, as before.
    assert hedge_deadline(files([100.0, 200.0, 300.0], running=0), now=1e6) == pytest.approx(
        quantile([100, 200, 300], 0.9)
    )
