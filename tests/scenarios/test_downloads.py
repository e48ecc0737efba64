"""A batch's results that come back damaged (issue 44, item 2): whatever the provider sends, nothing
it completed is asked, and paid for, twice.

The simulated provider damages downloads of a file's content (`damaged_download`, `damage`,
`damaged_times`: `simulated.faults`): HTTP 200 and a body whole as far as HTTP can tell, but empty,
a gateway's HTML page, its plain text, cut in the middle of a line, or a line short.

| scenario | guarantee checked |
| --- | --- |
| every result file's first download damaged, one kind at a time (OpenAI's shape) | = fault-free; one batch per file; no request asked twice, no anomaly; each file downloaded twice, its damage counted (`files.damaged`) |
| the same on each native API (Anthropic's counts, Gemini's none, Mistral's counts, Together's none), the kinds drawn per download | the records of the fault-free rehearsal; nothing asked twice, no anomaly |
| every download damaged, every try | `poll-and-advance --wait` ends, the batches held: none of their requests answered, failed or asked again; `status` and `doctor` name them and say what to do; the provider well again, the next command fetches them: = fault-free |
| a command stopped between a damaged download and the next fetch | the next command checks the saved download, fetches it again: = fault-free |

Each scenario fails on the code before `engine.downloads`: there a damaged download was ingested as
it came, its requests failed and were asked again.
"""

from __future__ import annotations

from typing import Any

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine import downloads
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.engine.session import Session
from lexpilot_batch.providers.registry import missing_sdk
from lexpilot_batch.simulated.faults import DAMAGES
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
