"""`engine/poll.py`: the batches in flight retrieved; an ended batch's result files saved untouched,
then ingested; a batch the provider lost (404 on `LOST_AFTER` polls in a row and absent from its
listing) ends its file as lost; a batch refused for the enqueued-token quota lowers the budget and
its file waits to be created again; a batch older than `--max-wave-age` is cancelled.

A batch's states and its `output_file_id` / `error_file_id` are OpenAI's
(https://platform.openai.com/docs/api-reference/batch/object); the quota refusal is a `failed`
batch whose `errors` hold `token_limit_exceeded` (https://platform.openai.com/docs/guides/batch).
Against the in-memory provider of `helpers.fake_backend`; the last test runs the simulated provider.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from lexpilot_batch.engine import budgets
from lexpilot_batch.engine.poll import MAX_QUOTA_REFUSALS, poll_files
from lexpilot_batch.engine.session import Session
from lexpilot_batch.engine.submit import TamperedFile, submit_files
from lexpilot_batch.errors import ProviderError
from lexpilot_batch.state.states import TRANSPORT, UNEXECUTED, FileState, RequestState
from lexpilot_batch.state.waves import LOST_AFTER
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock
from tests.helpers.engine import open_session, prepare_runs
from tests.helpers.fake_backend import FakeBackend, answer, failure, file_rows, request_ids, sending_to

MODEL = "sim-eval"


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "pause", lambda seconds: None)


def sent(ws: Workspace, fake: FakeBackend, monkeypatch: pytest.MonkeyPatch) -> tuple[Session, dict[str, Any]]:
    """One file of two requests (the LCA generations of one case), its batch created at `fake`."""
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert row["status"] == FileState.SUBMITTED
    return session, row


def requests(ws: Workspace) -> list[dict[str, Any]]:
    return [dict(r) for r in ws.store.conn.execute("SELECT * FROM requests WHERE wave = 1 ORDER BY pk")]


def test_an_ended_batch_is_saved_untouched_then_ingested_and_its_wave_closes(ws, monkeypatch):
    fake = FakeBackend()
    session, row = sent(ws, fake, monkeypatch)
    ids = request_ids(ws.path(row["path"]))
    fake.finish(row["batch_id"], output=[answer(ids[0], "请问借款是否有书面凭证？")], error_lines=[failure(ids[1])])

    result = poll_files(ws, session)
    after = file_rows(ws)[0]
    assert result.finished == [row["path"]] and result.in_flight == 0 and not result.lost
    assert after["status"] == FileState.INGESTED and after["batch_status"] == "completed"
    output = fake.contents[after["output_file_id"]]
    assert ws.path(after["output_path"]).read_bytes() == output  # byte for byte the provider's
    assert ws.path(after["error_path"]).read_bytes() == fake.contents[after["error_file_id"]]
    answered, failed = requests(ws)
    assert (answered["status"], answered["text"]) == (RequestState.ANSWERED, "请问借款是否有书面凭证？")
    assert (failed["status"], failed["error_kind"]) == (RequestState.FAILED, TRANSPORT)
    assert ws.store.conn.execute("SELECT closed_at FROM waves WHERE n = 1").fetchone()[0] is not None
    assert poll_files(ws, session).finished == []  # nothing in flight: nothing polled again
    assert fake.count("download") == 2


def test_a_running_batch_stays_in_flight_with_its_counts(ws, monkeypatch):
    fake = FakeBackend()
    session, row = sent(ws, fake, monkeypatch)
    batch_id = row["batch_id"]
    fake.held[batch_id] = replace(
        fake.held[batch_id], status="in_progress", request_counts={"total": 2, "completed": 1}
    )
    result = poll_files(ws, session)
    after = file_rows(ws)[0]
    assert result.in_flight == 1 and not result.finished and fake.count("download") == 0
    assert (after["status"], after["batch_status"]) == (FileState.SUBMITTED, "in_progress")
    assert json.loads(after["request_counts"]) == {"total": 2, "completed": 1}
    assert result.batches[0]["status"] == "in_progress" and result.batches[0]["requests"] == 2


def test_a_batch_404_on_lost_after_polls_in_a_row_and_unlisted_is_lost_its_requests_due_again(ws, monkeypatch):
    fake = FakeBackend()
    session, row = sent(ws, fake, monkeypatch)
    fake.forget(row["batch_id"])
    for _ in range(LOST_AFTER - 1):
        assert poll_files(ws, session).lost == []  # one 404 may be a provider's hiccup
    assert file_rows(ws)[0]["not_found"] == LOST_AFTER - 1
    result = poll_files(ws, session)
    after = file_rows(ws)[0]
    assert result.lost == [row["path"]] and after["status"] == FileState.LOST
    for request in requests(ws):
        assert (request["status"], request["error_kind"]) == (RequestState.FAILED, UNEXECUTED)
        assert request["error"].startswith(f"batch_lost: the provider no longer knows batch {row['batch_id']}")


def test_a_batch_its_listing_still_shows_is_never_lost_and_a_good_poll_resets_the_count(ws, monkeypatch):
    fake = FakeBackend()
    session, row = sent(ws, fake, monkeypatch)
    fake.not_found.add(row["batch_id"])  # 404 on retrieve, yet listed
    for _ in range(LOST_AFTER + 2):
        result = poll_files(ws, session)
        assert not result.lost and result.in_flight == 1
    assert file_rows(ws)[0]["not_found"] == LOST_AFTER + 2
    fake.not_found.clear()
    poll_files(ws, session)
    assert file_rows(ws)[0]["not_found"] == 0 and file_rows(ws)[0]["status"] == FileState.SUBMITTED


def test_a_quota_refusal_lowers_the_budget_and_the_file_waits_to_be_created_again(ws, monkeypatch):
    fake = FakeBackend()
    session, row = sent(ws, fake, monkeypatch)
    fake.refuse_for_quota(row["batch_id"], "Enqueued token limit reached. Limit: 90,000 enqueued tokens.")
    result = poll_files(ws, session)
    after = file_rows(ws)[0]
    assert result.refused == [row["path"]] and result.in_flight == 1 and not result.finished
    assert after["status"] == FileState.UPLOADED and after["batch_id"] is None
    assert budgets.budget(ws.store.conn, MODEL) == 81_000
    assert all(r["status"] == RequestState.PENDING for r in requests(ws))  # no request failed
    assert fake.count("download") == 0

    submit_files(ws, session)  # created again from the file the provider holds: no second upload
    assert fake.count("upload") == 1 and fake.count("create") == 2
    assert file_rows(ws)[0]["status"] == FileState.SUBMITTED


def test_a_file_refused_max_times_is_ingested_as_failed_and_asked_again(ws, monkeypatch):
    fake = FakeBackend()
    session, row = sent(ws, fake, monkeypatch)
    for i in range(MAX_QUOTA_REFUSALS):
        (row,) = file_rows(ws)
        fake.refuse_for_quota(row["batch_id"], "Enqueued token limit reached.")
        assert poll_files(ws, session).refused == [row["path"]]
        budgets.remember_flags(ws, {MODEL: 10**9 + i})  # room again: a raised quota replaces the learned
        submit_files(ws, session)
    (row,) = file_rows(ws)
    fake.refuse_for_quota(row["batch_id"], "Enqueued token limit reached.")
    result = poll_files(ws, session)
    assert result.finished == [row["path"]] and file_rows(ws)[0]["status"] == FileState.INGESTED
    assert {r["status"] for r in requests(ws)} == {RequestState.FAILED}


def test_a_batch_older_than_the_wave_age_is_cancelled_once(ws, monkeypatch):
    fake = FakeBackend()
    session, row = sent(ws, fake, monkeypatch)
    assert poll_files(ws, session, max_age=3600).cancelled == []
    with ws.store.transaction() as db:
        db.execute("UPDATE files SET submitted_at = submitted_at - 100")
    result = poll_files(ws, session, max_age=60)
    assert result.cancelled == [row["path"]] and fake.held[row["batch_id"]].status == "cancelling"
    assert file_rows(ws)[0]["batch_status"] == "cancelling"
    assert poll_files(ws, session, max_age=60).cancelled == [] and fake.count("cancel") == 1


def test_a_batch_that_ends_as_it_is_cancelled_is_ingested_as_it_ended(ws, monkeypatch):
    """The batch completes between the poll that found it too old and its cancel, which the provider
    refuses (HTTP 400, "Cannot cancel a batch with status 'completed'"): it is ingested in the
    same poll and not said to be cancelled."""
    fake = FakeBackend()
    session, row = sent(ws, fake, monkeypatch)
    ids = request_ids(ws.path(row["path"]))

    def ends_first(batch_id: str) -> Any:
        fake.finish(batch_id, output=[answer(i) for i in ids])
        raise ProviderError(f"cancelling batch {batch_id}: HTTP 400: Cannot cancel a batch with status 'completed'.")

    monkeypatch.setattr(fake, "cancel", ends_first)
    with ws.store.transaction() as db:
        db.execute("UPDATE files SET submitted_at = submitted_at - 100")
    result = poll_files(ws, session, max_age=60)
    assert result.cancelled == [] and result.finished == [row["path"]] and result.in_flight == 0
    assert file_rows(ws)[0]["status"] == FileState.INGESTED
    assert {r["status"] for r in requests(ws)} == {RequestState.ANSWERED}


def test_a_manual_file_waits_for_the_user(ws, monkeypatch):
    session = open_session(ws, backends={"eval": "manual"})
    try:
        prepare_runs(ws, session, limit=1)
        submit_files(ws, session)
        (row,) = file_rows(ws)
        result = poll_files(ws, session)
        assert result.manual == [row["path"]] and result.in_flight == 1 and not result.finished
        assert file_rows(ws)[0]["status"] == FileState.SUBMITTED
    finally:
        session.close()


def test_a_sync_file_changed_after_it_was_compiled_is_not_sent(ws):
    session = open_session(ws, backends={"eval": "sync"})
    try:
        prepare_runs(ws, session, limit=1)
        submit_files(ws, session)
        (row,) = file_rows(ws)
        path = ws.path(row["path"])
        path.write_bytes(path.read_bytes().replace("请".encode(), "您".encode(), 1))
        with pytest.raises(TamperedFile) as refused:
            poll_files(ws, session)
        assert str(refused.value).startswith(f"request file {row['path']} changed on disk")
        assert "doctor --repair" in str(refused.value) and "\n" not in str(refused.value)
        assert file_rows(ws)[0]["status"] == FileState.SUBMITTED and not requests(ws)[0]["text"]
    finally:
        session.close()


# --- moved from engine/test_loop.py -------------------------------------------------------------


def test_a_batch_that_never_finishes_is_cancelled_and_requeued(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        slow = open_session(ws, "latency=3600", max_wave_age=0.2)
        try:
            prepare_runs(ws, slow, stage="lca", limit=3)
            import time

            from lexpilot_batch.engine.loop import poll_and_advance

            poll_and_advance(ws, slow, do_submit=True, wait=False, poll_interval=0)
            time.sleep(0.3)
            for _ in range(50):  # cancel, then wait for `cancelled`, then ingest
                poll_and_advance(ws, slow, do_submit=False, wait=False, poll_interval=0)
                row = ws.store.conn.execute("SELECT status, batch_status FROM files WHERE wave = 1").fetchone()
                if row["status"] == "ingested":
                    break
                time.sleep(0.05)
            assert row["batch_status"] == "cancelled"
            # Every request of the cancelled batch failed as not done and is due again in wave 2.
            failed = ws.store.conn.execute(
                "SELECT COUNT(*) FROM requests WHERE wave = 1 AND status = 'failed'"
            ).fetchone()[0]
            again = ws.store.conn.execute("SELECT COUNT(*) FROM requests WHERE wave = 2 AND attempt = 2").fetchone()[0]
            assert failed == again == 6
        finally:
            slow.close()
