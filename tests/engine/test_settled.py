"""`engine/settled.py`: a process that compiles wave after wave reads only what changed since its
last compile, and compiles exactly what a process reading everything would.

Each test runs the same study twice, holding settled requests and not, and compares every request
row, every request line and every record; or it changes what is held behind the holder's back and
checks that the next compile reads everything again.
"""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path

import pytest

from lexpilot_batch.engine import compiler, settled
from lexpilot_batch.engine.session import Session
from lexpilot_batch.engine.settled import Settled, View
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import collector
from tests.helpers.engine import finish, open_session, prepare_runs, records, request_key, request_lines

RUNS = ("r1", "r2")
LIMIT = 6


def _rows(ws: Workspace) -> list[tuple]:
    return [
        (request_key(r[0]), *r[1:])
        for r in ws.store.conn.execute(
            "SELECT custom_id, run_pk, case_idx, step, attempt, status, text, value, error, wave, prompt_chars"
            " FROM requests ORDER BY pk"
        )
    ]


def _lines(ws: Workspace) -> dict[str, list[dict]]:
    """Every request line, its id less the workspace's tag (two workspaces' lines compare)."""
    out = {}
    for path, lines in request_lines(ws).items():
        out[path] = [{**line, "custom_id": request_key(line["custom_id"])} for line in lines]
    return out


def _study(root: Path, hold: bool, faults: str | None = None) -> tuple[list, dict, dict, list[int]]:
    """The sample's first cases through every task, two runs, with --speculate; what was compiled and
    how many groups each compile took as held."""
    hits: list[int] = []
    real_install = Settled.install

    def install(self: Settled, view: View, db: sqlite3.Connection) -> None:
        hits.append(view.hits)
        real_install(self, view, db)

    with Workspace(root) as ws, pytest.MonkeyPatch.context() as mp:
        # One workspace id for all: the simulated provider's faults are drawn from the custom_ids.
        ws.store.set_meta("workspace_id", "5e771ed0" * 4)
        mp.setattr(Settled, "install", install)
        session = open_session(ws, faults)
        if not hold:
            session.settled = None  # type: ignore[assignment]  # every compile reads everything
        try:
            prepare_runs(ws, session, stage="all", runs=RUNS, speculate=True, limit=LIMIT)
            finish(ws, session)
        finally:
            session.close()
        return _rows(ws), _lines(ws), records(ws), hits


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, dict, dict, list[int]]:
    return _study(tmp_path_factory.mktemp("reference") / "ws", hold=False)


def test_holding_settled_requests_compiles_what_reading_everything_does(tmp_path, reference):
    rows, lines, done, hits = _study(tmp_path / "ws", hold=True)
    assert reference[3] == []  # the reference held nothing
    assert hits[0] == 0 and sum(hits) > LIMIT * len(RUNS)  # later compiles took groups as held
    assert rows == reference[0]
    assert lines == reference[1]
    assert done == reference[2] and len(done) > 0


def test_held_requests_within_any_bound_change_nothing(tmp_path, reference, monkeypatch):
    # So few rows and cases may be held that most groups are read in full: the mix must agree too.
    monkeypatch.setattr(settled, "MAX_ROWS", 12)
    monkeypatch.setattr(settled, "MAX_CASES", 1)
    rows, lines, done, hits = _study(tmp_path / "ws", hold=True)
    assert 0 < sum(hits) < sum(1 for _ in hits) * LIMIT * len(RUNS)
    assert (rows, lines, done) == reference[:3]


def test_holding_through_faults_compiles_what_reading_everything_does(tmp_path):
    # Failed lines, unusable answers, expired batches: settled rows of every kind, later attempts.
    faults = "line_error=0.05,malformed_judge=0.1,truncate=0.05,expire_batch=0.2,seed=3"
    held = _study(tmp_path / "held", hold=True, faults=faults)
    plain = _study(tmp_path / "plain", hold=False, faults=faults)
    assert sum(held[3]) > 0
    assert held[:3] == plain[:3]


def _half_way(ws: Workspace) -> tuple[Session, Settled]:
    session = open_session(ws)
    prepare_runs(ws, session, stage="all", runs=RUNS, speculate=True, limit=LIMIT)
    from lexpilot_batch.engine.loop import poll_and_advance

    for _ in range(2):
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
    assert session.settled._below is not None  # something is held
    return session, session.settled


