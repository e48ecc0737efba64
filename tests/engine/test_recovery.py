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

from lexpilot_batch import doctor
from lexpilot_batch.engine import recovery
from lexpilot_batch.engine.recovery import CREATE_ATTEMPTS, PROVIDER_SKEW, batch_tag
from lexpilot_batch.engine.session import Session
from lexpilot_batch.engine.submit import submit_files
from lexpilot_batch.engine.sweep import sweep
from lexpilot_batch.errors import ProviderError
from lexpilot_batch.providers.batch import TOKEN_LIMIT, RateLimited
from lexpilot_batch.state import waves
from lexpilot_batch.state.states import FileState
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status import detail
from lexpilot_batch.util import clock
from tests.helpers.clocks import ClientClock
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


# --- our clock is not the provider's --------------------------------------------------------------

HOURS_2 = 7200.0


@pytest.mark.parametrize("tags_batches", [True, False], ids=["tagged", "untagged"])
def test_a_lost_create_is_found_with_our_clock_hours_ahead_of_the_providers(ws, monkeypatch, tags_batches):
    client = ClientClock(monkeypatch, ahead=HOURS_2)
    fake = FakeBackend(tags_batches=tags_batches)  # stamps batches by the real clock
    session = one_file(ws, fake, monkeypatch, create_grace=60.0)
    fake.lose_answers(1)
    result = submit_files(ws, session)
    (row,) = file_rows(ws)
    assert result.submitted == [row["path"]] and fake.count("create") == 1 and row["batch_id"] in fake.held
    assert client.waited == 0  # found at the first look


def test_a_create_left_by_a_command_that_died_is_looked_for_no_longer_than_the_grace_after_the_clock_is_set_back(
    ws, monkeypatch
):
    client = ClientClock(monkeypatch, ahead=HOURS_2)
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch, create_grace=60.0)
    fake.fail("create", KeyboardInterrupt())  # the command stops as the create is sent: nothing made
    with pytest.raises(KeyboardInterrupt):
        submit_files(ws, session)
    assert file_rows(ws)[0]["status"] == FileState.CREATING
    client.ahead = 0.0  # set right: the create now seems to have been sent two hours from now
    submit_files(ws, session)
    assert 0 < client.waited <= 60.0 and fake.count("create") == 2  # looked for within the grace, then created
    assert file_rows(ws)[0]["status"] == FileState.SUBMITTED


def test_a_lost_upload_is_found_with_our_clock_ahead_of_the_providers(ws, monkeypatch):
    ClientClock(monkeypatch, ahead=HOURS_2)
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    fake.add(created_at=fake.now() - 10)  # the account's newest batch: the provider's time before the upload
    fake.lose_uploads(1)
    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert fake.count("upload") == 1 and row["provider_file_id"] in fake.stored and row["status"] == "submitted"
    assert ("uploads", str(row["sent_after"] - PROVIDER_SKEW)) in fake.calls


def test_what_is_left_of_the_grace_is_never_more_than_the_grace(monkeypatch):
    client = ClientClock(monkeypatch)
    now = clock.now()
    assert recovery.grace_left(now - 10, 60.0) == pytest.approx(50.0, abs=1)
    assert recovery.grace_left(now - 3600, 60.0) == 0.0
    client.ahead = -HOURS_2  # the clock set back after the create was sent
    assert recovery.grace_left(now, 60.0) == 60.0
    assert recovery.grace_left(None, 60.0) == 0.0


# --- batches without tags -----------------------------------------------------------------------


def test_an_untagged_lost_create_is_adopted_by_its_size_when_only_one_batch_fits(ws, monkeypatch):
    fake = FakeBackend(tags_batches=False)
    session = one_file(ws, fake, monkeypatch)
    fake.add(request_counts={"total": 3})  # another size: not this file's
    fake.add(request_counts={"total": 2}, created_at=fake.now() - PROVIDER_SKEW - 60)  # before the create was sent
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


