"""Flex calls under the provider's rate limits (`--tail auto`; `providers.sync.window`,
`simulated.ratelimits`): the scenario ends equal to the fault-free batch run
(`conftest.baseline`), with one answer per request.

| scenario | guarantee checked |
| --- | --- |
| rate limits tightening mid-wave (a mid-tier limit cut to 20 requests a minute after 30 calls) | = fault-free; every wave on flex, each request answered once (no 429'd call ran), the 429s backed off without using an attempt, the window halved |
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import pytest

from lexpilot_batch.providers.sync import runner as sync_module
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.faults import Faults
from lexpilot_batch.simulated.ratelimits import MID_TIER, RateLimits
from tests.helpers.faults import Outcome, assert_same_as, retried, run_benchmark
from tests.scenarios.test_faults_flex import FLEX

pytestmark = pytest.mark.usefixtures("no_fsync", "clean_env")

SPEED = 200.0  # the server's minute passes this many times faster than real time (its waits too)
TIGHT_AFTER = 30  # calls admitted before the limit tightens
TIGHT_RPM = 20


def test_rate_limits_tightening_mid_wave(tmp_path, baseline: Outcome, monkeypatch: pytest.MonkeyPatch) -> None:
    original = RateLimits.admit
    seen = {"calls": 0}
    start = time.monotonic()
    peaks: list[int] = []
    cuts: list[int] = []

    def tightening(self: RateLimits, faults: Faults, api: str, model: str, cost: int) -> dict[str, str]:
        self._clock = lambda: (time.monotonic() - start) * SPEED
        seen["calls"] += 1
        if seen["calls"] > TIGHT_AFTER:
            faults = dataclasses.replace(faults, rpm=TIGHT_RPM)
        try:
            return original(self, faults, api, model, cost)
        except ApiError as exc:  # its wait, in the server's faster time
            exc.headers["retry-after-ms"] = str(max(1, math.ceil(int(exc.headers["retry-after-ms"]) / SPEED)))
            exc.headers["retry-after"] = "0"
            raise

    monkeypatch.setattr(RateLimits, "admit", tightening)
    real_run = sync_module.SyncRunner.run

    def recording(self: sync_module.SyncRunner, *args: Any, **kwargs: Any) -> sync_module.SyncStats:
        stats = real_run(self, *args, **kwargs)
        peaks.append(stats.peak_in_flight)
        cuts.append(stats.window_cuts)
        return stats

    monkeypatch.setattr(sync_module.SyncRunner, "run", recording)
    outcome = run_benchmark(tmp_path / "ws", MID_TIER, concurrency=64, **FLEX)
    assert_same_as(baseline, outcome)
    assert {f["backend"] for f in outcome.files} == {"flex"}  # never fell back to batches
    assert outcome.server["rate_limited"] > 0  # the tightened limit did refuse
    assert outcome.server["flex_answers"] == len(outcome.requests)  # each request answered once
    assert not retried(outcome)  # and no request used a second attempt for it
    assert sum(cuts) > 0 and max(peaks) <= 64