def test_another_connection_committing_drops_what_is_held(ws):
    session, held = _half_way(ws)
    try:
        with ws.store.transaction() as db:
            assert held.open(db).boundary is not None
        other = sqlite3.connect(ws.store.path)
        other.execute("INSERT OR REPLACE INTO meta VALUES ('written_elsewhere', '1')")
        other.commit()
        other.close()
        with ws.store.transaction() as db:
            assert held.open(db).boundary is None  # another command may have changed anything
    finally:
        session.close()


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE requests SET status = 'pending' WHERE pk = (SELECT MIN(pk) FROM requests)",
        "UPDATE requests SET status = 'failed' WHERE pk = (SELECT MIN(pk) FROM requests WHERE status != 'failed')",
        "DELETE FROM requests WHERE pk = (SELECT MIN(pk) FROM requests)",
    ],
)
def test_settled_rows_changing_under_the_holder_drop_what_is_held(ws, change):
    session, held = _half_way(ws)
    try:
        with ws.store.transaction() as db:
            db.execute(change)
            assert held.open(db).boundary is None
    finally:
        session.close()


def test_a_compile_that_fails_installs_nothing_and_the_study_ends_as_it_would_have(ws, monkeypatch, reference):
    session, held = _half_way(ws)
    try:
        below, groups = held._below, set(held._groups)
        real = compiler._request
        calls = [0]

        def dies_half_way(*args: object) -> tuple:
            calls[0] += 1
            if calls[0] > 3:
                raise RuntimeError("disk gone")
            return real(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(compiler, "_request", dies_half_way)
        from lexpilot_batch.engine.loop import poll_and_advance

        with pytest.raises(RuntimeError):
            for _ in range(5):
                poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
        # Nothing of the failed compile was installed; the groups it had taken are no longer held
        # (the next compile reads them in full).
        assert held._below == below and set(held._groups) < groups
        monkeypatch.setattr(compiler, "_request", real)
        finish(ws, session)
        assert records(ws) == reference[2]
    finally:
        session.close()


def test_the_collector_is_paused_only_inside(ws, session):
    assert gc.isenabled()
    seen = []
    real = compiler._advance_all

    def spy(*args: object) -> None:
        seen.append(gc.isenabled())
        real(*args)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compiler, "_advance_all", spy)
        prepare_runs(ws, session, limit=1)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()  # a caller that paused it keeps it paused
    finally:
        gc.enable()


def test_what_was_built_of_held_rows_is_taken_again_not_rebuilt(tmp_path, reference, monkeypatch):
    # The holder keeps each group's attempts and answers as the compiler built them: a later compile
    # passes only the rows read since through `_by_step`, and compiles the same.
    seen: list[int] = []
    real = compiler._by_step

    def counting(rows, history=None, answers=None):
        rows = list(rows)
        seen.append(len(rows))
        return real(rows, history, answers)

    monkeypatch.setattr(compiler, "_by_step", counting)
    rows, lines, done, _ = _study(tmp_path / "held", hold=True)
    held_rows = sum(seen)
    seen.clear()
    plain = _study(tmp_path / "plain", hold=False)
    assert (rows, lines, done) == reference[:3] == plain[:3]
    assert held_rows < 0.75 * sum(seen)  # (all of them went through again before: as many as plain)


def test_rows_let_go_at_the_boundary_take_what_was_built_of_them_along():
    view = View({}, {})
    rows = [(0, "lca.u.gen", 1, "answered", "x", None, None, None, "eval", "text", 0, 1, pk) for pk in (3, 5, 8)]
    built: tuple[dict, dict] = ({"lca.u.gen": rows}, {})
    both = frozenset({"lca.u", "int."})
    view.keep((0, 1), both, rows, built)
    view.keep((1, 1), both, rows[:2], built)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE requests (pk INTEGER PRIMARY KEY, status TEXT)")
    db.executemany("INSERT INTO requests VALUES (?, ?)", [(pk, "answered") for pk in range(1, 8)] + [(8, "pending")])
    view.close(db)
    assert view.below is not None and view.below.boundary == 8
    # A group with a row at or above the boundary keeps its settled rows, to be built again.
    assert view.kept[(0, 1)] == (both, rows[:2], None)
    assert view.kept[(1, 1)] == (both, rows[:2], built)
    # Fewer prefixes than held: the rows of those, built again by the compiler.
    again = View(view.kept, {}, opened=view.below)
    assert again.take((1, 1), both) == (rows[:2], built)
    assert again.take((0, 1), frozenset({"lca.u"})) == (rows[:2], None)
    assert again.take((0, 1), both) is None  # taken once
