"""`engine/downloads.py`: a batch's results checked against what the provider reported before they
are believed; a damaged download fetched again, then held; what each API's counts let it check.

Against the in-memory provider of `helpers.fake_backend`, whose downloads a test damages; the
simulated provider's damaged downloads, end to end, are `scenarios/test_downloads.py`'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.engine import downloads
from lexpilot_batch.engine.ingest import IngestStats
from lexpilot_batch.engine.poll import poll_files
from lexpilot_batch.engine.submit import submit_files
from lexpilot_batch.providers.batch import BatchNotFound
from lexpilot_batch.state.states import FileState, RequestState
from lexpilot_batch.state.waves import FileRow
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock
from tests.helpers.engine import prepare_runs
from tests.helpers.fake_backend import FakeBackend, answer, file_rows, request_ids, sending_to


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(clock, "pause", waits.append)
    return waits


def row_of(counts: dict[str, int] | None, status: str = "completed", n: int = 10, **more: Any) -> FileRow:
    row = {
        "n_requests": n,
        "request_counts": json.dumps(counts) if counts is not None else None,
        "batch_status": status,
        "batch_id": "b1",
        "output_path": "responses/w0001/f.output.jsonl",
        "error_path": None,
        **more,
    }
    return row  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("counts", "status", "expected"),
    [
        ({"total": 10, "completed": 8, "failed": 2}, "completed", 10),  # OpenAI's, Mistral's, Anthropic's
        ({"total": 10, "completed": 3, "failed": 1}, "expired", 4),  # what an expired batch ran
        ({"total": 10, "completed": 7, "failed": 0}, "completed", 7),  # counted short: held to its count
        (None, "completed", 10),  # Together's jobs, Gemini's batches: no counts, every request of a completed one
        ({}, "completed", 10),
        ({"total": 0, "completed": 0, "failed": 0}, "completed", 10),  # a platform that counts nothing
        (None, "expired", None),  # no counts, not completed: nothing to hold it to
        (None, "cancelled", None),
        ({"total": 10, "completed": 30, "failed": 0}, "completed", 10),  # never more than the file holds
        ({"total": 10, "completed": 0, "failed": 10}, "failed", None),  # refused as a whole: it ran nothing
    ],
)
def test_what_a_download_is_held_to(counts, status, expected):
    assert downloads.expected_lines(row_of(counts, status)) == expected


def stats(present: int, unreadable: int = 0) -> IngestStats:
    return IngestStats(present=present, unreadable=unreadable)


def test_a_download_is_damaged_by_a_line_that_is_no_result_or_by_answering_fewer_than_counted():
    row = row_of({"total": 10, "completed": 9, "failed": 1})
    assert downloads.damage(row, stats(10)) is None
    assert downloads.damage(row, stats(11)) is None  # (more: an expired batch's never-run lines)
    short = downloads.damage(row, stats(9))
    assert short == ("f.output.jsonl: 9 of its requests answered, where the provider counted 10 (batch b1, completed)")
    assert "2 line(s) are not result lines" in (downloads.damage(row, stats(10, unreadable=2)) or "")
    uncounted = downloads.damage(row_of(None), stats(0))
    assert uncounted is not None and "where it completed: 10" in uncounted
    zeros = downloads.damage(row_of({"total": 0, "completed": 0, "failed": 0}), stats(3))
    assert zeros is not None and "3 of its requests answered, where it completed: 10" in zeros
    assert downloads.damage(row_of(None, "expired"), stats(0)) is None


def sent_file(ws: Workspace, fake: FakeBackend, monkeypatch: pytest.MonkeyPatch):
    session = sending_to(ws, fake, monkeypatch)
    prepare_runs(ws, session, limit=1)
    submit_files(ws, session)
    (row,) = file_rows(ws)
    ids = request_ids(ws.path(row["path"]))
    fake.finish(row["batch_id"], output=[answer(i) for i in ids])
    return session, row, ids


def damaging(fake: FakeBackend, monkeypatch: pytest.MonkeyPatch, times: int, body: bytes = b"<html>502</html>\n"):
    """The first `times` downloads answer `body`, the later ones the file."""
    real = fake.download
    seen: list[str] = []

    def download(file_id: str, dest: Path) -> int:
        seen.append(file_id)
        if len(seen) <= times:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(body)
            return 0
        return real(file_id, dest)

    monkeypatch.setattr(fake, "download", download)
    return seen


def test_a_damaged_download_is_fetched_again_with_backoff_and_the_batch_retrieved_first(ws, monkeypatch, no_waits):
    fake = FakeBackend()
    session, row, ids = sent_file(ws, fake, monkeypatch)
    seen = damaging(fake, monkeypatch, times=2)
    result = poll_files(ws, session)
    after = file_rows(ws)[0]
    assert result.finished == [row["path"]] and not result.held
    assert after["status"] == FileState.INGESTED and after["damaged"] == 2 and after["held"] is None
    assert len(seen) == 3 and no_waits == [2.0, 4.0]  # `DAMAGED_BACKOFF`
    assert fake.count("retrieve") == 3  # each fetch after retrieving the batch again
    statuses = {r[0] for r in ws.store.conn.execute("SELECT status FROM requests")}
    assert statuses == {RequestState.ANSWERED} and len(ids) == 2
    assert not ws.store.conn.execute("SELECT 1 FROM anomalies").fetchone()  # the damaged tries rolled back whole


def test_the_waits_between_fetches_are_told_and_kept_within_outage_wait(ws, monkeypatch, no_waits):
    """Each wait before a fetch again is a wait for the provider (`clock.wait_for_provider`): told, so
    that many damaged batches are no silent hang, and never past `--outage-wait`: a command out of
    time stops there, its damaged download saved, and the next one checks it again."""
    fake = FakeBackend()
    session, row, _ = sent_file(ws, fake, monkeypatch)
    seen = damaging(fake, monkeypatch, times=downloads.TRIES)
    told: list[clock.ProviderWait] = []
    with clock.provider_waits(5.0, told.append), pytest.raises(clock.OutOfTime) as stopped:
        poll_files(ws, session)  # waits of 2 and 4 s; the next, 8 s, would end past 5 s
    assert no_waits == [2.0, 4.0] and [w.pause for w in told] == [2.0, 4.0] and len(seen) == 3
    assert all(row["batch_id"] in w.why and "not result lines" in w.why for w in told)
    assert "fetching it again" in stopped.value.why
    saved = file_rows(ws)[0]
    assert saved["status"] == FileState.DOWNLOADED and saved["damaged"] == 3 and saved["held"] is None
    assert {r[0] for r in ws.store.conn.execute("SELECT status FROM requests")} == {RequestState.PENDING}
    later = sending_to(ws, fake, monkeypatch)  # the next command: the saved download checked, fetched again
    assert poll_files(ws, later).finished == [row["path"]]
    assert file_rows(ws)[0]["status"] == FileState.INGESTED


def test_one_still_damaged_after_its_tries_is_held_and_fetched_again_once_a_command(ws, monkeypatch):
    fake = FakeBackend()
    session, row, _ = sent_file(ws, fake, monkeypatch)
    seen = damaging(fake, monkeypatch, times=downloads.TRIES)
    result = poll_files(ws, session)
    held = file_rows(ws)[0]
    assert result.held == [row["path"]] and result.in_flight == 1 and not result.finished
    assert held["status"] == FileState.DOWNLOADED and held["damaged"] == downloads.TRIES
    assert "not result lines" in held["held"] and "output.jsonl" in held["held"]
    assert {r[0] for r in ws.store.conn.execute("SELECT status FROM requests")} == {RequestState.PENDING}
    assert len(seen) == downloads.TRIES
    assert poll_files(ws, session).held == [row["path"]] and len(seen) == downloads.TRIES  # not again this command
    later = sending_to(ws, fake, monkeypatch)  # the next command: fetched again, whole now
    assert poll_files(ws, later).finished == [row["path"]]
    assert file_rows(ws)[0]["held"] is None and len(seen) == downloads.TRIES + 1


def test_a_batch_the_provider_no_longer_knows_stays_held(ws, monkeypatch):
    fake = FakeBackend()
    session, row, _ = sent_file(ws, fake, monkeypatch)
    damaging(fake, monkeypatch, times=1)
    real = fake.retrieve
    retrieved: list[str] = []

    def retrieve(batch_id: str):
        retrieved.append(batch_id)
        if len(retrieved) > 1:  # the poll's retrieve answered; the one before fetching again, 404
            raise BatchNotFound("HTTP 404")
        return real(batch_id)

    monkeypatch.setattr(fake, "retrieve", retrieve)
    assert poll_files(ws, session).held == [row["path"]]
    held = file_rows(ws)[0]
    assert held["status"] == FileState.DOWNLOADED and "fetching it again: HTTP 404" in held["held"]
