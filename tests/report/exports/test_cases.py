"""The per-case export (`export --layout cases`): one row per finished thread, checked against the
records in the database, CSV and JSONL alike."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app
from lexpilot_batch.data import load_dataset
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.exports.cases import COLUMNS, export_cases
from lexpilot_batch.report.results import load_run_results
from lexpilot_batch.util import fileio
from tests.helpers.engine import STUDY_MODELS, STUDY_RUNS, records

VARIANTS = {"c": "complete", "u": "underspecified"}
STOPS = ("judgment_round_1", "judgment_round_2", "judgment_round_3", "forced_final_prediction")


@pytest.fixture(scope="module")
def exported(study, tmp_path_factory):
    out = tmp_path_factory.mktemp("cases")
    written = export_cases(load_run_results(study), out)
    assert [p.name for p in written] == ["cases.csv", "cases.jsonl"]
    assert (out / "cases.csv").read_bytes().startswith(b"\xef\xbb\xbf")  # for Excel (`spreadsheet`)
    text = (out / "cases.csv").read_text(encoding="utf-8-sig")
    lines = (out / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    return list(csv.DictReader(io.StringIO(text))), [json.loads(line) for line in lines], out


def expected_row(task: str, record: dict) -> dict:
    """What the row of a record must say, from the protocol's record alone."""
    if task == "lca":
        right = "clarification" if record["history_type"] == "underspecified" else "judgment"
        return {"history_type": record["history_type"], "label": record["label"], "correct": record["label"] == right}
    if task == "dcg":
        decisions = [r["decision"] for r in record["rounds"]]
        return {"success": record["success"], "decisions": decisions, "correct": "是" in decisions}
    gold = [c["gold"] for c in record["claims"]]
    predicted = [c["predicted"] for c in record["claims"]]
    row = {
        "claims": len(gold),
        "claims_correct": sum(g == p for g, p in zip(gold, predicted, strict=True)),
        "gold": gold,
        "predicted": predicted,
        "correct": gold == predicted,
        "verdicts": [{k: c[k] for k in ("claim", "gold", "predicted")} for c in record["claims"]],
    }
    if task == "ljp_interaction":
        # New responses: one per judged round, and the forced final prediction if there was one.
        forced = record["stop_reason"] == "forced_final_prediction"
        row |= {"stop_reason": record["stop_reason"], "responses": len(record["rounds"]) + forced}
    return row


def test_one_row_per_finished_thread_matching_its_record(study, exported):
    _, rows, _ = exported
    cases = load_dataset(None).cases
    classes = dict(study.store.conn.execute("SELECT case_number, cause_class FROM cases").fetchall())
    by_key = {}
    for row in rows:
        key = (row["run_id"], row["model"], row["task"], str(row["case_number"]), row["variant"])
        assert key not in by_key, key
        by_key[key] = row
    stored = records(study)
    assert len(rows) == len(stored) == len(STUDY_MODELS) * len(STUDY_RUNS) * len(cases) * 6
    for (run_id, model, task, case_idx, variant), record in stored.items():
        number = str(cases[case_idx].case_number)
        row = by_key[(run_id, model, task, number, variant)]
        # The dataset's own type: the sample's 10452 is a number there, and stays one (issue 48, point 8).
        assert row["case_number"] == cases[case_idx].case_number and type(row["case_number"]) is type(
            cases[case_idx].case_number
        )
        assert row["cause_class"] == classes[number]
        assert row["group_key"]
        assert row["bundled_sample"] is True  # the study runs on the bundled sample
        if task == "lca":
            assert record["history_type"] == VARIANTS[variant]
        fields = {k: v for k, v in row.items() if k not in ("run_id", "model", "group_key", "bundled_sample", "task",
                                                            "case_number", "variant", "cause_class")}  # fmt: skip
        assert fields == expected_row(task, record), (run_id, model, task, number)
    assert {r["stop_reason"] for r in rows if r["task"] == "ljp_interaction"} <= set(STOPS)
    assert {r["correct"] for r in rows} == {True, False}


