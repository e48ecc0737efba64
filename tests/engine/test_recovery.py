"""`engine/recovery.py`: never billed twice. A create whose answer was lost is looked for before a
second create; a duplicate that appears anyway is cancelled by the sweep and kept aside; without
tags, the lost create's batch is told by its size and, among several, by its results; the batches
of a restored workspace are adopted, the latest create first.

OpenAI's batches carry the `metadata` a create gives them and are listed newest first
(https://platform.openai.com/docs/api-reference/batch/create, `.../batch/list`); Anthropic's
Message Batches take no metadata (https://docs.anthropic.com/en/api/creating-message-batches),
hence the untagged path. Against the in-memory provider of `helpers.fake_backend`, which can lose a
create's answer, commit a create late, and list what a test adds.
"""

from __future__ import annotations

from typing import Any

import pytest

from lexpilot_batch.engine import recovery
from lexpilot_batch.engine.recovery import CLOCK_SKEW, CREATE_ATTEMPTS, batch_tag, sweep
from lexpilot_batch.engine.session import Session
from lexpilot_batch.engine.submit import submit_files
from lexpilot_batch.errors import ProviderError
from lexpilot_batch.providers.batch import TOKEN_LIMIT, RateLimited
from lexpilot_batch.state import waves
from lexpilot_batch.state.states import FileState
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock
from tests.helpers.engine import prepare_runs
from tests.helpers.fake_backend import FakeBackend, answer, file_rows, request_ids, sending_to


@pytest.fixture(autouse=True)
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waited: list[float] = []
    monkeypatch.setattr(clock, "pause", waited.append)
    return waited


def one_file(ws: Workspace, fake: FakeBackend, monkeypatch: pytest.MonkeyPatch, **options: Any) -> Session:
    session = sending_to(ws, fake, monkeypatch, **options)
    prepare_runs(ws, session, limit=1)
    assert len(file_rows(ws)) == 1
    return session


def other_batches(ws: Workspace) -> dict[str, tuple[str, str]]:
    """Batches kept aside: id -> (why, status)."""
    return {r["batch_id"]: (r["why"], r["status"]) for r in ws.store.conn.execute("SELECT * FROM other_batches")}


# --- a create's answer lost ---------------------------------------------------------------------


def test_a_create_committed_a_moment_after_its_lost_answer_is_found_within_the_grace(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch, create_grace=60.0)
    fake.commit_late(listings=2)
    result = submit_files(ws, session)
    (row,) = file_rows(ws)
    (batch,) = fake.held.values()
    assert result.submitted == [row["path"]] and row["batch_id"] == batch.id
    assert fake.count("create") == 1 and fake.count("batches") >= 3  # looked for until it showed


def test_past_the_grace_the_file_is_created_again_and_the_late_batch_is_swept_as_a_duplicate(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)  # grace 0: one look, then the next create
    fake.commit_late(listings=1)
    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert fake.count("create") == 2 and row["batch_id"] in fake.held
    own = row["batch_id"]
    ((_, late),) = fake.late  # made by the first create, not listed yet

    duplicates: list[str] = []
    sweep(ws, session, file_rows(ws), duplicates)  # the late batch shows in this listing
    sweep(ws, session, file_rows(ws), duplicates)
    assert duplicates == [late.id] and fake.held[late.id].status == "cancelling"
    assert fake.count("cancel") == 1 and fake.held[own].status == "validating"  # its own is left alone
    assert other_batches(ws) == {late.id: ("duplicate", "cancelling")}


def test_a_duplicate_that_ends_between_the_listing_and_its_cancel_is_kept_aside_as_it_ended(ws, monkeypatch):
    """The provider refuses to cancel a batch that completed a moment ago (OpenAI: HTTP 400 "Cannot
    cancel a batch with status 'completed'"): the sweep goes on, the batch kept aside as it ended,
    never applied; the refusal stopped the command."""
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    fake.commit_late(listings=1)
    submit_files(ws, session)
    ((_, late),) = fake.late
    real_cancel = fake.cancel

    def ended_meanwhile(batch_id: str):
        fake.finish(batch_id)  # completed between the listing and the cancel
        real_cancel(batch_id)  # recorded as a call
        raise ProviderError(f"cancelling batch {batch_id}: HTTP 400: Cannot cancel a batch with status 'completed'.")

    monkeypatch.setattr(fake, "cancel", ended_meanwhile)
    duplicates: list[str] = []
    sweep(ws, session, file_rows(ws), duplicates)
    sweep(ws, session, file_rows(ws), duplicates)
    assert duplicates == [late.id] and other_batches(ws) == {late.id: ("duplicate", "completed")}
    assert fake.count("cancel") == 1


def test_creates_refused_for_the_rate_limit_wait_as_told_then_give_up(ws, monkeypatch, pauses):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    fake.fail("create", RateLimited("HTTP 429", retry_after=7.0), *[RateLimited("HTTP 429")] * (CREATE_ATTEMPTS - 1))
    with pytest.raises(RateLimited):
        submit_files(ws, session)
    assert fake.count("create") == CREATE_ATTEMPTS and not fake.held
    assert pauses == [7.0, 1.0, 2.0, 4.0, 8.0, 8.0]  # the provider's word, then backoff to 8 s
    assert file_rows(ws)[0]["status"] == FileState.CREATING  # the next command looks, then creates


