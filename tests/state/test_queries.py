"""`state/queries.py`: the filters of `status` and `retry` checked against the workspace's runs."""

from __future__ import annotations

import sqlite3

import pytest

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.state.queries import check_run_filters


@pytest.fixture
def db() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE runs (run_id TEXT, model TEXT)")
    conn.executemany("INSERT INTO runs VALUES (?, ?)", [("r1", "sim-a"), ("r2", "sim-a"), ("r1", "sim-b")])
    return conn


def test_filters_that_each_and_together_name_runs_pass(db: sqlite3.Connection) -> None:
    check_run_filters(db, ("r1",), ("sim-b",))
    check_run_filters(db, ("r2",), ())
    check_run_filters(db, ("r2", "r1"), ("sim-b",))  # r1 of sim-b is one


def test_a_run_id_and_a_model_that_name_no_run_together_are_refused_naming_the_runs(db: sqlite3.Connection) -> None:
    """Each names runs of the workspace, but r2 is only sim-a's: "nothing matches" would read as
    a workspace without runs."""
    with pytest.raises(ConfigError) as refused:
        check_run_filters(db, ("r2",), ("sim-b",))
    assert str(refused.value) == (
        "no run is --run-id r2 of --model sim-b: this workspace has r1 of sim-a, r1 of sim-b, r2 of sim-a"
    )


def test_an_empty_workspace_refuses_nothing(db: sqlite3.Connection) -> None:
    db.execute("DELETE FROM runs")
    check_run_filters(db, ("r1",), ("sim-a",))
