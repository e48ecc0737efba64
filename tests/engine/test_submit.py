"""`engine/submit.py`: a wave's compiled files sent, each step recorded before the next.

A batch file goes `compiled` -> `uploaded` -> `creating` -> `submitted`, one transaction a step, so
that a command stopped between two steps resumes at the next; a file is created only while its
model's enqueued-token budget has room, and one larger than a lowered budget is discarded; sync
and manual files are only marked as sent. Against an in-memory provider (`helpers.fake_backend`) that
fails the calls a test chooses, except where the simulated provider's own listing is the point.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from lexpilot_batch.engine import budgets, submit
from lexpilot_batch.engine.compiler import compile_wave
from lexpilot_batch.engine.loop import submit as submit_command
from lexpilot_batch.engine.recovery import CREATE_ATTEMPTS, UPLOAD_ATTEMPTS, batch_tag, upload_name
from lexpilot_batch.engine.session import Session
from lexpilot_batch.engine.submit import submit_files
from lexpilot_batch.errors import ProviderUnavailable
from lexpilot_batch.providers.batch import BatchInfo, RateLimited
from lexpilot_batch.state.waves import file_row, set_file
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock
from tests.helpers.engine import finish, open_session, prepare_runs, thread_counts
from tests.helpers.fake_backend import FakeBackend, file_rows, sending_to

MODEL = "sim-eval"


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    pauses: list[float] = []
    monkeypatch.setattr(clock, "pause", pauses.append)
    return pauses


def test_a_compiled_file_is_uploaded_then_created_once_each_step_recorded_before_the_next(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    (row,) = file_rows(ws)
    seen: dict[str, Any] = {}
    create = fake.create

    def watched_create(input_file_id: str, metadata: dict[str, str], *args: Any) -> BatchInfo:
        seen.update(file_row(ws.store.conn, row["pk"]))  # what the database says while the create is sent
        return create(input_file_id, metadata, *args)

    monkeypatch.setattr(fake, "create", watched_create)
    sent: list[str] = []
    result = submit_files(ws, session, on_file=sent.append)

    assert result.submitted == sent == [row["path"]] and not result.adopted and not result.waiting
    assert [name for name, _ in fake.calls] == ["batches", "upload", "create"]
    (batch,) = fake.held.values()
    # Before the create: the upload recorded, the create counted and timed.
    assert seen["status"] == "creating" and seen["provider_file_id"] in fake.inputs
    assert seen["creates"] == 1 and seen["creating_at"] is not None and seen["batch_id"] is None
    after = file_row(ws.store.conn, row["pk"])
    assert after["status"] == "submitted" and after["batch_id"] == batch.id
    assert after["provider_file_id"] == seen["provider_file_id"] and after["submitted_at"] is not None
    # The create carries the tag that finds its batch again: workspace, file, content, create number.
    assert batch.metadata == batch_tag(ws, after) and batch.metadata["lexpilot_create"] == "1"
    source = fake.sources[batch.id]
    assert source is not None and source.path == ws.path(row["path"]) and source.model == MODEL


def test_an_upload_that_fails_leaves_the_file_compiled_and_the_next_submit_sends_it(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    fake.fail("upload", ProviderUnavailable("uploading: the provider is down"))
    with pytest.raises(ProviderUnavailable):
        submit_files(ws, session)
    (row,) = file_rows(ws)
    assert row["status"] == "compiled" and row["provider_file_id"] is None and fake.count("create") == 0

    result = submit_files(ws, session)
    assert result.submitted == [row["path"]] and file_rows(ws)[0]["status"] == "submitted"
    assert fake.count("upload") == 2 and fake.count("create") == 1


def test_a_file_uploaded_by_a_stopped_command_is_created_without_a_second_upload(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)

    def killed(*args: Any) -> None:
        raise KeyboardInterrupt  # Ctrl-C after the upload was recorded, before the create

    real = submit.mark_creating
    monkeypatch.setattr(submit, "mark_creating", killed)
    with pytest.raises(KeyboardInterrupt):
        submit_files(ws, session)
    assert file_rows(ws)[0]["status"] == "uploaded" and fake.count("create") == 0
    monkeypatch.setattr(submit, "mark_creating", real)

    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert row["status"] == "submitted" and row["creates"] == 1
    assert fake.count("upload") == 1 and fake.count("create") == 1


def test_an_upload_whose_answer_was_lost_is_found_in_the_listing_not_uploaded_again(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    fake.lose_uploads(1)

    result = submit_files(ws, session)
    (row,) = file_rows(ws)
    assert result.submitted == [row["path"]] and row["status"] == "submitted"
    assert fake.count("upload") == 1 and list(fake.stored) == [row["provider_file_id"]]
    # Uploaded under a name that is this workspace's and these bytes': what the listing is searched for.
    (stored,) = fake.stored.values()
    assert stored.name == upload_name(ws, row) and row["sha256"][:12] in stored.name
    assert stored.name.endswith(row["path"].rsplit("/", 1)[-1]) and row["uploading_at"] is not None


def test_an_upload_a_listing_shows_a_moment_late_is_waited_for(ws, monkeypatch, no_waits):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    fake.lose_uploads(1)
    fake.late_uploads = 1  # the stored file shows at the second look
    submit_files(ws, session)
    assert fake.count("upload") == 1 and len(fake.stored) == 1 and fake.count("uploads") == 2
    assert no_waits == [0.5, 1.0]


def test_a_command_killed_between_an_upload_and_its_record_leaves_no_second_copy(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)

    def killed(*args: Any) -> None:
        raise KeyboardInterrupt  # the provider holds the file, the database does not know its id

    real = submit.mark_uploaded
    monkeypatch.setattr(submit, "mark_uploaded", killed)
    with pytest.raises(KeyboardInterrupt):
        submit_files(ws, session)
    (row,) = file_rows(ws)
    assert row["status"] == "compiled" and row["uploading_at"] is not None and len(fake.stored) == 1
    monkeypatch.setattr(submit, "mark_uploaded", real)

    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert row["status"] == "submitted" and list(fake.stored) == [row["provider_file_id"]]
    assert fake.count("upload") == 1 and fake.count("create") == 1


def test_a_wave_whose_upload_may_have_reached_the_provider_is_not_compiled_again(ws, monkeypatch):
    """`run`, `prepare`, `retry` and `poll-and-advance` without --submit compile before they submit:
    a wave whose upload was sent, its answer lost, counts as started, so that `submit` finds the
    upload instead of a recompiled file (a new row, no upload time) being uploaded a second time."""
    from lexpilot_batch.engine.loop import _compile

    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)

    def killed(*args: Any) -> None:
        raise KeyboardInterrupt

    real = submit.mark_uploaded
    monkeypatch.setattr(submit, "mark_uploaded", killed)
    with pytest.raises(KeyboardInterrupt):
        submit_files(ws, session)
    monkeypatch.setattr(submit, "mark_uploaded", real)
    (before,) = file_rows(ws)
    _compile(ws, session)
    (after,) = file_rows(ws)
    assert after["pk"] == before["pk"] and after["uploading_at"] == before["uploading_at"]
    submit_files(ws, session)
    assert fake.count("upload") == 1 and len(fake.stored) == 1


def test_of_several_lost_uploads_of_a_file_the_newest_is_kept_and_the_others_deleted(ws, monkeypatch):
    now = [time.time()]
    fake = FakeBackend(now=lambda: now[0])
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    (row,) = file_rows(ws)
    stranger = fake.upload(ws.path(row["path"]), "someone-else.jsonl")  # the account's other file
    set_file(ws, row["pk"], uploading_at=now[0])
    for _ in range(2):  # two uploads whose answers were lost, in two commands that died
        now[0] += 10
        fake.upload(ws.path(row["path"]), upload_name(ws, row))
    newest = list(fake.stored)[-1]

    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert row["provider_file_id"] == newest and set(fake.stored) == {stranger, newest}
    assert fake.count("upload") == 3 and fake.count("delete_file") == 1


def test_a_backend_that_lists_no_uploads_uploads_again_after_a_lost_answer(ws, monkeypatch):
    """Without a listing (Gemini's, Mistral's) a lost upload stops the command, as any provider
    failure does, and the next one uploads the file again: the first copy stays at the provider."""
    fake = FakeBackend(lists_uploads=False)
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    fake.lose_uploads(1)
    with pytest.raises(ProviderUnavailable):
        submit_files(ws, session)
    assert file_rows(ws)[0]["status"] == "compiled"

    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert row["status"] == "submitted" and fake.count("upload") == 2 and len(fake.stored) == 2


def test_uploads_refused_for_the_rate_wait_then_give_up_with_the_file_compiled(ws, monkeypatch, no_waits):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    fake.fail("upload", RateLimited("HTTP 429", retry_after=3.0), *[RateLimited("HTTP 429")] * (UPLOAD_ATTEMPTS - 1))
    with pytest.raises(RateLimited):
        submit_files(ws, session)
    assert file_rows(ws)[0]["status"] == "compiled" and fake.count("upload") == UPLOAD_ATTEMPTS and not fake.stored
    assert no_waits == [3.0, 1.0, 2.0]  # the provider's word, then backoff
    submit_files(ws, session)  # the next command: looks (nothing there), then uploads
    assert file_rows(ws)[0]["status"] == "submitted" and len(fake.stored) == 1


def test_a_file_left_creating_whose_batch_exists_is_adopted_not_created_again(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)

    def killed(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt  # killed right after the provider created the batch

    real = submit.record_batch
    monkeypatch.setattr(submit, "record_batch", killed)
    with pytest.raises(KeyboardInterrupt):
        submit_files(ws, session)
    monkeypatch.setattr(submit, "record_batch", real)
    (row,) = file_rows(ws)
    assert row["status"] == "creating" and len(fake.held) == 1

    result = submit_files(ws, session)
    (batch,) = fake.held.values()
    assert result.adopted == result.submitted == [row["path"]]
    assert fake.count("create") == 1 and fake.count("upload") == 1
    assert file_rows(ws)[0]["status"] == "submitted" and file_rows(ws)[0]["batch_id"] == batch.id


def test_a_file_left_creating_with_no_batch_is_created_again_as_its_next_create(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    fake.fail("create", *[RateLimited("creating a batch: HTTP 429")] * CREATE_ATTEMPTS)
    with pytest.raises(RateLimited):
        submit_files(ws, session)
    assert file_rows(ws)[0]["status"] == "creating" and not fake.held

    result = submit_files(ws, session)
    (row,) = file_rows(ws)
    (batch,) = fake.held.values()
    assert result.submitted == [row["path"]] and not result.adopted
    assert row["creates"] == 2 and batch.metadata["lexpilot_create"] == "2"
    assert fake.count("create") == CREATE_ATTEMPTS + 1 and fake.count("upload") == 1


def test_a_create_whose_answer_was_lost_is_found_by_its_tag_and_made_once(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    fake.lose_answers(1)
    result = submit_files(ws, session)
    (batch,) = fake.held.values()
    assert fake.count("create") == 1 and result.submitted == [file_rows(ws)[0]["path"]]
    assert file_rows(ws)[0]["batch_id"] == batch.id


def test_a_batch_made_before_the_database_was_restored_is_adopted_without_an_upload(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    (row,) = file_rows(ws)
    earlier = fake.add(batch_tag(ws, {**row, "creates": 1}), status="completed", request_counts={"total": 2})

    result = submit_files(ws, session)
    assert result.adopted == result.submitted == [row["path"]]
    assert fake.count("upload") == 0 and fake.count("create") == 0
    after = file_rows(ws)[0]
    assert after["status"] == "submitted" and after["batch_id"] == earlier.id and after["creates"] == 1


def test_untagged_batches_of_a_lost_create_that_cannot_be_told_apart_leave_the_file_creating(ws, monkeypatch):
    fake = FakeBackend(tags_batches=False)
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    fake.lose_answers(1)
    fake.add(request_counts={"total": 2})  # a stranger's batch of the same size, still running

    result = submit_files(ws, session)
    (row,) = file_rows(ws)
    assert result.unresolved and result.unresolved[0].startswith(f"{row['path']}: 2 batches of 2 requests")
    assert not result.submitted and row["status"] == "creating" and row["batch_id"] is None
    assert fake.count("create") == 1


@pytest.mark.parametrize("backend", ["sync", "manual"])
def test_sync_and_manual_files_are_only_marked_sent(ws, monkeypatch, backend):
    session = open_session(ws, backends={"eval": backend})

    def no_provider(row: Any) -> None:
        raise AssertionError("nothing is uploaded for a sync or manual file")

    monkeypatch.setattr(session, "batch_backend", no_provider)
    prepare_runs(ws, session, limit=1)
    sent: list[str] = []
    result = submit_files(ws, session, on_file=sent.append)
    (row,) = file_rows(ws)
    assert row["status"] == "submitted" and row["batch_id"] == backend and row["batch_status"] == "in_progress"
    assert row["provider_file_id"] is None and sent == [row["path"]]
    assert (result.manual, result.submitted) == (([row["path"]], []) if backend == "manual" else ([], [row["path"]]))


def shards(ws: Workspace, fake: FakeBackend, monkeypatch: pytest.MonkeyPatch, limit: int) -> Session:
    """A wave of one-request files (two per case), compiled before any budget is known."""
    session = sending_to(ws, fake, monkeypatch, max_requests=1)
    prepare_runs(ws, session, limit=limit)
    return session


def test_files_are_created_while_their_models_budget_has_room_and_the_rest_wait(ws, monkeypatch):
    fake = FakeBackend()
    session = shards(ws, fake, monkeypatch, limit=1)
    first, second = file_rows(ws)
    budgets.remember_flags(ws, {MODEL: first["tokens"] + second["tokens"] - 1})

    result = submit_files(ws, session)
    assert result.submitted == [first["path"]] and result.waiting == [second["path"]]
    assert [r["status"] for r in file_rows(ws)] == ["submitted", "compiled"] and fake.count("upload") == 1

    # Still running: still no room. Once its batch has ended, the second goes.
    assert submit_files(ws, session).waiting == [second["path"]]
    set_file(ws, first["pk"], batch_status="completed")
    assert submit_files(ws, session).submitted == [second["path"]]
    assert [r["status"] for r in file_rows(ws)] == ["submitted", "submitted"]


def test_a_file_that_fills_the_budget_exactly_is_created(ws, monkeypatch):
    fake = FakeBackend()
    session = shards(ws, fake, monkeypatch, limit=1)
    first, second = file_rows(ws)
    budgets.remember_flags(ws, {MODEL: first["tokens"] + second["tokens"]})
    result = submit_files(ws, session)
    assert result.submitted == [first["path"], second["path"]] and not result.waiting


def test_once_a_file_waits_its_models_later_files_wait_too_in_order(ws, monkeypatch):
    fake = FakeBackend()
    session = shards(ws, fake, monkeypatch, limit=3)
    rows = file_rows(ws)
    room = min(r["tokens"] for r in rows[3:])
    # Control: the third file does not fit in what is left, a later one would.
    assert rows[2]["tokens"] > room
    budgets.remember_flags(ws, {MODEL: rows[0]["tokens"] + rows[1]["tokens"] + room})

    result = submit_files(ws, session)
    assert result.submitted == [rows[0]["path"], rows[1]["path"]]
    assert result.waiting == [r["path"] for r in rows[2:]]


def test_a_file_larger_than_a_lowered_budget_waits_while_others_run_then_is_discarded(ws, monkeypatch):
    fake = FakeBackend()
    session = shards(ws, fake, monkeypatch, limit=1)
    first, second = file_rows(ws)
    budgets.remember_flags(ws, {MODEL: first["tokens"] + second["tokens"] - 1})
    assert submit_files(ws, session).waiting == [second["path"]]
    budgets.remember_flags(ws, {MODEL: second["tokens"] - 1})  # lowered below the second file
    assert submit_files(ws, session).waiting == [second["path"]]  # the first still runs: it waits
    set_file(ws, first["pk"], batch_status="completed")
    assert submit_files(ws, session).discarded == [second["path"]]
    assert [r["pk"] for r in file_rows(ws)] == [first["pk"]]


def test_a_file_larger_than_the_whole_budget_is_discarded_and_its_requests_asked_again(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    (row,) = file_rows(ws)
    budgets.remember_flags(ws, {MODEL: row["tokens"] - 1})  # as a quota refusal lowers it

    result = submit_files(ws, session)
    assert result.discarded == [row["path"]] and not result.submitted and not fake.calls
    assert file_rows(ws) == [] and not ws.path(row["path"]).exists()
    assert ws.store.conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == 0

    # Asked again by the next compile, in files cut to the budget, which then fit.
    compiled = compile_wave(ws, session.route)
    assert compiled.wave == 1 and compiled.requests == 2 and len(compiled.files) == 2
    assert all(r["tokens"] < row["tokens"] - 1 for r in file_rows(ws))
    assert submit_files(ws, session).submitted == compiled.files[:1]


def test_crash_between_batch_create_and_commit_adopts_the_batch(tmp_path, monkeypatch):
    """Against the simulated provider: its own listing shows exactly one batch with the file's tag.
    (Moved from `engine/test_loop.py`.)"""
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="lca")
            real_record = submit.record_batch

            def dying_record(*args: Any, **kwargs: Any) -> None:
                raise KeyboardInterrupt  # killed right after the provider created the batch

            monkeypatch.setattr(submit, "record_batch", dying_record)
            with pytest.raises(KeyboardInterrupt):
                submit_command(ws, session)
            monkeypatch.setattr(submit, "record_batch", real_record)
            row = file_rows(ws)[0]
            assert row["status"] == "creating"
            result = submit_command(ws, session)
            assert result.adopted == [row["path"]]
            backend: Any = session.batch_backend(row)  # the OpenAI backend: its SDK client lists
            tag = batch_tag(ws, row)
            matching = [b for b in backend.client.batches.list(limit=100) if (b.metadata or {}) == tag]
            assert len(matching) == 1
            finish(ws, session)
            assert set(thread_counts(ws)) == {"done"}
        finally:
            session.close()
