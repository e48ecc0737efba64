"""A pass's sync and flex files sent at once (`providers.sync.at_once.run_files`): one event loop,
the files of different models in parallel, the files of one model in one window (`Lane`), one
file's fatal error stopping no other. Times are read from the simulated provider's own log of the
calls it answered (`simulated.calls.Calls.chats`), never from this process's clock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.sync.at_once import SyncJob, run_files
from lexpilot_batch.providers.sync.runner import SyncRunner, SyncStats
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from tests.helpers.simulated import jsonl, request_line

CALLS = 4
LATENCY = 0.2  # seconds the simulated provider holds each call


@pytest.fixture(autouse=True)
def _no_env_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SimulatedServer]:
    with SimulatedServer(tmp_path / "sim", parse_faults(f"sync_latency={LATENCY}")) as sim:
        sim.calls.chats = []
        yield sim


def runner(base_url: str, concurrency: int = 1) -> SyncRunner:
    endpoint = Endpoint("eval", base_url, "LEXPILOT_EVAL_API_KEY", "sk-test-at-once", backend="sync")
    return SyncRunner(endpoint, concurrency=concurrency)


def job(tmp_path: Path, name: str, model: str, sender: SyncRunner, n: int = CALLS) -> SyncJob:
    lines = [request_line(f"{name}-{i}-step-1", f"合同纠纷，第{i}问：违约金怎么算？", model=model) for i in range(n)]
    requests = tmp_path / f"{name}.jsonl"
    requests.write_bytes(jsonl(lines))
    return SyncJob(sender, requests, tmp_path / f"{name}.output.jsonl")


def saved_ids(path: Path) -> list[str]:
    return [json.loads(line)["custom_id"] for line in path.read_text(encoding="utf-8").splitlines()]


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of these (began, ended) intervals open at one instant."""
    events = sorted([(began, 1) for began, _ in spans] + [(ended, -1) for _, ended in spans])
    open_now = most = 0
    for _, step in events:
        open_now += step
        most = max(most, open_now)
    return most


def test_files_of_two_models_run_at_once(tmp_path: Path, server: SimulatedServer) -> None:
    """One call of each model at a time (`--concurrency 1`, a ceiling per model): one after the
    other, the pass would take the sum of the two files; at once, it takes about the longer."""
    jobs = [job(tmp_path, name, model, runner(server.base_url)) for name, model in (("a", "model-a"), ("b", "model-b"))]
    outcomes = run_files(jobs)
    assert all(isinstance(o, SyncStats) and o.ok == CALLS for o in outcomes)
    for j in jobs:
        assert len(set(saved_ids(j.output_path))) == CALLS
    assert server.calls.chats is not None
    spans = {model: [(b, e) for m, _, b, e in server.calls.chats if m == model] for model in ("model-a", "model-b")}
    assert all(len(s) == CALLS and most_at_once(s) == 1 for s in spans.values())  # the ceiling of each model
    assert most_at_once(spans["model-a"] + spans["model-b"]) == 2  # a call of each in flight at once
    busy = {model: max(e for _, e in s) - min(b for b, _ in s) for model, s in spans.items()}
    every = spans["model-a"] + spans["model-b"]
    whole = max(e for _, e in every) - min(b for b, _ in every)
    assert whole < 0.75 * sum(busy.values())  # about the longer of the two, not their sum


def test_files_of_one_model_share_its_window(tmp_path: Path, server: SimulatedServer) -> None:
    """Two files of one model at a ceiling of 2: together never more than 2 calls in flight
    (a window each would let 4), and both files answered in full."""
    jobs = [job(tmp_path, name, "model-a", runner(server.base_url, concurrency=2), n=6) for name in ("a", "b")]
    outcomes = run_files(jobs)
    assert all(isinstance(o, SyncStats) and o.ok == 6 for o in outcomes)
    assert server.calls.chats is not None and len(server.calls.chats) == 12
    assert most_at_once([(b, e) for _, _, b, e in server.calls.chats]) == 2
    assert all(len(set(saved_ids(j.output_path))) == 6 for j in jobs)


def test_a_file_stopped_by_its_endpoint_stops_no_other(tmp_path: Path, server: SimulatedServer) -> None:
    """A file whose endpoint answers 404 (a wrong base URL) stops with the error that names it; the
    other file's answers are all saved, and its outcome is its own."""
    broken = job(tmp_path, "broken", "model-a", runner(server.base_url + "/nowhere"))
    good = job(tmp_path, "good", "model-b", runner(server.base_url), n=6)
    outcomes = run_files([broken, good])
    assert isinstance(outcomes[0], LexpilotError) and "404" in str(outcomes[0])
    assert isinstance(outcomes[1], SyncStats) and outcomes[1].ok == 6
    assert len(set(saved_ids(good.output_path))) == 6
    assert not broken.output_path.exists() or saved_ids(broken.output_path) == []  # the streak is not written
