"""Each API the simulated provider speaks on its own routes (`ApiSpec.simulated_native`, read from
the registry: Anthropic's Message Batches, Gemini's Batch Mode, Mistral's and Together's batch
jobs), one scenario over all of them: a study whose every role is a model of that API, through its
provider's own routes with the real clients, ends with the records of the same study rehearsed
in-process (`--provider simulated`) when a create's answer is lost, when every group is sent at
once through the API's synchronous call, and under its faults (lost creates, expired batches,
errored lines, downloads broken off, HTTP 429 and 500 on its routes). A new API is covered by
declaring it (`providers/<api>/spec.py`), not by copying these tests.

Each API's own scenarios (its ids, its listings, its SDK) stay in `test_native.py`,
`test_native_chat.py`, `test_providers.py` and `test_together.py`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.providers.batch import CreateUncertain
from lexpilot_batch.providers.registry import api_spec, missing_sdk
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.native import (  # noqa: F401 - the autouse `quick` is a fixture
    SIMULATED_APIS,
    SimulatedApi,
    quick,
    rehearse,
    run_on_routes,
)


def study(api: SimulatedApi, limit: int = 1, stage: str = "dcg") -> RunSpec:
    """A run of `api`'s model whose User Model and judge are that model too, so that every file
    travels on its routes (the `dcg` stage asks all three)."""
    settings = Settings(user_model=api.model, judge_model=api.model)
    return RunSpec(("r1",), (api.model,), stage, settings, limit=limit)


@pytest.fixture(params=SIMULATED_APIS, ids=str)
def api(request: pytest.FixtureRequest) -> SimulatedApi:
    """Each API the simulated provider speaks natively, skipped, saying so, without its SDK."""
    native: SimulatedApi = request.param
    problem = missing_sdk(native.name)
    if problem:
        pytest.skip(problem)
    return native


def test_a_create_whose_answer_was_lost_is_found_again_and_never_made_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: SimulatedApi
) -> None:
    """A crash between a create and its record (the batch exists, the answer never arrived), twice:
    the next command finds the batch again (by its tag, its input file, or its size and time,
    whatever the API keeps) and never creates a second one for the file."""
    backend_class, _ = api_spec(api.name).load()
    real = backend_class.create
    lost: list[str] = []

    def create_then_lose_the_answer(self, input_file_id, metadata, endpoint=None, source=None):
        info = real(self, input_file_id, metadata, endpoint, source)
        if len(lost) < 2:
            lost.append(info.id)
            raise CreateUncertain("the answer was lost")
        return info

    monkeypatch.setattr(backend_class, "create", create_then_lose_the_answer)
    out = run_on_routes(tmp_path / "ws", monkeypatch, study(api), create_grace=5.0)
    assert set(out["threads"]) == {"done"}
    assert out["records"] == rehearse(tmp_path / "rehearsed", study(api))["records"]
    jobs = [f["batch_id"] for f in out["files"]]
    assert len(lost) == 2 and set(lost) <= set(jobs)  # adopted
    assert out["server"][f"calls:{api.create}"] == len(jobs)  # never a second batch for a file


def test_groups_sent_at_once_through_its_synchronous_call_give_the_same_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: SimulatedApi
) -> None:
    """`--tail-sync` above any group's size: every group is sent at once, each line through the
    API's own synchronous call (Messages, generateContent, chat completions with the model in the
    body), its answer saved as its batch line would be: no batch is created, and the records are
    the batches'."""
    out = run_on_routes(tmp_path / "ws", monkeypatch, study(api), tail_sync=10**6)
    assert out["records"] == rehearse(tmp_path / "rehearsed", study(api))["records"] and out["anomalies"] == 0
    assert out["files"] and {f["backend"] for f in out["files"]} == {"sync"}
    assert out["server"][f"calls:{api.chat}"] == sum(f["n_requests"] for f in out["files"]) > 0  # each once
    assert out["server"][f"calls:{api.create}"] == 0


# Every task over 2 cases: enough requests and batches for every fault to be drawn on every API.
CAMPAIGN_CASES, CAMPAIGN_STAGE = 2, "all"


def faults(api: SimulatedApi) -> str:
    """Lost creates (committed after the client gave up), expired batches, errored lines, downloads
    broken off half-way and HTTP 429/500 on the API's own routes; per-request faults drawn on the
    workspace's own custom_ids, answers held back 0.45 s past the client's timeout."""
    return (
        "line_error=0.2,expire_batch=0.3,late_create=0.3,slow_seconds=0.45,cut_download=0.5,"
        f"http_429=0.05,http_500=0.05,http_routes={'+'.join(api.route_names)},retry_after=0.001,seed=1"
    )


@pytest.mark.slow  # two whole studies under faults, 0.45 s answers held back: 10-20 s an API on a shared 2-core machine
def test_lost_creates_expired_batches_and_errored_lines_end_with_the_fault_free_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: SimulatedApi
) -> None:
    spec = study(api, CAMPAIGN_CASES, CAMPAIGN_STAGE)
    fault_free = rehearse(tmp_path / "rehearsed", spec)
    faulty = run_on_routes(
        tmp_path / "faulty", monkeypatch, spec, faults(api), retries=8, timeout=0.3, create_grace=3.0
    )
    assert set(faulty["threads"]) == {"done"}
    assert faulty["records"] == fault_free["records"]
    assert faulty["anomalies"] == 0
    stats = faulty["server"]
    # Downloads broken off half-way, fetched again: on its own routes, or OpenAI's files routes
    # where its files are kept there (Mistral's); OpenRouter's pages of results.
    cut = {key.partition(":")[2] for key in stats if key.startswith("cut_download:") and stats[key]}
    assert cut and cut <= {*api.route_names, "file_content"}, stats
    assert stats[f"late_create:{api.create}"] >= 1 and stats["http_500"] + stats["http_429"] >= 1, stats
    assert [f for f in faulty["files"] if f["batch_status"] == "expired"]  # what expired batches finished kept
    kinds = Counter(v[4] for v in faulty["requests"].values() if v[3] == "failed")
    assert {"transport", "unexecuted"} <= set(kinds), kinds  # errored lines, and what expired batches never ran
    # Creating is not idempotent: no create was sent twice blindly; lost ones were found again, and
    # every batch the provider holds is one the workspace knows. (A create sent again after its
    # answer was lost is answered with the batch it made where the API takes an idempotency token:
    # AWS Bedrock's clientRequestToken.)
    assert stats[f"retried:{api.create}"] == 0
    batches = {f["batch_id"] for f in faulty["files"]} | {b["batch_id"] for b in faulty["other_batches"]}
    answered = stats[f"calls:{api.create}"] - stats[f"http_500:{api.create}"] - stats[f"http_429:{api.create}"]
    assert sum(faulty["held"].values()) == len(batches) <= answered
