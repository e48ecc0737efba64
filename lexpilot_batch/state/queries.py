"""Small reads of the workspace's tables that several layers ask for, written once.

Every write is a named function of the module that owns its table (`waves` the files' and waves',
`requests`, `threads`, `runs`, `anomalies`, the store `meta`); what is only counted or listed by
others, the CLI above all (which holds no SQL), is asked here.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import BATCH, FLEX, SYNC
from lexpilot_batch.providers.batch import BatchStatus
from lexpilot_batch.providers.routing.endpoints import simulated_target
from lexpilot_batch.state.states import ThreadState, ThreadStatus


def count_threads(db: sqlite3.Connection, status: ThreadStatus) -> int:
    """How many threads of the workspace are in `status`."""
    return int(db.execute("SELECT COUNT(*) FROM threads WHERE status = ?", (status,)).fetchone()[0])


def failed_threads(db: sqlite3.Connection) -> int:
    """How many threads failed (`lexpilot-batch retry` makes them due again)."""
    return count_threads(db, ThreadState.FAILED)


def measured_batch_seconds(db: sqlite3.Connection) -> float | None:
    """The median time from submitting to finishing of the workspace's completed batches at a
    provider (what `--tail auto` expects of the next one, `engine.tail`); None before any. A
    rehearsal's batches (`simulated`) are not measured: the simulator answers in a moment, and a
    rehearsal is to choose what the real run would (`--expect-latency batch=S` says otherwise)."""
    rows = [
        r[0]
        for r in db.execute(
            "SELECT finished_at - submitted_at FROM files WHERE backend = ? AND batch_status = ?"
            " AND finished_at IS NOT NULL AND submitted_at IS NOT NULL ORDER BY 1",
            (BATCH, BatchStatus.COMPLETED),
        )
    ]
    return float(rows[len(rows) // 2]) if rows else None


def measured_call_rates(db: sqlite3.Connection) -> dict[tuple[str, str], float]:
    """Requests a second the workspace's finished flex and sync files ran at, per (backend, model):
    their requests over the seconds from sending the first to saving the last, the files of a model
    that ran at once (one pass, `providers.sync.at_once.run_files`: one window) counted once in time,
    as the adaptive window and the provider's rate limits let them run (what `--tail auto` plans a
    group's time with, `engine.tail`). A rehearsal's files (the simulated provider's) are not
    measured, as its batches are not (`measured_batch_seconds`)."""
    spans: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for backend, model, endpoint, n, started, ended in db.execute(
        "SELECT backend, model, endpoint, n_requests, submitted_at, finished_at FROM files"
        " WHERE backend IN (?, ?) AND finished_at IS NOT NULL AND submitted_at IS NOT NULL AND n_requests > 0",
        (FLEX, SYNC),
    ):
        if simulated_target(endpoint) is not None or ended <= started:
            continue
        spans.setdefault((backend, model), []).append((started, ended, n))
    rates = {}
    for key, runs in spans.items():
        seconds, reach = 0.0, -math.inf
        for started, ended, _ in sorted(runs):
            seconds += max(0.0, ended - max(started, reach))  # the time no earlier file covered
            reach = max(reach, ended)
        rates[key] = sum(n for _, _, n in runs) / seconds
    return rates


def check_run_filters(
    db: sqlite3.Connection, run_ids: tuple[str, ...] | list[str], models: tuple[str, ...] | list[str]
) -> None:
    """A `--run-id` or `--model` naming no run of the workspace is refused, naming what it has
    (`retry`, `status`), and so are the two together when each names runs but no run is both: read
    as "nothing matches", it would say the workspace has no runs."""
    known = {(r[0], r[1]) for r in db.execute("SELECT run_id, model FROM runs")}
    for value, have, option in (
        (run_ids, {r for r, _ in known}, "--run-id"),
        (models, {m for _, m in known}, "--model"),
    ):
        unknown = sorted(set(value) - have)
        if unknown and have:
            raise ConfigError(
                f"{option} {', '.join(unknown)}: no such run in this workspace; it has {', '.join(sorted(have))}"
            )
    if known and run_ids and models and not any(r in run_ids and m in models for r, m in known):
        pairs = ", ".join(f"{r} of {m}" for r, m in sorted(known))
        raise ConfigError(
            f"no run is --run-id {' or '.join(run_ids)} of --model {' or '.join(models)}: this workspace has {pairs}"
        )


@contextmanager
def snapshot(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Reads that see one committed state, whatever another process commits meanwhile (a deferred
    transaction on a connection of its own: in WAL mode its first read fixes what it sees); it
    writes nothing."""
    db.execute("BEGIN")
    try:
        yield db
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
