"""What many calls in flight cost the sync runner (`providers.sync.runner`): its calls are tasks of
one event loop, not threads, so a window of hundreds holds a handful of threads; an API whose SDK
has no asynchronous client still runs, from a pool of at most the ceiling's threads."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.sync import at_once
from lexpilot_batch.providers.sync import runner as sync
from lexpilot_batch.providers.sync.runner import SyncRunner
from lexpilot_batch.simulated import SimulatedServer
from tests.helpers.crash import SimServer
from tests.helpers.simulated import jsonl, request_line

CALLS = 40


@pytest.fixture(autouse=True)
def _no_env_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


def endpoint(base_url: str) -> Endpoint:
    return Endpoint("eval", base_url, "LEXPILOT_EVAL_API_KEY", "sk-test-in-flight", backend="sync")


def write_requests(path: Path, n: int) -> Path:
    path.write_bytes(jsonl([request_line(f"run1-{i}-step-1", f"借款纠纷，第{i}问：利息怎么算？") for i in range(n)]))
    return path


def saved_ids(path: Path) -> list[str]:
    return [json.loads(line)["custom_id"] for line in path.read_text(encoding="utf-8").splitlines()]


def test_many_calls_in_flight_hold_a_handful_of_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider (in a process of its own, so that its threads are not counted) holds every call
    half a second: when the first answer lands, the others are all in flight, and the threads of
    this process then are those it had before the run plus at most the event loop's own helpers
    (`at_once.LOOP_THREADS`, which look addresses up), never one per call."""
    monkeypatch.setattr(sync.windows, "START", CALLS)  # the whole file in flight at once
    requests = write_requests(tmp_path / "req.jsonl", CALLS)
    before = threading.active_count()
    seen: list[int] = []
    with SimServer(tmp_path / "sim", 0, "sync_latency=0.3", tmp_path / "sim.log") as server:
        stats = SyncRunner(endpoint(server.url), concurrency=CALLS).run(
            requests, tmp_path / "out.jsonl", lambda saved, total: seen.append(threading.active_count())
        )
    assert stats.ok == CALLS and stats.peak_in_flight == CALLS
    assert max(seen) <= before + at_once.LOOP_THREADS < CALLS
    assert len(set(saved_ids(tmp_path / "out.jsonl"))) == CALLS


def test_an_api_without_an_asynchronous_client_sends_from_at_most_the_ceilings_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    real_send = sync.ChatCall.send

    def send(self: Any, custom_id: str, body: dict[str, Any]) -> Any:
        made.append(threading.current_thread().name)
        return real_send(self, custom_id, body)

    monkeypatch.setattr(sync.ChatCall, "send", send)
    with SimulatedServer(tmp_path / "sim") as server:
        runner = SyncRunner(endpoint(server.base_url), concurrency=3)
        monkeypatch.setattr(runner.call, "new_async_client", lambda: None)
        stats = runner.run(write_requests(tmp_path / "req.jsonl", 12), tmp_path / "out.jsonl")
    assert (stats.ok, stats.failed) == (12, 0)
    assert len(made) == 12 and all(name.startswith("lexpilot-sync") for name in made)
    assert len(set(made)) <= 3