def test_the_csv_holds_the_jsonl_rows(exported):
    table, rows, _ = exported
    assert list(table[0]) == list(COLUMNS)
    assert len(table) == len(rows)
    for line, row in zip(table, rows, strict=True):
        for column in COLUMNS:
            value = row.get(column)
            if isinstance(value, bool):
                value = str(value).lower()
            elif isinstance(value, list):
                value = "|".join(value)
            assert line[column] == ("" if value is None else str(value)), column


def test_rows_come_in_run_task_case_order_and_exporting_twice_gives_the_same_bytes(study, exported, tmp_path):
    _, rows, out = exported
    order = [(r["run_id"], r["model"]) for r in rows]
    assert order == sorted(order, key=order.index)  # each run's rows together
    export_cases(load_run_results(study), tmp_path)
    for name in ("cases.csv", "cases.jsonl"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()


def test_the_command_refuses_unfinished_runs_without_partial(tmp_path):
    from lexpilot_batch.state.workspace import Workspace
    from tests.helpers.engine import open_session, prepare_runs

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="dcg", runs=("r1",), limit=2)
        finally:
            session.close()
    runner = CliRunner()
    args = ["export", "--layout", "cases", "--out", str(tmp_path / "out"), "--root", str(tmp_path / "ws")]
    refused = runner.invoke(app, args)
    assert refused.exit_code != 0 and "not complete" in str(refused.exception or refused.output)
    assert not (tmp_path / "out").exists()
    done = runner.invoke(app, [*args, "--partial"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "out" / "cases.csv").read_text(encoding="utf-8-sig").splitlines() == [",".join(COLUMNS)]
    # What --partial left out is said, not only missing from the files.
    assert "Note: partial: no row for r1 / sim-eval / dcg: unfinished: " in done.output


def test_a_file_a_spreadsheet_holds_open_is_said_to_be_open_not_unwritable(tmp_path, monkeypatch):
    """Windows refuses to replace `cases.csv` while Excel shows it (a sharing violation, winerror 32):
    the message says so, not that --out is no writable folder."""
    real_replace = os.replace

    def held(src, dst):
        if Path(dst).name == "cases.csv":
            exc = PermissionError(13, "The process cannot access the file", os.fspath(src), 32, os.fspath(dst))
            setattr(exc, "winerror", 32)  # noqa: B010 - the constructor sets it on Windows only, where typeshed declares it
            raise exc
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", held)
    monkeypatch.setattr(fileio, "_REPLACE_PAUSE", 0)
    with pytest.raises(LexpilotError) as refused:
        export_cases([], tmp_path / "out")
    assert str(refused.value) == (
        f"cannot write {tmp_path / 'out' / 'cases.csv'}: it is open in another program; "
        f"close it there and run the same command again; the export changed nothing under {tmp_path / 'out'}"
    )


def test_an_export_over_a_file_held_open_changes_nothing(tmp_path, monkeypatch):
    """Windows refuses to rename a file another program holds open (Excel showing the `cases.csv`
    of an earlier export), and so to replace it: the export is refused naming it, and neither
    file of the earlier export is replaced, so that the two never disagree."""
    out = tmp_path / "out"
    export_cases([], out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_replace = os.replace

    def held(src, dst):
        if Path(src) == out / "cases.csv":
            exc = PermissionError(13, "The process cannot access the file", os.fspath(src), 32, os.fspath(dst))
            setattr(exc, "winerror", 32)  # noqa: B010 - the constructor sets it on Windows only, where typeshed declares it
            raise exc
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", held)
    monkeypatch.setattr(fileio, "_REPLACE_PAUSE", 0)
    monkeypatch.setattr(
        "lexpilot_batch.report.exports.cases.case_rows", lambda runs, judges=None: iter([{"run_id": "r9"}])
    )
    with pytest.raises(LexpilotError, match="it is open in another program") as refused:
        export_cases([], out)
    assert f"the export changed nothing under {out}" in str(refused.value)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
