"""A batch's results that come back damaged (issue 44, item 2), and an `ingest` that comes too late
(item 5): whatever the provider sends, nothing it completed is asked, and paid for, twice.

The simulated provider damages downloads of a file's content (`damaged_download`, `damage`,
`damaged_times`: `simulated.faults`): HTTP 200 and a body whole as far as HTTP can tell, but empty,
a gateway's HTML page, its plain text, cut in the middle of a line, or a line short.

| scenario | guarantee checked |
| --- | --- |
| every result file's first download damaged, one kind at a time (OpenAI's shape) | = fault-free; one batch per file; no request asked twice, no anomaly; each file downloaded twice, its damage counted (`files.damaged`) |
| the same on each native API (Anthropic's counts, Gemini's none, Mistral's counts, OpenRouter's counts and pages of results in JSON, Together's none), the kinds drawn per download | the records of the fault-free rehearsal; nothing asked twice, no anomaly |
| every download damaged, every try | `poll-and-advance --wait` ends, the batches held: none of their requests answered, failed or asked again; `status` and `doctor` name them and say what to do; the provider well again, the next command fetches them: = fault-free |
| a command stopped between a damaged download and the next fetch | the next command checks the saved download, fetches it again: = fault-free |
| `ingest FILE` of answers to requests whose batch still runs | refused, naming the batch, nothing saved or applied; the paid answers are taken when it ends: = fault-free, no conflict; beside lines of a finished file, those are applied and these only counted |

Each scenario fails on the code before `engine.downloads` and `ingest.answers_coming`: there a
damaged download was ingested as it came, its requests failed and were asked again, and a late
`ingest` took the place of the paid answers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine import downloads
from lexpilot_batch.engine.ingest import IngestStats, ingest_external
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.engine.session import Session
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.registry import missing_sdk
from lexpilot_batch.simulated.faults import DAMAGES
from lexpilot_batch.state.compaction import read_saved, saved_files
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status.summary import summarize
from lexpilot_batch.study.runs import RunSpec
from lexpilot_batch.util import clock
from tests.helpers.engine import finish, open_session
from tests.helpers.faults import Outcome, assert_same_as, retried, run_benchmark
from tests.helpers.native import (  # noqa: F401 - the autouse `quick` is a fixture
    SIMULATED_APIS,
    SimulatedApi,
    quick,
    rehearse,
    run_on_routes,
)

# No LEXPILOT_/OPENAI_ variable of the shell reaches a run; fsync is off (`conftest.no_fsync`).
pytestmark = pytest.mark.usefixtures("no_fsync", "clean_env")


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "pause", lambda seconds: None)  # the backoff between fetches


def result_files(outcome: Outcome) -> int:
    return sum(bool(f[k]) for f in outcome.files for k in ("output_path", "error_path"))


def nothing_asked_twice(outcome: Outcome) -> None:
    assert not retried(outcome), [r["custom_id"] for r in retried(outcome)]
    assert not outcome.failed_requests() and not outcome.anomalies


@pytest.mark.parametrize("kind", DAMAGES)
def test_a_first_download_that_comes_back_damaged_is_fetched_again(tmp_path, baseline, kind):
    outcome = run_benchmark(tmp_path / "ws", f"damaged_download=1,damaged_times=1,damage={kind}")
    assert_same_as(baseline, outcome)  # (with one batch per file: `check_invariants`)
    nothing_asked_twice(outcome)
    server = outcome.server
    downloaded = result_files(outcome)
    assert server[f"damaged_download:{kind}"] == downloaded > 0, server
    assert server["calls:file_content"] == 2 * downloaded  # each fetched once more, and only once
    assert all(f["damaged"] >= 1 and f["held"] is None for f in outcome.files), outcome.files


@pytest.fixture(params=SIMULATED_APIS, ids=str)
def api(request: pytest.FixtureRequest) -> SimulatedApi:
    native: SimulatedApi = request.param
    problem = missing_sdk(native.name)
    if problem:
        pytest.skip(problem)
    return native


def test_each_native_api_fetches_a_damaged_download_again(tmp_path, monkeypatch, api):
    """What each API can be checked against: Anthropic's and Mistral's counts, every request of a
    batch that completed for Together's and Gemini's (no counts)."""
    settings = Settings(user_model=api.model, judge_model=api.model)
    spec = RunSpec(("r1",), (api.model,), "dcg", settings, limit=2)
    fault_free = rehearse(tmp_path / "rehearsed", spec)
    faulty = run_on_routes(tmp_path / "ws", monkeypatch, spec, "damaged_download=1,damaged_times=1,seed=4")
    assert set(faulty["threads"]) == {"done"}
    assert faulty["records"] == fault_free["records"] and faulty["anomalies"] == 0
    assert {v[2] for v in faulty["requests"].values()} == {1}  # attempt 1 only: nothing asked twice
    assert faulty["server"]["damaged_download"] >= len(faulty["files"]) > 0
    assert all(f["damaged"] >= 1 and f["held"] is None for f in faulty["files"])


def test_results_that_stay_damaged_hold_their_batch_until_they_come_whole(tmp_path, baseline):
    held: dict[str, Any] = {}

    def drive(ws: Workspace, session: Session) -> None:
        session.close()
        broken = open_session(ws, "damaged_download=1,damage=html+missing_line,seed=2", retries=8)
        try:
            left = poll_and_advance(ws, broken, do_submit=True, wait=True, poll_interval=0)  # ends: held
        finally:
            broken.close()
        held["left"] = left
        held["requests"] = [dict(r) for r in ws.store.conn.execute("SELECT status, attempt FROM requests")]
        held["summary"] = summarize(ws)
        held["findings"] = doctor.diagnose(ws)
        held["files"] = [dict(r) for r in ws.store.conn.execute("SELECT * FROM files")]
        session = open_session(ws, "", retries=8)  # the provider well again: the next command
        try:
            finish(ws, session)
        finally:
            session.close()

    outcome = run_benchmark(tmp_path / "ws", drive=drive)
    assert_same_as(baseline, outcome)
    nothing_asked_twice(outcome)
    left = held["left"]
    assert left["held"] == left["in_flight"] > 0
    # Held: none of its requests answered, failed, or asked again.
    assert {(r["status"], r["attempt"]) for r in held["requests"]} == {("pending", 1)}
    summary = held["summary"]
    assert "doctor" in summary["next"] and any("held" in b for b in summary["blockers"])
    assert any("--accept-damaged" in b for b in summary["blockers"])
    findings = held["findings"]
    assert {f.kind for f in findings} == {doctor.DOWNLOAD_HELD}
    assert len(findings) == left["held"] and all("poll-and-advance" in f.fix for f in findings)
    assert all(f["held"] and f["damaged"] == downloads.TRIES for f in held["files"])
    assert all(f["held"] is None for f in outcome.files)


def test_a_command_stopped_between_a_damaged_download_and_the_next_fetch_loses_nothing(tmp_path, baseline, monkeypatch):
    class Stopped(Exception):
        pass

    def stop(seconds: float) -> None:
        monkeypatch.setattr(downloads.clock, "pause", lambda seconds: None)
        raise Stopped  # killed in the backoff: the damaged download saved and recorded

    def drive(ws: Workspace, session: Session) -> None:
        session.close()
        broken = open_session(ws, "damaged_download=1,damaged_times=1,damage=truncated", retries=8)
        monkeypatch.setattr(downloads.clock, "pause", stop)
        try:
            with pytest.raises(Stopped):
                finish(ws, broken)
        finally:
            broken.close()
        [saved] = [dict(r) for r in ws.store.conn.execute("SELECT * FROM files WHERE status = 'downloaded'")]
        assert saved["damaged"] == 1 and saved["held"] is None
        session = open_session(ws, "", retries=8)
        try:
            finish(ws, session)
        finally:
            session.close()

    outcome = run_benchmark(tmp_path / "ws", drive=drive)
    assert_same_as(baseline, outcome)
    nothing_asked_twice(outcome)


def forged_results(ws: Workspace, wave: int) -> Path:
    """A result file answering every request of `wave` with a forged answer, as a user might have
    run them elsewhere."""
    lines = []
    for (custom_id,) in ws.store.conn.execute("SELECT custom_id FROM requests WHERE wave = ? ORDER BY pk", (wave,)):
        body = {
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "伪造的回答。"}, "finish_reason": "stop"}
            ]
        }
        lines.append({"custom_id": custom_id, "response": {"status_code": 200, "body": body}, "error": None})
    path = ws.root.parent / f"elsewhere-w{wave}.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.slow  # a whole study with an ingest held back: about 7 s
def test_a_late_ingest_never_takes_the_place_of_an_answer_a_batch_will_deliver(tmp_path, baseline):
    seen: dict[str, object] = {}

    def sent(ws: Workspace, wave: int) -> bool:
        query = "SELECT COUNT(*) FROM files WHERE wave = ? AND status = 'submitted'"
        return ws.store.conn.execute(query, (wave,)).fetchone()[0] > 0

    def drive(ws: Workspace, session: Session) -> None:
        session.close()
        slow = open_session(ws, "latency=3", retries=8)  # each batch runs for 3 s
        try:
            poll_and_advance(ws, slow, do_submit=True, wait=False, poll_interval=0)
            assert sent(ws, 1)
            with pytest.raises(LexpilotError) as refused:
                ingest_external(ws, forged_results(ws, 1))
            seen["refused"] = str(refused.value)
            seen["saved"] = sorted(p.name for p in (ws.root / "responses").rglob("ingested-*"))
            decided = "SELECT COUNT(*) FROM requests WHERE status != 'pending'"
            seen["decided"] = ws.store.conn.execute(decided).fetchone()[0]
            for _ in range(1000):  # wave 1 ends (its paid answers taken), wave 2 is sent
                poll_and_advance(ws, slow, do_submit=True, wait=False, poll_interval=0)
                if sent(ws, 2):
                    break
                time.sleep(0.02)
            # One file for both: wave 1's own answers again (nothing changes) and forged answers
            # for wave 2, still running: the first taken as duplicates, the others only counted.
            both = ws.root.parent / "both.jsonl"
            both.write_bytes(
                b"".join(read_saved(p) for p in saved_files(ws.root / "responses" / "w0001", "*.output.jsonl"))
            )
            with open(both, "ab") as fh:
                fh.write(forged_results(ws, 2).read_bytes())
            seen["both"] = ingest_external(ws, both)[0]
            seen["wave 2"] = ws.store.conn.execute("SELECT COUNT(*) FROM requests WHERE wave = 2").fetchone()[0]
        finally:
            slow.close()
        session = open_session(ws, "", retries=8)
        try:
            finish(ws, session)
        finally:
            session.close()

    outcome = run_benchmark(tmp_path / "ws", drive=drive)
    assert_same_as(baseline, outcome)
    nothing_asked_twice(outcome)  # no paid answer dropped as a conflict either
    refused = str(seen["refused"])
    assert "a provider will answer" in refused and "requests/w0001/" in refused and "nothing of this file" in refused
    assert seen["saved"] == [] and seen["decided"] == 0
    both = seen["both"]
    assert isinstance(both, IngestStats)
    assert both.coming == seen["wave 2"] and both.duplicates > 0 and both.answered == both.conflicts == 0
    assert not any("伪造" in (r["text"] or "") for r in outcome.requests)