# --- copies of the workspace -------------------------------------------------------------------

ANOTHER_COPY = "0123456789abcdef"  # another instance of this workspace (`state.instances`)


def test_the_sweep_cancels_only_its_own_duplicates_and_leaves_another_copys_batches_alone(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert (
        row["instance"] == ws.instance_id
        and fake.held[row["batch_id"]].metadata["lexpilot_instance"] == row["instance"]
    )
    theirs = fake.add(batch_tag(ws, {**row, "instance": ANOTHER_COPY}))  # the same file, sent by a copy
    older = fake.add(batch_tag(ws, {**row, "instance": None}))  # an earlier version's: whose, it cannot say
    other_bytes = fake.add(batch_tag(ws, {**row, "sha256": "f" * 64}))  # this copy's tag, other content
    with ws.store.transaction() as db:
        waves.lost_answer(db, row["pk"])  # a create's answer lost: a batch of its own may be unknown
    mine = fake.add(batch_tag(ws, row))  # a duplicate of its own

    duplicates: list[str] = []
    sweep(ws, session, file_rows(ws), duplicates)
    assert duplicates == [mine.id] and fake.count("cancel") == 1
    assert other_batches(ws) == {
        theirs.id: ("other_copy", "in_progress"),
        older.id: ("other_copy", "in_progress"),
        other_bytes.id: ("other_copy", "in_progress"),
        mine.id: ("duplicate", "cancelling"),
    }
    fake.finish(theirs.id)
    sweep(ws, session, file_rows(ws), duplicates)
    assert other_batches(ws)[theirs.id] == ("other_copy", "completed") and fake.count("cancel") == 1


def test_a_batch_of_this_very_instance_is_no_duplicate_unless_a_create_of_its_file_lost_its_answer(ws, monkeypatch):
    """Every create of the file was answered, so no batch of it can be this copy's and unknown: one
    tagged with this folder's instance and content is a copy's that could not be told from this one
    (a cloned machine), left alone; `status` and `doctor` say so, and what to do."""
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert row["lost_answers"] == 0
    twin = fake.add(batch_tag(ws, row))  # the same tag in every pair: workspace, instance, file, content, create
    duplicates: list[str] = []
    sweep(ws, session, file_rows(ws), duplicates)
    assert duplicates == [] and fake.count("cancel") == 0 and fake.held[twin.id].status == "in_progress"
    assert other_batches(ws) == {twin.id: ("untold_copy", "in_progress")}
    with ws.store.transaction() as db:
        waves.lost_answer(db, row["pk"])
    sweep(ws, session, file_rows(ws), duplicates)  # a copy's once, a copy's for good
    assert duplicates == [] and fake.count("cancel") == 0
    assert "carrying this folder's own instance" in detail.render(detail.collect(ws))
    (found,) = [f for f in doctor.diagnose(ws) if f.kind == doctor.UNTOLD_COPY_BATCHES]
    assert found.severity == "warning" and "doctor --claim-copy" in found.fix and found.targets == (row["path"],)


def test_a_restored_file_leaves_its_running_extra_batch_to_the_sweep_which_cancels_it(ws, monkeypatch):
    """The workspace it was restored from made two batches of the file (a create's answer lost, sent
    again): the latest is adopted, and the other, still running, is a provable duplicate."""
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    (row,) = file_rows(ws)
    late = fake.add(batch_tag(ws, {**row, "instance": ws.instance_id, "creates": 1}))
    latest = fake.add(batch_tag(ws, {**row, "instance": ws.instance_id, "creates": 2}))
    assert submit_files(ws, session).adopted == [row["path"]]
    adopted = file_rows(ws)[0]
    assert adopted["batch_id"] == latest.id and adopted["lost_answers"] == 1
    duplicates: list[str] = []
    sweep(ws, session, file_rows(ws), duplicates)
    assert duplicates == [late.id] and other_batches(ws) == {late.id: ("duplicate", "cancelling")}


def test_a_file_never_adopts_another_copys_batch(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    (row,) = file_rows(ws)
    fake.add(batch_tag(ws, {**row, "instance": ANOTHER_COPY, "creates": 1}), status="completed")
    assert submit_files(ws, session).adopted == [] and fake.count("create") == 1  # a batch of its own


def test_a_restored_file_adopts_its_own_copys_batch_over_a_later_one_of_another_copy(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    (row,) = file_rows(ws)
    ours = fake.add(batch_tag(ws, {**row, "instance": ws.instance_id, "creates": 1}), status="completed")
    fake.add(batch_tag(ws, {**row, "instance": ANOTHER_COPY, "creates": 2}), status="completed")
    assert submit_files(ws, session).adopted == [row["path"]] and file_rows(ws)[0]["batch_id"] == ours.id
    assert fake.count("create") == 0


def test_an_untagged_batch_of_its_upload_is_its_own_only_after_a_lost_answer(ws, monkeypatch):
    """Together's jobs carry no tag but their input file, which a copy of the workspace shares (the
    provider keeps one file per content): a job of the upload that this copy does not know is its
    duplicate only once one of its creates lost its answer."""
    fake = FakeBackend(tags_batches=False)
    session = one_file(ws, fake, monkeypatch)
    submit_files(ws, session)
    (row,) = file_rows(ws)
    theirs = fake.add(input_file_id=row["provider_file_id"])
    sweep(ws, session, file_rows(ws), [])
    assert other_batches(ws) == {theirs.id: ("other_copy", "in_progress")} and fake.count("cancel") == 0

    with ws.store.transaction() as db:
        waves.lost_answer(db, row["pk"])
    late = fake.add(input_file_id=row["provider_file_id"])
    duplicates: list[str] = []
    sweep(ws, session, file_rows(ws), duplicates)
    assert duplicates == [late.id] and other_batches(ws)[late.id] == ("duplicate", "cancelling")


def test_a_lost_answer_is_counted_for_its_file(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    fake.lose_answers(1)
    submit_files(ws, session)
    assert file_rows(ws)[0]["lost_answers"] == 1 and fake.count("create") == 1


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
    with ws.store.transaction() as db:
        waves.lost_answer(db, first["pk"])
    ended_duplicate = fake.add(batch_tag(ws, first), status="completed")

    duplicates: list[str] = []
    listed = sweep(ws, session, file_rows(ws), duplicates)
    assert duplicates == [] and fake.count("cancel") == 0  # an ended duplicate is only kept aside
    assert other_batches(ws) == {ended_duplicate.id: ("duplicate", "completed")}
    assert {for_creating.id, foreign.id, unknown_file.id} <= next(iter(listed.values()))


def test_the_sweep_lists_back_from_the_oldest_batch_in_flight_by_the_providers_clock(ws, monkeypatch):
    fake = FakeBackend()
    session = one_file(ws, fake, monkeypatch)
    submit_files(ws, session)
    (row,) = file_rows(ws)
    assert row["sent_after"] == fake.held[row["batch_id"]].created_at  # none read before: its batch's own
    # Our clock's times say nothing of where to start: only the provider's time read before it was sent.
    waves.set_file(ws, row["pk"], creating_at=9e9, submitted_at=9e9, sent_after=1000.0)
    sweep(ws, session, file_rows(ws), [])
    name, since = fake.calls[-1]
    assert name == "batches" and float(since) == 1000.0 - recovery.SWEEP_MARGIN
    waves.set_file(ws, row["pk"], sent_after=None)  # sent before those times were recorded: all listed
    sweep(ws, session, file_rows(ws), [])
    assert fake.calls[-1] == ("batches", "")
    assert sweep(ws, session, [row | {"status": FileState.SUBMITTED, "backend": "sync"}], []) == {}
