"""The anomalies table: what ingest saw in a result file and did not apply (`engine.ingest` names
the kinds), recorded once each, and counted by `status` and `doctor`."""

from __future__ import annotations

import sqlite3


def record_anomaly(
    db: sqlite3.Connection, file_pk: int | None, kind: str, custom_id: str | None, detail: str, at: float
) -> None:
    """Record one anomaly of the file `file_pk` (None: of several files ingested together,
    `engine.ingest.ingest_external`), inside the caller's transaction."""
    db.execute(
        "INSERT INTO anomalies (file_pk, kind, custom_id, detail, at) VALUES (?, ?, ?, ?, ?)",
        (file_pk, kind, custom_id, detail, at),
    )