# --- batches without tags -----------------------------------------------------------------------


def test_an_untagged_lost_create_is_adopted_by_its_size_when_only_one_batch_fits(ws, monkeypatch):
    fake = FakeBackend(tags_batches=False)
    session = one_file(ws, fake, monkeypatch)
    fake.add(request_counts={"total": 3})  # another size: not this file's
    fake.add(request_counts={"total": 2}, created_at=fake.now() - CLOCK_SKEW - 60)  # before the create was sent
    fake.lose_answers(1)
    result = submit_files(ws, session)
    (row,) = file_rows(ws)
    (made,) = [b for b in fake.sources if fake.sources[b] is not None]
    assert result.submitted == [row["path"]] and row["batch_id"] == made and fake.count("create") == 1


def test_several_untagged_candidates_are_told_apart_by_their_results_once_they_end(ws, monkeypatch):
    fake = FakeBackend(tags_batches=False)
    session = one_file(ws, fake, monkeypatch)
    (row,) = file_rows(ws)
    stranger = fake.add(request_counts={"total": 2})  # the same size, created first
    fake.lose_answers(1)
    assert submit_files(ws, session).unresolved  # both running: nothing adopted, nothing created
    (made,) = [b for b in fake.sources if fake.sources[b] is not None]

    fake.finish(stranger.id, output=[answer("0a1b2c3d-0-lca.c.gen-1"), answer("0a1b2c3d-0-lca.u.gen-1")])
    fake.finish(made, output=[answer(cid) for cid in request_ids(ws.path(row["path"]))])
    result = submit_files(ws, session)
    assert result.adopted == [row["path"]] and file_rows(ws)[0]["batch_id"] == made
    assert fake.count("create") == 1 and fake.count("download") == 2  # the stranger's read, then ours
    assert not list(ws.wave_dir("responses", 1).glob(".candidate-*"))  # the candidates' results dropped


# --- a restored workspace -----------------------------------------------------------------------


def test_a_restored_file_adopts_its_latest_create_and_keeps_the_ended_others_aside(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    (row,) = file_rows(ws)
    refused = fake.add(batch_tag(ws, {**row, "creates": 1}), status="failed", request_counts={"total": 2})
    fake.refuse_for_quota(refused.id)
    second = fake.add(batch_tag(ws, {**row, "creates": 2}), status="completed", request_counts={"total": 2})
    stranger = fake.add({"lexpilot_workspace": "another-workspace", "lexpilot_file": row["path"]})

    result = submit_files(ws, session)
    after = file_rows(ws)[0]
    assert result.adopted == [row["path"]] and after["batch_id"] == second.id and after["creates"] == 2
    assert other_batches(ws) == {refused.id: ("token_limit", "failed")}
    assert fake.count("upload") == fake.count("create") == 0 and stranger.id not in other_batches(ws)


def test_a_restored_file_whose_only_batch_was_refused_adopts_it_as_the_first_time(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    (row,) = file_rows(ws)
    refused = fake.add(batch_tag(ws, {**row, "creates": 1}), request_counts={"total": 2})
    info = fake.refuse_for_quota(refused.id)
    assert info.token_limit is not None and info.token_limit["code"] == TOKEN_LIMIT
    submit_files(ws, session)
    assert file_rows(ws)[0]["batch_id"] == refused.id  # the next poll handles the refusal as it did


# --- the sweep ----------------------------------------------------------------------------------


def test_the_sweep_leaves_batches_that_are_not_duplicates_of_a_sent_file(ws, monkeypatch):
    fake = FakeBackend()
    session = sending_to(ws, fake, monkeypatch, max_requests=1)
    prepare_runs(ws, session, limit=1)
    submit_files(ws, session)
    first, second = file_rows(ws)
    waves.set_file(ws, second["pk"], status=FileState.CREATING)  # being created: submit's to adopt
    for_creating = fake.add(batch_tag(ws, {**second, "creates": 1}))
    foreign = fake.add({"lexpilot_workspace": "another", "lexpilot_file": first["path"]})
    unknown_file = fake.add({"lexpilot_workspace": ws.workspace_id, "lexpilot_file": "requests/none.jsonl"})
    ended_duplicate = fake.add(batch_tag(ws, first), status="completed")

    duplicates: list[str] = []
    listed = sweep(ws, session, file_rows(ws), duplicates)
    assert duplicates == [] and fake.count("cancel") == 0  # an ended duplicate is only kept aside
    assert other_batches(ws) == {ended_duplicate.id: ("duplicate", "completed")}
    assert {for_creating.id, foreign.id, unknown_file.id} <= next(iter(listed.values()))


def test_the_sweep_lists_back_from_the_oldest_batch_in_flight(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    submit_files(ws, session)
    (row,) = file_rows(ws)
    waves.set_file(ws, row["pk"], creating_at=1000.0, submitted_at=2000.0)
    sweep(ws, session, file_rows(ws), [])
    name, since = fake.calls[-1]
    assert name == "batches" and float(since) == 1000.0 - recovery.SWEEP_MARGIN
    assert sweep(ws, session, [row | {"status": FileState.SUBMITTED, "backend": "sync"}], []) == {}
