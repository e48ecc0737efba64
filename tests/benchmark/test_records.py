"""Finished records are stored with the case's histories by reference and read back whole."""

from __future__ import annotations

import json

import pytest

from lexpilot_batch.benchmark import records
from lexpilot_batch.data import load_dataset
from lexpilot_batch.report.results import load_run_results
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import finish, open_session, prepare_runs


def _dump(messages) -> list[dict]:
    return [m.model_dump() for m in messages]


def test_compact_references_every_history_prefix_and_expand_restores_the_record():
    for case in load_dataset():
        complete, under = _dump(case.complete_history), _dump(case.underspecified_history)
        extra = [{"role": "assistant", "content": "请问合同是哪天签的？"}]
        record = {
            "case_number": case.case_number,
            "history": under,
            "continued_history": under + extra,
            "complete": complete,
            "rounds": [{"round": 1, "response": "r"}],
            "claims": [],
        }
        stored = records.compact(record, case)
        assert stored["history"] == [{records.REF: "underspecified_history"}]
        assert stored["continued_history"] == [{records.REF: "underspecified_history"}, *extra]
        assert stored["complete"] == [{records.REF: "complete_history"}]
        assert stored["rounds"] == record["rounds"]
        assert records.has_references(stored)
        assert records.expand(json.loads(json.dumps(stored, ensure_ascii=False)), case) == record


def test_lists_that_do_not_start_with_a_history_and_old_records_are_left_alone():
    case = load_dataset().cases[0]
    partial = _dump(case.complete_history)[1:] or [{"role": "user", "content": "别的"}]
    record = {"history": partial, "rounds": [], "response": "x"}
    assert records.compact(record, case) == record
    assert not records.has_references(record)
    assert records.expand(record, case) == record


def test_the_database_holds_references_and_results_read_whole_histories(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        _check_workspace(ws)


def _check_workspace(ws: Workspace) -> None:
    session = open_session(ws)
    prepare_runs(ws, session, stage="all", runs=("r1",), limit=4)
    finish(ws, session)
    stored = [json.loads(r[0]) for r in ws.store.conn.execute("SELECT record FROM threads WHERE status = 'done'")]
    assert len(stored) == 4 * 6 and all(records.has_references(r) for r in stored)

    cases = {str(c.case_number): c for c in load_dataset()}
    (run,) = load_run_results(ws)
    for task, entry in run.tasks.items():
        assert entry.records
        for _, record in entry.records:
            case = cases[str(record["case_number"])]
            whole = (_dump(case.complete_history), _dump(case.underspecified_history))
            assert record["history"] in whole, task
            shown = record["history"]
            if "continued_history" in record:
                assert record["continued_history"][: len(shown)] == shown
                assert len(record["continued_history"]) > len(shown)
    (lean,) = load_run_results(ws, texts=False)
    assert all("history" not in r for e in lean.tasks.values() for _, r in e.records)


def test_reports_read_scores_and_fall_back_to_records_stored_without_them(tmp_path):
    from lexpilot_batch.errors import LexpilotError
    from lexpilot_batch.report import build_report

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="all", runs=("r1", "r2"), limit=6)
        finish(ws, session)
        db = ws.store.conn
        assert db.execute("SELECT COUNT(*) FROM threads WHERE status = 'done' AND score IS NULL").fetchone()[0] == 0
        with_scores = build_report(load_run_results(ws, texts=False))
        whole = build_report(load_run_results(ws, texts=True))
        db.execute("UPDATE threads SET score = NULL")  # as finished by a version that stored none
        assert build_report(load_run_results(ws, texts=False)) == with_scores == whole

        db.execute("UPDATE threads SET score = '{}' WHERE pk = (SELECT MIN(pk) FROM threads WHERE task = 'dcg')")
        with pytest.raises(LexpilotError, match="missing field 'success'"):
            build_report(load_run_results(ws, texts=False))


def test_scores_stored_before_the_interaction_statistics_are_read_from_the_records(tmp_path):
    """A workspace whose DCG and Interaction LJP scores lack what the interaction statistics read
    (as versions before them stored) reports them from the records after migration 0008."""
    from lexpilot_batch.report import build_report
    from lexpilot_batch.state.store import Store

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="all", runs=("r1",), limit=5)
        finish(ws, session)
        session.close()
        expected = build_report(load_run_results(ws, texts=False))
        db = ws.store.conn
        for pk, score in db.execute("SELECT pk, score FROM threads WHERE status = 'done'").fetchall():
            old = {k: v for k, v in json.loads(score).items() if k not in ("decisions", "stop_reason")}
            db.execute("UPDATE threads SET score = ? WHERE pk = ?", (json.dumps(old, ensure_ascii=False), pk))
        db.execute("DELETE FROM migrations WHERE name = '0008_rescore_interaction_fields'")
        with pytest.raises(Exception, match="missing field .(stop_reason|decisions)"):
            build_report(load_run_results(ws, texts=False))
    Store(tmp_path / "ws" / "state" / "lexpilot.sqlite3").close()  # migrates
    with Workspace(tmp_path / "ws", writable=False) as ws:
        assert build_report(load_run_results(ws, texts=False)) == expected
