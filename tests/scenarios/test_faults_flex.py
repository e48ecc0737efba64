"""The flex tier under faults (`--tail auto`, `engine.tail`; `providers.sync`, `engine.poll`): each
scenario ends equal to the fault-free batch run (`conftest.baseline`), and nothing whose answer was
saved is sent again.

OpenAI's Flex processing answers 429 "Resource Unavailable" when it lacks capacity, charges nothing
for it and advises retrying with backoff (platform.openai.com/docs/guides/flex-processing); Gemini's
Flex inference is "best-effort" (ai.google.dev/gemini-api/docs/flex-inference). The simulated
provider's `flex_429` fault refuses flex calls so (`simulated.chat`).

| scenario | guarantee checked |
| --- | --- |
| flex refusing for a while (`flex_429=0.5`) | = fault-free; every wave on flex, refusals backed off without using an attempt (no request retried), each request answered once |
| flex refusing for good (`flex_429=1`) | = fault-free; each flex file falls back: recorded as cancelled, its model in `flex_refused`, its requests asked again as batches (never run: no attempt used up), every later wave on batches |
| a crash between flex answers and their record | = fault-free after running again; the saved lines are not sent again (each custom_id once in the output, at most the calls in flight at the crash answered twice) |
| a kill with several files of a pass in flight (`sync.at_once.run_files`: the models' files at once) | = fault-free after running again; each custom_id once in every output, at most one call per model in flight answered twice per kill |
| rate limits tightening mid-wave (`simulated.ratelimits`: a mid-tier limit cut to 20 requests a minute after 30 calls) | = fault-free; every wave on flex, each request answered once (no 429'd call ran), the 429s backed off without using an attempt, the adaptive window (`providers.sync.window`) halved |
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.providers.sync import runner as sync_module
from lexpilot_batch.providers.sync.runner import FLEX_ROUNDS
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.faults import Faults
from lexpilot_batch.simulated.ratelimits import MID_TIER, RateLimits
from lexpilot_batch.state.compaction import read_saved
from tests.helpers.faults import Outcome, assert_same_as, finish_despite, retried, run_benchmark

pytestmark = pytest.mark.usefixtures("no_fsync", "clean_env")

# Every wave is quicker on flex than the expected batch: all of it travels flex.
# Every model forced on: the default User Model and judge are real names, which a rehearsal
# judges as their real run would (no flex tier at an OpenAI-compatible endpoint).
FLEX: dict[str, Any] = {"tail": "auto", "expect_latency": {"batch": 1e6, "flex": 1.0}, "flex": {"*": True}}


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync_module, "FLEX_WAIT", 0.0)


def flex_files(outcome: Outcome) -> list[dict]:
    return [f for f in outcome.files if f["backend"] == "flex"]


def test_flex_refusing_for_a_while_is_backed_off_without_using_an_attempt(tmp_path: Path, baseline: Outcome) -> None:
    outcome = run_benchmark(tmp_path / "ws", "flex_429=0.5,seed=3", **FLEX)
    assert_same_as(baseline, outcome)
    assert {f["backend"] for f in outcome.files} == {"flex"}
    assert outcome.server["flex_429"] > 0  # it did refuse
    assert not retried(outcome)  # and no request used a second attempt for it
    assert outcome.server["flex_answers"] == len(outcome.requests)  # each answered once


@pytest.mark.slow  # a whole study whose flex calls are refused until their deadline: about 16 s
def test_flex_refusing_for_good_falls_back_to_batches(tmp_path: Path, baseline: Outcome) -> None:
    outcome = run_benchmark(tmp_path / "ws", "flex_429=1", **FLEX)
    assert_same_as(baseline, outcome)
    assert outcome.server["flex_answers"] == 0
    refused = flex_files(outcome)
    assert refused and all(f["batch_status"] == "cancelled" for f in refused)
    # A model goes flex in one wave only, the first it appears in; then by batch.
    first_wave: dict[str, int] = {}
    for f in outcome.files:
        first_wave.setdefault(f["model"], f["wave"])
    assert {(f["model"], f["wave"]) for f in refused} == set(first_wave.items())
    assert all(f["backend"] == "simulated" for f in outcome.files if f["wave"] > first_wave[f["model"]])
    # Each refused request tried FLEX_ROUNDS times at most before its file fell back.
    assert outcome.server["flex_429"] >= FLEX_ROUNDS
    # The refused files' requests failed as never run, and were asked again in the next wave.
    flexed = {f["pk"] for f in refused}
    never_ran = [r for r in outcome.requests if r["file_pk"] in flexed]
    assert never_ran and {(r["status"], r["error_kind"]) for r in never_ran} == {("failed", "unexecuted")}
    again = {(r["run_id"], r["case_idx"], r["step"], r["attempt"] - 1) for r in retried(outcome)}
    assert again == {(r["run_id"], r["case_idx"], r["step"], r["attempt"]) for r in never_ran}


class Crash(Exception):
    """The process dying right after a flex answer's line is saved, before the file is recorded."""


