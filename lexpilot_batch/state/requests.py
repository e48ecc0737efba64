"""The requests table: every write of a request row, and the row as the compiler reads it.

A request is inserted `pending` by the compile that asks it (`insert_pending`), and is answered or
failed once: by the ingest of its results (`apply_results`; `fail_requests` for those a finished
batch did not answer), as never run when its batch is lost (`fail_pending_of_file`, from
`waves.mark_lost`), or by `doctor --repair`. An answered one becomes `discarded` when a speculative
reply turned out not to be needed (`discard_unneeded`). Rows are deleted only with the unsent file
or wave that holds them (`delete_of_file`, `delete_of_wave`). `engine.settled` relies on exactly
these moves. Each function runs inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import TypedDict

from lexpilot_batch.state.states import ErrorKind, RequestState, RequestStatus

# What the compiler reads of each request (`engine.compiler`), in this order: the hot path reads
# some columns by position, and `engine.settled` the pk as the last. A text step's value is its
# text (`engine.answers.parse_answer`): not read twice.
REQUEST_COLUMNS = (
    "case_idx, step, attempt, status, text, CASE parser WHEN 'text' THEN NULL ELSE value END AS value,"
    " error, error_kind, role, parser, n_claims, wave, pk"
)


class RequestRow(TypedDict):
    """A request as `REQUEST_COLUMNS` reads it: one attempt of one step of a (run, case), which the
    due-step policy (`engine.due`) and the estimate read by column name. At run time it is a
    `sqlite3.Row` (read by name, and on the hot path by position) or, in tests, a dict."""

    case_idx: int
    step: str
    attempt: int
    status: RequestStatus
    text: str | None
    value: str | None  # JSON of the parsed value; None for a text step (its text) or no answer
    error: str | None
    error_kind: ErrorKind | None
    role: str
    parser: str
    n_claims: int
    wave: int
    pk: int


# A new request, as `insert_pending` takes it: (custom_id, run_pk, case_idx, step, attempt, role,
# model, parser, n_claims, wave, file_pk, prompt_chars).
NewRequest = tuple[str, int, int, str, int, str, str, str, int, int, int, int]

# A result applied to a request, as `apply_results` takes it: (status, text, value, error,
# error_kind, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, cache_write_tokens,
# cost_usd, answered_at, pk).
Result = tuple[
    RequestStatus,
    str | None,
    str | None,
    str | None,
    str | None,
    int | None,
    int | None,
    int | None,
    int | None,
    int | None,
    float | None,
    float | None,
    int,
]


def add_reported_cost(db: sqlite3.Connection) -> None:
    """Migration `0018_reported_cost` (`migrations.MIGRATIONS`): `requests.cost_usd`, the cost a provider
    reported for the request (OpenRouter's `usage.cost`: `engine.answers`), null where it reported
    none; the covering index gains it so that reporting still reads no request row."""
    db.execute("ALTER TABLE requests ADD COLUMN cost_usd REAL")
    db.execute("DROP INDEX IF EXISTS requests_usage")
    db.execute(
        "CREATE INDEX requests_usage ON requests(run_pk, role, status, file_pk, prompt_tokens, completion_tokens,"
        " cached_tokens, cache_write_tokens, cost_usd)"
    )


def add_answered_at(db: sqlite3.Connection) -> None:
    """Migration `0023_answered_at` (`migrations.MIGRATIONS`): `requests.answered_at`, when the
    request's result came (the provider's `created` where its answer has one, else this machine's
    clock at ingest: `engine.answers.answered_at`), written with the result; what a provider that
    prices by time of day bills it at (`providers.schedules`). Null for results recorded before it:
    priced at the list (peak) price, and the report says so."""
    db.execute("ALTER TABLE requests ADD COLUMN answered_at REAL")


def insert_pending(db: sqlite3.Connection, rows: Iterable[NewRequest]) -> None:
    """Insert requests a compile asks, `pending` in their wave's file."""
    db.executemany(
        "INSERT INTO requests (custom_id, run_pk, case_idx, step, attempt, role, model, parser, n_claims, wave,"
        f" file_pk, status, prompt_chars) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '{RequestState.PENDING}', ?)",
        rows,
    )


def discard_unneeded(db: sqlite3.Connection, steps: Iterable[tuple[int, int, str]]) -> None:
    """`answered` -> `discarded` for the steps `(run_pk, case_idx, step)` nobody will read: a
    speculative reply to what turned out a judgment."""
    db.executemany(
        f"UPDATE requests SET status = '{RequestState.DISCARDED}' WHERE run_pk = ? AND case_idx = ? AND step = ? AND status = '{RequestState.ANSWERED}'",
        steps,
    )


def apply_results(db: sqlite3.Connection, results: Iterable[Result]) -> None:
    """Record each request's result (answered or failed) and the tokens it used; ingest applies
    only to pending requests, each at most once."""
    db.executemany(
        "UPDATE requests SET status = ?, text = ?, value = ?, error = ?, error_kind = ?, prompt_tokens = ?,"
        " completion_tokens = ?, reasoning_tokens = ?, cached_tokens = ?, cache_write_tokens = ?, cost_usd = ?,"
        " answered_at = ? WHERE pk = ?",
        results,
    )


def fail_requests(db: sqlite3.Connection, rows: Iterable[tuple[str, str, int]]) -> None:
    """Fail requests `(error, error_kind, pk)`: those a finished batch's results did not answer."""
    db.executemany(
        f"UPDATE requests SET status = '{RequestState.FAILED}', error = ?, error_kind = ? WHERE pk = ?", rows
    )


def fail_pending_of_file(db: sqlite3.Connection, file_pk: int, error: str, error_kind: str | None) -> int:
    """Fail every request of a file still pending, with `error` and `error_kind` (None: a failure
    no attempt budget counts, `engine.due.exhausted`); returns how many."""
    return db.execute(
        f"UPDATE requests SET status = '{RequestState.FAILED}', error = ?, error_kind = ?"
        f" WHERE file_pk = ? AND status = '{RequestState.PENDING}'",
        (error, error_kind, file_pk),
    ).rowcount


def delete_of_file(db: sqlite3.Connection, file_pk: int) -> None:
    """Forget the requests of an unsent file (`waves.discard_unsent_file`)."""
    db.execute("DELETE FROM requests WHERE file_pk = ?", (file_pk,))


def delete_of_wave(db: sqlite3.Connection, wave: int) -> None:
    """Forget the requests of an unsent wave (`waves.discard_unsent_wave`)."""
    db.execute("DELETE FROM requests WHERE wave = ?", (wave,))
