"""The judge_words table: what a judge said in each attempt, kept apart from the request row.

A judge request's row holds what was decided (`requests.text`, `requests.value`, or the reason it
was rejected in `requests.error`); its row here holds the judge's own words: the whole content it
returned (a `<think>` block and any text around its JSON included, also when that content was
malformed, truncated or filtered) and its reasoning where the API returns it apart
(`reasoning_content`: DeepSeek-R1, or Anthropic's and Gemini's thinking as `providers.results`
reads them). Ingest writes both in the transaction that decides the request (`record_words`);
the viewer and the exports read them (`report.judge_calls`). A table of its own keeps the long
texts off the request rows the compiler reads on every wave.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

# (request pk, raw content or None, reasoning or None), as `record_words` takes it.
Words = tuple[int, str | None, str | None]


def create_table(db: sqlite3.Connection) -> None:
    """Migration `0017_judge_words` (`migrations.MIGRATIONS`): requests answered before it have no row."""
    db.execute(
        "CREATE TABLE judge_words ("
        " request_pk INTEGER PRIMARY KEY REFERENCES requests(pk),"
        " raw TEXT,"  # the content as returned, whole
        " reasoning TEXT"  # reasoning returned apart from the content, where the API gives it
        ")"
    )


def record_words(db: sqlite3.Connection, rows: Iterable[Words]) -> None:
    """Record the words of requests ingest decides now, inside its transaction (each request is
    decided once: a row is never rewritten with other words)."""
    db.executemany("INSERT OR IGNORE INTO judge_words (request_pk, raw, reasoning) VALUES (?, ?, ?)", rows)