def test_a_crash_between_flex_answers_and_their_record_sends_nothing_twice(
    tmp_path: Path, baseline: Outcome, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = Counter[str]()
    original = sync_module._Run._write

    def write_then_crash(self: sync_module._Run, result: sync_module.CallResult) -> None:
        original(self, result)
        written[self.file_name] += 1
        if written[self.file_name] == 5:  # once per file, mid-file
            raise Crash()

    monkeypatch.setattr(sync_module._Run, "_write", write_then_crash)
    outcome = run_benchmark(tmp_path / "ws", "", drive=finish_despite(Crash), concurrency=1, **FLEX)
    assert_same_as(baseline, outcome)
    assert not retried(outcome)
    crashes = sum(1 for n in written.values() if n >= 5)
    assert crashes > 0
    for f in flex_files(outcome):
        saved = read_saved(tmp_path / "ws" / f["output_path"]).decode("utf-8")
        ids = [json.loads(line)["custom_id"] for line in saved.splitlines()]
        assert len(ids) == len(set(ids)) == f["n_requests"], f["path"]
    # One at a time, 2 submitted ahead: at most 2 calls per crash were in flight, answered and cut.
    assert len(outcome.requests) <= outcome.server["flex_answers"] <= len(outcome.requests) + 2 * crashes


class Kill(BaseException):
    """The process killed: not an error of one file (which `run_files` keeps to that file), it
    leaves the event loop at once, every file's calls cut."""


def test_a_kill_with_several_files_in_flight_sends_nothing_twice(
    tmp_path: Path, baseline: Outcome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed once per pass with at least two files of a pass begun and not finished (the models'
    files sent at once, `sync.at_once.run_files`): running again ends as the fault-free run, each
    saved answer never asked again."""
    runs: dict[str, sync_module._Run] = {}
    kills: list[int] = []  # files begun and not finished at each kill
    original = sync_module._Run._write

    def write_then_kill(self: sync_module._Run, result: sync_module.CallResult) -> None:
        original(self, result)
        runs[self.file_name] = self
        stats = [run.stats for run in runs.values()]
        begun = [s for s in stats if 0 < s.already_done + s.ok + s.failed < s.total and s.ok + s.failed]
        if len(begun) >= 2 and self.stats.ok + self.stats.failed == 2 and self.stats.already_done == 0:
            kills.append(len(begun))
            raise Kill()

    monkeypatch.setattr(sync_module._Run, "_write", write_then_kill)
    outcome = run_benchmark(tmp_path / "ws", "", drive=finish_despite(Kill), concurrency=1, **FLEX)
    assert_same_as(baseline, outcome)
    assert not retried(outcome)
    assert kills and min(kills) >= 2  # each kill cut at least two files part-way
    for f in flex_files(outcome):
        saved = read_saved(tmp_path / "ws" / f["output_path"]).decode("utf-8")
        ids = [json.loads(line)["custom_id"] for line in saved.splitlines()]
        assert len(ids) == len(set(ids)) == f["n_requests"], f["path"]
    # One call per model in flight (`--concurrency 1`): a kill cuts at most one call of each model
    # of the pass, answered by the provider and asked again.
    models = len({f["model"] for f in flex_files(outcome)})
    assert len(outcome.requests) <= outcome.server["flex_answers"] <= len(outcome.requests) + models * len(kills)


SPEED = 200.0  # the client waits the retry-after the server names this many times faster
CALL_SECONDS = 0.5  # server seconds between two calls it admits or refuses: 120 a minute, 6 per token of TIGHT_RPM
TIGHT_AFTER = 30  # calls admitted before the limit tightens
TIGHT_RPM = 20


def test_rate_limits_tightening_mid_wave(tmp_path, baseline: Outcome, monkeypatch: pytest.MonkeyPatch) -> None:
    original = RateLimits.admit
    seen = {"calls": 0}
    peaks: list[int] = []
    cuts: list[int] = []

    def tightening(self: RateLimits, faults: Faults, api: str, model: str, cost: int) -> dict[str, str]:
        seen["calls"] += 1
        self._clock = lambda: seen["calls"] * CALL_SECONDS  # the server's time goes by calls, not by the machine's load
        if seen["calls"] > TIGHT_AFTER:
            faults = dataclasses.replace(faults, rpm=TIGHT_RPM)
        try:
            return original(self, faults, api, model, cost)
        except ApiError as exc:  # its wait, in the server's faster time
            exc.headers["retry-after-ms"] = str(max(1, math.ceil(int(exc.headers["retry-after-ms"]) / SPEED)))
            exc.headers["retry-after"] = "0"
            raise

    monkeypatch.setattr(RateLimits, "admit", tightening)
    real_run = sync_module.SyncRunner.arun

    async def recording(self: sync_module.SyncRunner, *args: Any, **kwargs: Any) -> sync_module.SyncStats:
        stats = await real_run(self, *args, **kwargs)
        peaks.append(stats.peak_in_flight)
        cuts.append(stats.window_cuts)
        return stats

    monkeypatch.setattr(sync_module.SyncRunner, "arun", recording)
    outcome = run_benchmark(tmp_path / "ws", MID_TIER, concurrency=64, **FLEX)
    assert_same_as(baseline, outcome)
    assert {f["backend"] for f in outcome.files} == {"flex"}  # never fell back to batches
    assert outcome.server["rate_limited"] > 0  # the tightened limit did refuse
    assert outcome.server["flex_answers"] == len(outcome.requests)  # each request answered once
    assert not retried(outcome)  # and no request used a second attempt for it
    assert sum(cuts) > 0 and max(peaks) <= 64
