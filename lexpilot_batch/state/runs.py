"""The runs table and what a run brings with it: every write of a run row, of the cases it copies
into the workspace (`cases`), and of the cause-class mapping it is classed with (`categories`).

What a run is, its manifest and when one may be registered are `study.runs`'; a run's threads are
`threads`'. Each function runs inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable


def insert_run(
    db: sqlite3.Connection,
    run_id: str,
    model: str,
    key: str,
    dataset: str,
    manifest: str,
    templates: str,
    speculate: bool,
) -> int:
    """A new run (`dataset` its file's SHA-256; `manifest` and `templates` as JSON); returns its pk."""
    cur = db.execute(
        "INSERT INTO runs (run_id, model, key, dataset, manifest, templates, speculate, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, model, key, dataset, manifest, templates, int(speculate), time.time()),
    )
    assert cur.lastrowid is not None  # set by every INSERT that succeeds
    return cur.lastrowid


def set_speculate(db: sqlite3.Connection, pk: int, speculate: bool) -> None:
    """Set the run's `--speculate`: the one thing a prepare may change of a registered run."""
    db.execute("UPDATE runs SET speculate = ? WHERE pk = ?", (int(speculate), pk))


def keep_categories(db: sqlite3.Connection, sha256: str, classes: str) -> None:
    """Keep a cause-class mapping (`classes` as JSON) under its hash, once."""
    db.execute("INSERT OR IGNORE INTO categories (sha256, classes) VALUES (?, ?)", (sha256, classes))


def copy_cases(db: sqlite3.Connection, rows: Iterable[tuple[str, int, str, str, str, str | None]]) -> None:
    """Copy cases `(dataset, idx, case_number, cause_class, data, cause)` in, keeping those there."""
    db.executemany(
        "INSERT OR IGNORE INTO cases (dataset, idx, case_number, cause_class, data, cause) VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )
