"""A week-long run against real providers (issue 16), end to end: the whole benchmark (`--stage
all`, a few cases) through the simulated provider over real HTTP, with what a week meets and the
engine was not built for, each scenario ending equal to the fault-free run ("= fault-free": every
thread done, the same records, the same steps answered and requested; `helpers.faults`).

`helpers.faults.check_invariants` holds after every scenario too: nothing unusable scored, attempts
in order, and on the provider one batch per file besides the batches kept aside (refused for the
quota, or duplicates cancelled), none of which is ever applied.

| item | scenario | guarantee checked |
| --- | --- | --- |
| 1 | every line fails until every thread is failed; `retry` (a selection, then all) against a healthy provider | = fault-free; `status` shows each retry; `report` needs no `--partial` |
| 2 | creates that commit after the client's timeout, with a grace period | = fault-free; no second batch ever created |
| 2 | the same with no grace period | = fault-free; the second batches are found by the poll's listing and cancelled, never applied |
| 2 | a kill during a create, the batch committed a moment later, a quick rerun | = fault-free; the rerun finds it and adopts it |
| 3 | a provider restart that forgets every batch in flight, twice | = fault-free; `doctor` reports the 404s and `--repair` declares the batch lost; unrepaired, the poll does after `LOST_AFTER` 404s; no `--retries` used |
| 4 | an enqueued-token quota per model the workspace is not told | = fault-free; refusals lower the budget, files are cut smaller and wait their turn; no request fails |
| 4 | the same quota given with `--max-enqueued-tokens` | = fault-free; no refusal at all; files wait for room and go as others finish |
| 5 | file limits given to `prepare` only | = fault-free; every later wave keeps them; a conflicting flag is refused naming the stored value |
| 6 | `finish_reason=content_filter` with partial text; refusals | = fault-free; never scored, failed as `invalid` / `refusal` and retried |
| 6 | HTTP 400 lines | the thread fails at once with the provider's message (one attempt); `retry` then ends = fault-free |
| 6 | sustained HTTP 429 on the sync backend | = fault-free (sync); no request failed: 429s are sent again, using no attempt |
| 7 | commands on a folder that is no workspace; a failed `prepare` | refused, nothing created; hints repeat `--root`; the real workspace then ends = fault-free |
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lexpilot_batch import doctor
from lexpilot_batch.cli import app
from lexpilot_batch.engine.loop import poll_and_advance, poll_and_advance_once
from lexpilot_batch.engine.loop import retry as do_retry
from lexpilot_batch.engine.rearm import RetrySelection
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.engine.submit import submit_files
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend
from lexpilot_batch.providers.routing.endpoints import VLLM_ENDPOINT
from lexpilot_batch.providers.routing.routes import RouteRules, resolve_route
from lexpilot_batch.report import results
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.state import compaction
from lexpilot_batch.state.waves import LOST_AFTER
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status import detail
from tests.helpers.engine import finish, open_session, rounds
from tests.helpers.faults import LIMIT, assert_same_as, finish_despite, retried, run_benchmark

THREADS = 6 * LIMIT


# No LEXPILOT_/OPENAI_ variable of the shell reaches a run; fsync is off (`conftest.no_fsync`).
pytestmark = pytest.mark.usefixtures("no_fsync", "clean_env")


def healthy_after(faults: str, **options) -> object:
    """A drive: run with `faults` until nothing is left (threads fail), then, on a healthy provider,
    `retry` every failed thread and finish."""

    def drive(ws: Workspace, session: Session) -> None:
        finish(ws, session)
        session.close()
        assert {t["task"] for t in detail.collect(ws)["failed_threads"]}, "no thread failed"
        again = open_session(ws, "", retries=8)
        try:
            retry_and_finish(ws, again)
        finally:
            again.close()

    return drive


def retry_and_finish(ws: Workspace, session: Session) -> None:
    result, compiled = do_retry(ws, session, RetrySelection())
    assert result.threads and compiled.compiled
    finish(ws, session)


# --- 1. failed threads can be retried ---------------------------------------------------------


def test_failed_threads_are_retried_against_a_healthy_provider(tmp_path, baseline):
    def drive(ws: Workspace, session: Session) -> None:
        finish(ws, session)  # every line fails, --retries 2: every thread fails
        session.close()
        assert all(s == "failed" for (s,) in ws.store.conn.execute("SELECT status FROM threads"))
        with pytest.raises(LexpilotError, match=r"retry.*--root"):
            results.check_complete(results.load_run_results(ws), "report", ws.root)
        # The failed waves are closed and compacted: retry needs none of their files.
        assert ws.store.conn.execute("SELECT COUNT(*) FROM compacted").fetchone()[0] > 0
        again = open_session(ws, "", retries=8)
        try:
            case = ws.store.conn.execute("SELECT case_number FROM cases WHERE idx = 0").fetchone()[0]
            some, compiled = do_retry(ws, again, RetrySelection(tasks=("lca",), cases=(case,)))
            assert (some.threads, some.by_task, some.failed_left) == (2, {"lca": 2}, THREADS - 2)
            assert compiled.compiled and compiled.requests == 2
            with pytest.raises(ConfigError, match="--task must be one of"):
                do_retry(ws, again, RetrySelection(tasks=("lcb",)))
            rest, _ = do_retry(ws, again, RetrySelection())
            assert rest.threads == THREADS - 2
            finish(ws, again)
        finally:
            again.close()

    outcome = run_benchmark(tmp_path / "ws", "line_error=1", retries=2, drive=drive)
    assert_same_as(baseline, outcome)
    shown = outcome.status["retries"]
    assert [r["threads"] for r in shown] == [2, THREADS - 2]
    assert shown[0]["selection"]["tasks"] == ["lca"] and shown[0]["after_wave"] >= 2
    assert f"Retried: {THREADS} thread(s) in 2 retry command(s)" in outcome.rendered
    # Fresh attempts: the retried steps went past --retries 2.
    assert max(r["attempt"] for r in outcome.requests) == 3
    with Workspace(tmp_path / "ws", writable=False) as ws:
        results.check_complete(results.load_run_results(ws), "report")  # no --partial needed
        assert compaction.verify(ws) == [] and not compaction.missing(ws)
    printed = CliRunner().invoke(app, ["report", "--root", str(tmp_path / "ws"), "--format", "json"])
    assert printed.exit_code == 0, printed.output


# --- 2. a lost create answer never bills twice ------------------------------------------------


def test_a_create_committed_after_the_timeout_is_found_within_the_grace_period(tmp_path, baseline):
    spec = "late_create=0.3,slow_seconds=0.5,http_routes=create_batch,seed=2"
    outcome = run_benchmark(tmp_path / "ws", spec, timeout=0.25, create_grace=3.0)
    assert_same_as(baseline, outcome)
    assert outcome.server["late_create"] >= 2
    assert not outcome.other_batches  # never a second batch
    assert outcome.server["calls:create_batch"] == len(outcome.files)


@pytest.mark.slow  # a week of lost creates and their duplicates: about 9 s
def test_without_a_grace_period_the_duplicates_are_cancelled_and_never_applied(tmp_path, baseline):
    spec = "late_create=0.3,slow_seconds=0.5,latency=0.6,http_routes=create_batch,seed=2"
    outcome = run_benchmark(tmp_path / "ws", spec, timeout=0.25, create_grace=0.0)
    assert_same_as(baseline, outcome)
    duplicates = [b for b in outcome.other_batches if b["why"] == "duplicate"]
    assert duplicates, "no create committed late enough to be created twice"
    assert {b["status"] for b in duplicates} <= {"cancelling", "cancelled"}
    assert outcome.server["calls:cancel_batch"] == len(duplicates)


def test_a_kill_during_a_create_then_a_quick_rerun_adopts_the_late_batch(tmp_path, baseline, monkeypatch):
    real = OpenAIBatchBackend.create
    killed: list[str] = []

    class Killed(Exception):
        pass

    def create(self, input_file_id, metadata, endpoint=None, source=None):
        if killed:
            return real(self, input_file_id, metadata, endpoint, source)
        killed.append(metadata["lexpilot_file"])
        # The request is on its way and the provider commits it a moment later; we die now.
        threading.Timer(0.4, real, (self, input_file_id, metadata, endpoint)).start()
        raise Killed

    monkeypatch.setattr(OpenAIBatchBackend, "create", create)
    outcome = run_benchmark(tmp_path / "ws", "", create_grace=3.0, drive=finish_despite(Killed))
    assert_same_as(baseline, outcome)
    assert killed and not outcome.other_batches
    assert outcome.server["calls:create_batch"] == len(outcome.files)


# --- 3. a batch the provider lost -------------------------------------------------------------


def test_batches_a_restarted_provider_forgot_are_lost_and_sent_again(tmp_path, baseline):
    seen: dict[str, Any] = {}

    def forget(ws: Workspace, session: Session) -> None:
        assert session._server is not None
        assert session._server.forget_batches() > 0

    def drive(ws: Workspace, session: Session) -> None:
        # Wave 1 in flight; the provider restarts and forgets it. One poll: a 404, not yet lost.
        poll_and_advance_once(ws, session, do_submit=True)
        forget(ws, session)
        poll_and_advance_once(ws, session, do_submit=True)
        found = [f for f in doctor.diagnose(ws) if f.kind == doctor.BATCH_LOST]
        assert len(found) == 1 and found[0].repairable and "404" in found[0].detail
        seen["repaired"] = doctor.repair(ws, found)
        # Later, a wave in flight is forgotten again, and the polls declare it lost by themselves.
        for _ in range(3):
            poll_and_advance_once(ws, session, do_submit=True)
        forget(ws, session)
        finish(ws, session)

    outcome = run_benchmark(tmp_path / "ws", "latency=0.3", drive=drive)
    assert_same_as(baseline, outcome)
    assert any("declared lost" in line for line in seen["repaired"])
    lost = [f for f in outcome.files if f["status"] == "lost"]
    assert len(lost) >= 2 and all(f["batch_status"] == "lost" for f in lost)
    mine = [r for r in outcome.requests if r["file_pk"] in {f["pk"] for f in lost}]
    assert mine and all(r["error_kind"] == "unexecuted" and r["error"].startswith("batch_lost") for r in mine)
    assert any(f["not_found"] >= LOST_AFTER for f in lost)
    assert not [r for r in outcome.failed_requests() if r["error_kind"] != "unexecuted"]
    # A lost file ends its wave like an ingested one: its request file is compacted with the rest,
    # and doctor finds nothing amiss.
    with Workspace(tmp_path / "ws", writable=False) as ws:
        compacted = {r[0] for r in ws.store.conn.execute("SELECT path FROM compacted")}
        assert {f["path"] for f in lost} <= compacted and compaction.verify(ws) == []
        assert not [f for f in doctor.diagnose(ws) if f.severity in ("error", "warning")]


# --- 4. enqueued-token quotas -----------------------------------------------------------------

QUOTA = 8000  # simulated prompt tokens per model: wave 1's one file holds about 14,500
QUOTA_SPEC = f"token_limit={QUOTA},latency=0.15"


def test_an_unknown_quota_is_learned_from_refusals_and_nothing_fails(tmp_path, baseline):
    outcome = run_benchmark(tmp_path / "ws", QUOTA_SPEC)
    assert_same_as(baseline, outcome)
    refused = [b for b in outcome.other_batches if b["why"] == "token_limit"]
    assert refused
    assert not outcome.failed_requests() and not retried(outcome)
    learned = outcome.status["token_budgets"]
    assert learned["sim-eval"]["budget"] == int(QUOTA * 0.9) and learned["sim-eval"]["budget_source"] == "learned"
    assert sum(f["wave"] == 1 for f in outcome.files) > 1  # wave 1 cut to the learned budget


def test_a_given_quota_is_never_exceeded(tmp_path, baseline):
    waiting: list[int] = []

    def drive(ws: Workspace, session: Session) -> None:
        for _ in rounds():
            waiting.append(len(submit_files(ws, session).waiting))
            left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            if left["in_flight"] == 0 and left["unsubmitted"] == 0:
                return
        raise AssertionError("did not finish")

    budgets = {m: QUOTA for m in ("sim-eval", "DeepSeek-V4.1-Flash", "DeepSeek-R1")}
    outcome = run_benchmark(tmp_path / "ws", QUOTA_SPEC, drive=drive, max_enqueued_tokens=budgets)
    assert_same_as(baseline, outcome)
    assert not outcome.other_batches and not outcome.failed_requests()
    assert max(waiting) > 0, "no file ever waited for room"
    assert sum(f["wave"] == 1 for f in outcome.files) >= 4
    assert outcome.status["token_budgets"]["sim-eval"]["budget_source"] == "flag"


# --- 5. settings hold for the whole workspace -------------------------------------------------


def test_file_limits_given_to_prepare_hold_for_every_wave(tmp_path, baseline):
    def drive(ws: Workspace, session: Session) -> None:
        session.close()
        later = open_session(ws, "", retries=8)  # no --max-requests-per-file this time
        try:
            finish(ws, later)
        finally:
            later.close()
        with pytest.raises(ConfigError, match=r"--max-requests-per-file 7 \(this workspace uses 4\)"):
            open_session(ws, "", max_requests=7)

    outcome = run_benchmark(tmp_path / "ws", "", drive=drive, max_requests=4)
    assert_same_as(baseline, outcome)
    assert max(f["n_requests"] for f in outcome.files) == 4 and max(f["wave"] for f in outcome.files) > 2
    for f in outcome.files:
        # Finished waves' files are kept compressed (`compaction`): read through it.
        lines = compaction.read_saved(tmp_path / "ws" / f["path"]).decode("utf-8").splitlines()
        assert {json.loads(line)["url"] for line in lines} == {f["url"]}


def test_files_for_vllm_name_the_path_vllm_accepts_whatever_the_profile():
    rules = RouteRules(
        choices={"eval": "manual"},
        profiles={"eval": "azure"},
        environ={"OPENAI_BASE_URL": "https://x.openai.azure.com/openai/v1"},
    )
    assert resolve_route("eval", "gpt-4o-mini", None, rules).limits.endpoint == VLLM_ENDPOINT
    batch = RouteRules(profiles={"eval": "azure"}, environ={"OPENAI_BASE_URL": "https://x.openai.azure.com/openai/v1"})
    assert resolve_route("eval", "gpt-4o-mini", None, batch).limits.endpoint == "/chat/completions"


# --- 6. answers that must not be scored or retried blindly -----------------------------------


@pytest.mark.parametrize(
    ("spec", "kind", "error"),
    [
        pytest.param(  # an unusable answer like the malformed ones of scenarios/test_faults.py: `-m slow`
            "content_filter=0.15,seed=1",
            "invalid",
            "filtered by the provider (finish_reason=content_filter)",
            marks=pytest.mark.slow,
        ),
        ("refusal=0.15,seed=1", "refusal", "refusal: 抱歉"),
    ],
    ids=["content_filter", "refusal"],
)
def test_filtered_and_refused_answers_are_never_scored(tmp_path, baseline, spec, kind, error):
    outcome = run_benchmark(tmp_path / "ws", spec)
    assert_same_as(baseline, outcome)
    failed = outcome.failed_requests()
    assert len(failed) >= 3 and all(r["error_kind"] == kind and r["error"].startswith(error) for r in failed)


def test_a_permanent_4xx_fails_the_thread_at_once_and_retry_mends_it(tmp_path, baseline):
    seen: dict[str, Any] = {}

    def drive(ws: Workspace, session: Session) -> None:
        finish(ws, session)
        failed = detail.collect(ws)["failed_threads"]
        seen["reasons"] = [t["reason"] for t in failed]
        seen["attempts"] = ws.store.conn.execute(
            "SELECT MAX(attempt) FROM requests WHERE error_kind = 'permanent'"
        ).fetchone()[0]
        session.close()
        again = open_session(ws, "", retries=8)
        try:
            retry_and_finish(ws, again)
        finally:
            again.close()

    outcome = run_benchmark(tmp_path / "ws", "line_400=0.2,seed=1", retries=8, drive=drive)
    assert_same_as(baseline, outcome)
    reasons = seen["reasons"]
    assert reasons and all("refused by the provider, which no retry can change: HTTP 400" in r for r in reasons)
    assert seen["attempts"] == 1  # not --retries 8 waves of it


class SyncProvider:
    def __init__(self, state: Path, faults: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.server = SimulatedServer(state, faults=parse_faults(faults))
        self.server.start()
        monkeypatch.setenv("OPENAI_BASE_URL", self.server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")

    def session(self, ws: Workspace) -> Session:
        backends: dict[str, str | None] = {"eval": "sync", "user": "sync", "judge": "sync"}
        return Session(ws, ProviderOptions(backends=backends, retries=2))


def test_sustained_429_on_the_sync_backend_uses_no_attempt(tmp_path, monkeypatch):
    healthy = SyncProvider(tmp_path / "p0", "", monkeypatch)
    try:
        expected = run_benchmark(tmp_path / "ws0", session_factory=healthy.session)
    finally:
        healthy.server.stop()
    limited = SyncProvider(
        tmp_path / "p1", "http_429=0.75,retry_after=0.002,http_routes=chat_completion,seed=3", monkeypatch
    )
    try:
        outcome = run_benchmark(tmp_path / "ws1", session_factory=limited.session)
        stats = Counter(limited.server.stats)
    finally:
        limited.server.stop()
    assert_same_as(expected, outcome)
    assert not outcome.failed_requests() and not retried(outcome)
    # Beyond the SDK's 5 retries: 0.75^6 of the calls, sent again by the runner, not failed.
    assert stats["http_429"] > stats["calls"] / 2


# --- 7. commands outside a workspace ----------------------------------------------------------


def test_commands_refuse_a_folder_with_no_workspace_and_create_nothing(tmp_path, baseline):
    cli = CliRunner()
    elsewhere = tmp_path / "typo"
    empty = tmp_path / "empty"
    empty.mkdir()

    def drive(ws: Workspace, session: Session) -> None:
        for args in (
            ["submit"],
            ["poll-and-advance", "--submit"],
            ["status"],
            ["report"],
            ["retry"],
            ["export", "--out", str(tmp_path / "out")],
            ["ingest", str(tmp_path / "nothing.jsonl")],
            ["doctor"],
        ):
            for folder in (elsewhere, empty):
                result = cli.invoke(app, [*args, "--root", str(folder)])
                assert result.exit_code != 0, (args, result.output)
                assert isinstance(result.exception, LexpilotError | SystemExit), (args, result.exception)
                assert not elsewhere.exists() and not any(empty.iterdir()), args
        # A prepare that fails leaves nothing, in a new folder as in an empty one.
        for folder in (elsewhere, empty):
            bad = cli.invoke(
                app, ["prepare", "--model", "m", "--dataset", str(tmp_path / "no.json"), "--root", str(folder)]
            )
            assert isinstance(bad.exception, LexpilotError), bad.output
            assert not elsewhere.exists() and not any(empty.iterdir())
        finish(ws, session)

    outcome = run_benchmark(tmp_path / "ws", "", drive=drive)
    assert_same_as(baseline, outcome)
    message = str(cli_error(["status", "--root", str(elsewhere)]))
    assert "no lexpilot-batch workspace here" in message and f"--root {elsewhere}" in message


def cli_error(args: list[str]) -> BaseException | None:
    return CliRunner().invoke(app, args).exception


def test_printed_hints_repeat_the_root(tmp_path):
    root = tmp_path / "my ws"
    cli = CliRunner()
    prepared = cli.invoke(
        app,
        ["prepare", "--stage", "lca", "--model", "sim-eval", "--limit", "1", "--provider", "simulated"]
        + ["--eval-backend", "manual", "--root", str(root)],
    )
    assert prepared.exit_code == 0, prepared.output
    assert f'lexpilot-batch ingest "{root.as_posix()}/responses/w0001/' in prepared.output
    assert f'--root "{root}"' in prepared.output
    assert f'-i "{root.as_posix()}/requests/w0001/' in prepared.output
    lines = (root / "requests" / "w0001").glob("*.jsonl")
    assert {json.loads(line)["url"] for path in lines for line in path.read_text("utf-8").splitlines()} == {
        VLLM_ENDPOINT
    }
