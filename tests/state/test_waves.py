"""`state/waves.py`: every move of a request file between its states, and when a wave may be
compiled again, closes, or is discarded.

Over a real workspace whose wave 1 (the LCA stage of one case, a file per request) is compiled by
the simulated session; the moves are then made by hand, one function at a time, as `submit`,
`poll`, `ingest` and `doctor` make them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from lexpilot_batch.state import waves
from lexpilot_batch.state.states import UNEXECUTED, FileState, RequestState
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import open_session, prepare_runs
from tests.helpers.fake_backend import file_rows


@pytest.fixture
def ws(tmp_path: Any) -> Iterator[Workspace]:
    with Workspace(tmp_path / "ws") as workspace:
        session = open_session(workspace, max_requests=1)
        try:
            prepare_runs(workspace, session, limit=1)
        finally:
            session.close()
        assert len(file_rows(workspace)) == 2
        yield workspace


def requests_of(ws: Workspace, pk: int) -> list[dict[str, Any]]:
    return [dict(r) for r in ws.store.conn.execute("SELECT * FROM requests WHERE file_pk = ? ORDER BY pk", (pk,))]


def submitted(ws: Workspace, pk: int, batch_id: str = "batch_1") -> None:
    with ws.store.transaction() as db:
        waves.mark_uploaded(db, pk, "file-1")
        waves.mark_creating(db, pk, 1, 5.0, None)
        waves.mark_submitted(db, pk, batch_id, "in_progress", {"total": 1}, 6.0)


# --- a file's way -------------------------------------------------------------------------------


def test_a_batch_file_goes_compiled_uploaded_creating_submitted_downloaded(ws: Workspace) -> None:
    first = file_rows(ws)[0]
    pk = first["pk"]
    assert first["status"] == FileState.COMPILED and waves.unsent(first)
    with ws.store.transaction() as db:
        waves.mark_uploaded(db, pk, "file-abc")
    row = waves.file_row(ws.store.conn, pk)
    assert (row["status"], row["provider_file_id"]) == (FileState.UPLOADED, "file-abc") and waves.unsent(row)
    with ws.store.transaction() as db:
        waves.mark_creating(db, pk, 2, 123.5, 4000.0)
    row = waves.file_row(ws.store.conn, pk)
    assert (row["status"], row["creates"], row["creating_at"], row["sent_after"]) == (
        FileState.CREATING,
        2,
        123.5,
        4000.0,
    )
    assert not waves.unsent(row)  # a batch may exist: nobody may discard it now
    with ws.store.transaction() as db:
        waves.mark_submitted(db, pk, "batch_9", "validating", {"total": 1}, 124.0, 4001.0)
    row = waves.file_row(ws.store.conn, pk)
    assert (row["status"], row["batch_id"], row["batch_status"]) == (FileState.SUBMITTED, "batch_9", "validating")
    assert row["request_counts"] is not None and json.loads(row["request_counts"]) == {"total": 1}
    assert row["submitted_at"] == 124.0
    assert row["sent_after"] == 4000.0  # the time read before the create is kept: the batch is newer
    with ws.store.transaction() as db:
        waves.mark_downloaded(db, pk, "completed", {"total": 1, "completed": 1}, "responses/x.jsonl")
    row = waves.file_row(ws.store.conn, pk)
    assert (row["status"], row["output_path"], row["error_path"]) == (FileState.DOWNLOADED, "responses/x.jsonl", None)
    assert row["finished_at"] is not None
    assert waves.file_at(ws.store.conn, row["path"]) == row and waves.file_at(ws.store.conn, "nowhere") is None


def test_a_sync_or_manual_file_is_marked_sent_with_its_backend_for_a_batch(ws: Workspace) -> None:
    sync, manual = file_rows(ws)
    with ws.store.transaction() as db:
        waves.update_file(db, sync["pk"], backend="sync")
        waves.mark_sent_locally(db, sync["pk"], "sync")
        waves.mark_sent_locally(db, manual["pk"], "manual")
    sync, manual = file_rows(ws)
    assert (sync["status"], sync["batch_id"], sync["batch_status"]) == (FileState.SUBMITTED, "sync", "in_progress")
    assert manual["batch_id"] == "manual" and manual["provider_file_id"] is None
    assert waves.unsent(sync) and not waves.unsent(manual)  # a sync file is read only when polled


def test_forgetting_results_moves_only_a_downloaded_file_back_to_submitted(ws: Workspace) -> None:
    first, second = file_rows(ws)
    for row in (first, second):
        submitted(ws, row["pk"], f"batch_{row['pk']}")
    with ws.store.transaction() as db:
        waves.mark_downloaded(db, first["pk"], "completed", {"total": 1}, "responses/a.jsonl", "responses/a.err")
        waves.update_file(db, first["pk"], output_file_id="out-1")
        waves.forget_results(db, first["pk"])
        waves.forget_results(db, second["pk"])  # still submitted: nothing to forget
    first, second = file_rows(ws)
    assert first["status"] == FileState.SUBMITTED and first["batch_id"] == f"batch_{first['pk']}"
    assert (first["output_path"], first["error_path"], first["output_file_id"], first["finished_at"]) == (None,) * 4
    assert second["status"] == FileState.SUBMITTED


def test_a_quota_refusal_sends_the_file_back_to_uploaded_and_keeps_the_batch_aside(ws: Workspace) -> None:
    first, second = file_rows(ws)
    submitted(ws, first["pk"], "batch_refused")
    with ws.store.transaction() as db:
        waves.refused(db, first["pk"], "batch_refused", "failed")
        waves.refused(db, second["pk"], "batch_other", "failed")  # a compiled file: not moved
    first, second = file_rows(ws)
    assert first["status"] == FileState.UPLOADED and first["provider_file_id"] == "file-1"
    assert (first["batch_id"], first["batch_status"], first["request_counts"], first["submitted_at"]) == (None,) * 4
    assert second["status"] == FileState.COMPILED
    aside = {r["batch_id"]: dict(r) for r in ws.store.conn.execute("SELECT * FROM other_batches")}
    assert aside["batch_refused"]["why"] == waves.TOKEN_LIMIT and aside["batch_refused"]["file_pk"] == first["pk"]
    assert all(r["status"] == RequestState.PENDING for r in requests_of(ws, first["pk"]))


def test_a_batch_kept_aside_twice_is_one_row_with_its_latest_status(ws: Workspace) -> None:
    first = file_rows(ws)[0]
    with ws.store.transaction() as db:
        waves.keep_aside(db, "batch_dup", first["pk"], first["path"], waves.DUPLICATE, "in_progress")
        waves.keep_aside(db, "batch_dup", first["pk"], first["path"], waves.DUPLICATE, "cancelled")
    rows = [dict(r) for r in ws.store.conn.execute("SELECT batch_id, why, status FROM other_batches")]
    assert rows == [{"batch_id": "batch_dup", "why": waves.DUPLICATE, "status": "cancelled"}]


def test_a_lost_batch_fails_its_pending_requests_as_never_run_and_ends_its_file(ws: Workspace) -> None:
    first, second = file_rows(ws)
    submitted(ws, first["pk"])
    reason = waves.lost_reason("batch_1", "HTTP 404 on 3 polls")
    assert reason == "batch_lost: the provider no longer knows batch batch_1 (HTTP 404 on 3 polls); sent again"
    with ws.store.transaction() as db:
        assert waves.mark_lost(db, first["pk"], reason) == 1
        assert waves.mark_lost(db, second["pk"], reason) == 1  # compiled: its requests fail, the file does not move
    first, second = file_rows(ws)
    assert (first["status"], first["batch_status"]) == (FileState.LOST, FileState.LOST)
    (request,) = requests_of(ws, first["pk"])
    assert (request["status"], request["error_kind"], request["error"]) == (RequestState.FAILED, UNEXECUTED, reason)
    assert second["status"] == FileState.COMPILED


def test_an_unsent_file_is_discarded_with_its_requests_keeping_its_refused_batches(ws: Workspace) -> None:
    first, second = file_rows(ws)
    with ws.store.transaction() as db:
        waves.keep_aside(db, "batch_old", first["pk"], first["path"], waves.TOKEN_LIMIT, "failed")
        waves.discard_unsent_file(db, first["pk"])
    assert [r["pk"] for r in file_rows(ws)] == [second["pk"]] and requests_of(ws, first["pk"]) == []
    assert [tuple(r) for r in ws.store.conn.execute("SELECT batch_id, file_pk FROM other_batches")] == [
        ("batch_old", None)
    ]


# --- queries ------------------------------------------------------------------------------------


def test_files_of_requests_names_each_file_once(ws: Workspace) -> None:
    ids = [r[0] for r in ws.store.conn.execute("SELECT custom_id FROM requests ORDER BY pk")]
    found = waves.files_of_requests(ws.store.conn, ids + ids + ["not-a-request"] * 600)
    assert sorted(r["pk"] for r in found) == [r["pk"] for r in file_rows(ws)]
    assert [r["pk"] for r in waves.files_of_requests(ws.store.conn, ids[1:])] == [file_rows(ws)[1]["pk"]]


def test_a_compiled_file_changed_on_disk_is_named(ws: Workspace) -> None:
    assert waves.check_compiled_files(ws) == []
    first, second = file_rows(ws)
    path = ws.path(second["path"])
    path.write_bytes(path.read_bytes().replace(b"}", b" }", 1))
    assert waves.check_compiled_files(ws) == [second["path"]]
    submitted(ws, second["pk"])  # once sent, the provider holds its own copy: no longer checked
    assert waves.check_compiled_files(ws) == []


def test_work_left_counts_files_to_send_files_in_flight_and_active_threads(ws: Workspace) -> None:
    first, second = file_rows(ws)
    assert waves.work_left(ws) == {
        "unsubmitted": 2,
        "in_flight": 0,
        "waiting_manual": 0,
        "held": 0,
        "active_threads": 2,
        "threads": 2,
    }
    assert waves.has_open_files(ws.store.conn)
    submitted(ws, first["pk"])
    with ws.store.transaction() as db:
        waves.update_file(db, second["pk"], backend="manual")
        waves.mark_sent_locally(db, second["pk"], "manual")
    assert waves.work_left(ws) == {
        "unsubmitted": 0,
        "in_flight": 2,
        "waiting_manual": 1,
        "held": 0,
        "active_threads": 2,
        "threads": 2,
    }
    waves.set_file(ws, first["pk"], status=FileState.INGESTED)
    waves.set_file(ws, second["pk"], status=FileState.LOST)
    assert waves.work_left(ws)["in_flight"] == 0 and not waves.has_open_files(ws.store.conn)


# --- waves --------------------------------------------------------------------------------------


def test_an_empty_workspace_compiles_wave_one(tmp_path: Any) -> None:
    with Workspace(tmp_path / "empty") as empty:
        assert waves.target_wave(empty.store.conn) == (1, False)


def test_a_wave_may_be_compiled_again_only_while_nothing_of_it_left_the_workspace(ws: Workspace) -> None:
    db = ws.store.conn
    first, second = file_rows(ws)
    assert waves.target_wave(db) == (1, True) and not waves.wave_started(db, 1)
    waves.set_file(ws, first["pk"], status=FileState.UPLOADED)
    assert waves.target_wave(db) == (None, False) and waves.latest_wave_started(db)
    waves.set_file(ws, first["pk"], status=FileState.COMPILED)
    # A manual ingest that answered a request of a file never submitted started the wave too.
    with ws.store.transaction() as tx:
        tx.execute("UPDATE requests SET status = ? WHERE file_pk = ?", (RequestState.ANSWERED, second["pk"]))
    assert waves.wave_started(db, 1)
    with ws.store.transaction() as tx:
        tx.execute("UPDATE requests SET status = ?", (RequestState.PENDING,))
    assert not waves.wave_started(db, 1)
    with ws.store.transaction() as tx:
        waves.keep_aside(tx, "batch_r", first["pk"], first["path"], waves.TOKEN_LIMIT, "failed")
    assert waves.wave_started(db, 1)  # a refused batch was sent, though the file holds none now


def test_a_wave_closes_once_each_of_its_files_is_ingested_or_lost(ws: Workspace) -> None:
    db = ws.store.conn
    first, second = file_rows(ws)
    waves.set_file(ws, first["pk"], status=FileState.INGESTED)
    waves.close_finished_waves(ws)
    assert db.execute("SELECT closed_at FROM waves WHERE n = 1").fetchone()[0] is None
    waves.set_file(ws, second["pk"], status=FileState.LOST)
    waves.close_finished_waves(ws)
    assert db.execute("SELECT closed_at FROM waves WHERE n = 1").fetchone()[0] is not None
    assert waves.target_wave(db) == (2, False)
    with ws.store.transaction() as tx:
        waves.open_wave(tx, 2)
    waves.close_finished_waves(ws)  # a wave without files is no finished wave
    assert db.execute("SELECT closed_at FROM waves WHERE n = 2").fetchone()[0] is None
    with ws.store.transaction() as tx:
        waves.drop_empty_wave(tx, 2)
    assert db.execute("SELECT MAX(n) FROM waves").fetchone()[0] == 1


def test_an_unsent_wave_is_discarded_whole_and_its_paths_returned(ws: Workspace) -> None:
    first, second = file_rows(ws)
    with ws.store.transaction() as db:
        waves.keep_aside(db, "batch_r", first["pk"], first["path"], waves.TOKEN_LIMIT, "failed")
        assert waves.discard_unsent_wave(db, 1) == [first["path"], second["path"]]
    db = ws.store.conn
    for table in ("files", "requests", "waves"):
        assert db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table
    assert db.execute("SELECT file_pk FROM other_batches").fetchone()[0] is None
    assert waves.target_wave(db) == (1, False)
