"""Fireworks AI's batch inference, held to its own documentation and SDK.

- Fireworks' official SDK (`fireworks-ai`, 1.2.30 when written; PyPI, taken 2026-12-06), unmodified and
  validating every answer strictly against its own types (`_strict_response_validation=True`),
  drives the simulated routes (`simulated/apis/fireworks.py`) through a whole job: the account,
  a dataset created and uploaded, a job created, listed, polled and deleted, the output dataset's
  signed URLs, and a chat completion. The simulated routes learned Fireworks from its docs and
  SDK types, not from `providers/fireworks/`; this is what checks them against the SDK.
- The product's backend (`providers/fireworks/batch.py`) against the same routes: an upload and a
  create sent again are the same dataset and the same job; the account from FIREWORKS_ACCOUNT_ID
  or the key's one account; a job stopped by DELETE; results and errors read from the two files.
- The readers of what Fireworks answers (`fireworks.results`, `fireworks.errors`).
The documented examples themselves are in tests/providers/documented/fireworks.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.batch import BatchInfo, BatchSource, BatchStatus
from lexpilot_batch.providers.fireworks import errors, results
from lexpilot_batch.providers.fireworks.batch import FireworksBatchBackend, host_of, job_id_of
from lexpilot_batch.providers.fireworks.chat import chat_base
from lexpilot_batch.providers.fireworks.spec import LIMITS
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.sync.call import http
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.simulated.apis.fireworks import FireworksApi
from lexpilot_batch.util import clock

MODEL = "accounts/fireworks/models/llama-v3p1-8b-instruct"


def _lines(n: int = 3) -> bytes:
    rows = [
        {
            "custom_id": f"request-{i}",
            "body": {"messages": [{"role": "user", "content": f"case {i}"}], "max_tokens": 50},
        }
        for i in range(n)
    ]
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


@pytest.fixture
def server(tmp_path: Path):
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as running:
        yield running


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "pause", lambda seconds: None)
    monkeypatch.delenv("FIREWORKS_ACCOUNT_ID", raising=False)


def _backend(server: SimulatedServer) -> FireworksBatchBackend:
    endpoint = Endpoint("eval", server.native_url("fireworks"), "FIREWORKS_API_KEY", api_key="sk-simulated")
    return FireworksBatchBackend(endpoint, LIMITS, timeout=10.0, max_retries=1)


def _ended(backend: FireworksBatchBackend, job: str) -> BatchInfo:
    for _ in range(200):
        info = backend.retrieve(job)
        if info.terminal:
            return info
        _tick()
    raise AssertionError(f"job {job} never ended")


def _tick() -> None:
    import threading

    threading.Event().wait(0.05)


# --- the official SDK against the simulated routes -------------------------------------------------


def test_the_official_sdk_runs_a_whole_job_on_the_simulated_routes(server: SimulatedServer) -> None:
    fireworks = pytest.importorskip("fireworks")
    from fireworks.types import BatchInferenceJob, Dataset
    from fireworks.types.chat import CompletionCreateResponse

    client = fireworks.Fireworks(
        api_key="sk-simulated", base_url=server.native_url("fireworks"), _strict_response_validation=True
    )
    (account,) = list(client.accounts.list())
    assert account.name == "accounts/simulated"
    acct = "team-a"  # any account id is served
    made = client.datasets.create(
        account_id=acct, dataset_id="lexpilot-in", dataset={"user_uploaded": {}, "example_count": "3"}
    )
    assert isinstance(made, Dataset) and made.state == "UPLOADING"
    with pytest.raises(fireworks.ConflictError):
        client.datasets.create(
            account_id=acct, dataset_id="lexpilot-in", dataset={"user_uploaded": {}, "example_count": "3"}
        )
    uploaded = client.datasets.upload("lexpilot-in", account_id=acct, file=("in.jsonl", _lines()))
    assert uploaded.bytes == len(_lines()) and client.datasets.get("lexpilot-in", account_id=acct).state == "READY"

    job = client.batch_inference_jobs.create(
        account_id=acct,
        batch_inference_job_id="job-1",
        model=MODEL,
        input_dataset_id=f"accounts/{acct}/datasets/lexpilot-in",
    )
    assert isinstance(job, BatchInferenceJob) and job.name == f"accounts/{acct}/batchInferenceJobs/job-1"
    with pytest.raises(fireworks.ConflictError):  # an id taken
        client.batch_inference_jobs.create(
            account_id=acct, batch_inference_job_id="job-1", model=MODEL, input_dataset_id="lexpilot-in"
        )
    assert [j.name for j in client.batch_inference_jobs.list(account_id=acct)] == [job.name]
    for _ in range(200):
        job = client.batch_inference_jobs.get("job-1", account_id=acct)
        if job.state not in ("JOB_STATE_VALIDATING", "JOB_STATE_RUNNING", "JOB_STATE_WRITING_RESULTS"):
            break
        _tick()
    assert (
        job.state == "JOB_STATE_COMPLETED"
        and job.job_progress
        and job.job_progress.successfully_processed_requests == 3
    )
    assert job.output_dataset_id
    urls = client.datasets.get_download_endpoint(job.output_dataset_id.rsplit("/", 1)[-1], account_id=acct)
    files = urls.filename_to_signed_urls or {}
    assert sorted(name.rsplit("/", 1)[-1] for name in files) == ["BIJOutputSet.jsonl", "error-data"]
    for name, url in files.items():
        got = http.get(url)  # a signed URL: no key
        assert got.status_code == 200
        for raw in got.text.splitlines():
            line = json.loads(raw)
            if name.endswith(".jsonl"):  # each answer a chat completion of the SDK's own type
                CompletionCreateResponse.model_validate(line["response"], strict=False)
    client.batch_inference_jobs.delete("job-1", account_id=acct)
    assert client.batch_inference_jobs.get("job-1", account_id=acct).state == "JOB_STATE_DELETING_CLEANING_UP"
    answer = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}])
    assert isinstance(answer, CompletionCreateResponse) and answer.choices


def test_the_simulated_routes_refuse_lines_of_another_shape(server: SimulatedServer) -> None:
    fireworks = pytest.importorskip("fireworks")
    client = fireworks.Fireworks(api_key="sk-simulated", base_url=server.native_url("fireworks"), account_id="a")
    client.datasets.create(dataset_id="openai-lines", dataset={"user_uploaded": {}, "example_count": "1"})
    line = {"custom_id": "r", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": []}}
    client.datasets.upload("openai-lines", file=("x.jsonl", (json.dumps(line) + "\n").encode()))
    with pytest.raises(fireworks.BadRequestError) as refused:
        client.batch_inference_jobs.create(model=MODEL, input_dataset_id="accounts/a/datasets/openai-lines")
    assert "custom_id, body" in str(refused.value)
    with pytest.raises(fireworks.NotFoundError):  # the gateway's gRPC-shaped error body, read by the SDK
        client.batch_inference_jobs.get("no-such-job")


# --- the product's backend against them ------------------------------------------------------------


def test_an_upload_and_a_create_sent_again_are_the_same_dataset_and_the_same_job(server, tmp_path) -> None:
    backend = _backend(server)
    path = tmp_path / "eval.jsonl"
    path.write_bytes(_lines())
    dataset = backend.upload(path, "lexpilot-abc-eval.jsonl")
    assert backend.upload(path, "lexpilot-abc-eval.jsonl") == dataset  # 409, READY: these very bytes
    tag = {"lexpilot_workspace": "w", "lexpilot_file": "requests/w0001/eval.jsonl", "lexpilot_sha256": "0" * 32}
    first = backend.create(dataset, tag, None, BatchSource(path, MODEL))
    again = backend.create(dataset, tag, None, BatchSource(path, MODEL))  # its answer lost, sent again: 409
    assert again.id == first.id == job_id_of(tag) and first.input_file_id == dataset
    assert [b.id for b in backend.batches()] == [first.id]  # one job
    other = backend.create(dataset, {**tag, "lexpilot_create": "2"}, None, BatchSource(path, MODEL))
    assert other.id != first.id
    ended = _ended(backend, first.id)
    assert ended.status == BatchStatus.COMPLETED and ended.request_counts == {"total": 3, "completed": 3, "failed": 0}
    assert ended.output_file_id and ended.error_file_id
    backend.download(ended.output_file_id, tmp_path / "out.jsonl")
    backend.download(ended.error_file_id, tmp_path / "err.jsonl")
    read = [results.result(json.loads(x)) for x in (tmp_path / "out.jsonl").read_text("utf-8").splitlines()]
    assert sorted(r["custom_id"] for r in read) == ["request-0", "request-1", "request-2"]
    assert all(r["response"]["status_code"] == 200 and r["response"]["body"]["choices"] for r in read)
    assert (tmp_path / "err.jsonl").read_bytes() == b""


def test_the_account_is_the_variable_else_the_keys_one_account(server, tmp_path, monkeypatch) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_bytes(_lines(1))
    assert _backend(server).base == "/accounts/simulated"  # listed for the key
    monkeypatch.setenv("FIREWORKS_ACCOUNT_ID", "team-a")
    backend = _backend(server)
    dataset = backend.upload(path, "lexpilot-x.jsonl")
    assert backend.base == "/accounts/team-a" and backend._state(dataset) == "READY"
    monkeypatch.delenv("FIREWORKS_ACCOUNT_ID")
    two = {"accounts": [{"name": "accounts/a", "email": "a@x"}, {"name": "accounts/b", "email": "b@x"}]}
    monkeypatch.setattr(FireworksApi, "accounts", lambda self: two)
    with pytest.raises(ConfigError, match="set FIREWORKS_ACCOUNT_ID.*reaches a, b"):
        _ = _backend(server).base


def test_a_job_is_stopped_by_deleting_it_and_keeps_no_result_files(tmp_path) -> None:
    with SimulatedServer(tmp_path / "sim", parse_faults("latency=30")) as server:  # stopped while it runs
        backend = _backend(server)
        path = tmp_path / "eval.jsonl"
        path.write_bytes(_lines())
        job = backend.create(backend.upload(path, "lexpilot-y.jsonl"), {"k": "v"}, None, BatchSource(path, MODEL))
        assert not job.terminal
        stopped = backend.cancel(job.id)
        assert stopped.status == BatchStatus.CANCELLED and (stopped.output_file_id, stopped.error_file_id) == (
            None,
            None,
        )
        assert backend.retrieve(job.id).status == BatchStatus.CANCELLED
        assert server.stats["calls:fireworks_delete"] == 1


def test_a_file_over_the_one_call_upload_is_refused_before_anything_is_sent(server, tmp_path) -> None:
    from dataclasses import replace

    backend = _backend(server)
    backend.limits = replace(LIMITS, max_bytes=10)
    path = tmp_path / "eval.jsonl"
    path.write_bytes(_lines())
    with pytest.raises(Exception, match="exceed a Fireworks dataset upload.*--max-bytes-per-file"):
        backend.upload(path, "lexpilot-z.jsonl")
    assert server.stats["calls:fireworks_create_dataset"] == 0


def test_an_answer_that_is_no_listing_is_an_answer_lost_not_an_empty_listing(server, monkeypatch) -> None:
    """A gateway's page where the listing was asked: read as empty, a lost create would be sent again."""
    from lexpilot_batch.errors import ProviderUnavailable

    monkeypatch.setattr(FireworksApi, "listing", lambda self, account, query: "<html>busy</html>")
    with pytest.raises(ProviderUnavailable, match="no list of batch inference jobs"):
        list(_backend(server).batches())


# --- readers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expect"),
    [
        # the completion itself under `response` (the output dataset's results file)
        (
            {"custom_id": "a", "response": {"object": "chat.completion", "choices": [{"message": {"content": "hi"}}]}},
            {"custom_id": "a", "status": 200},
        ),
        # OpenAI's envelope, should a line come wrapped: as it is
        (
            {"custom_id": "b", "response": {"status_code": 200, "body": {"choices": []}}, "error": None},
            {"custom_id": "b", "status": 200},
        ),
        # the error file's lines, with an error object or a bare message
        ({"custom_id": "c", "error": {"message": "boom", "code": "internal"}}, {"custom_id": "c", "error": "boom"}),
        ({"custom_id": "d", "error": "boom"}, {"custom_id": "d", "error": "boom"}),
    ],
)
def test_result_lines_read_as_openais(line: dict[str, Any], expect: dict[str, Any]) -> None:
    read = results.result(line)
    assert read["custom_id"] == expect["custom_id"]
    if "status" in expect:
        assert read["response"]["status_code"] == expect["status"]
    else:
        assert read["response"] is None and read["error"]["message"] == expect["error"]


def test_the_gateways_error_body_is_read() -> None:
    import openai

    request = http.Request("GET", "https://api.fireworks.ai/v1/accounts/a/batchInferenceJobs/x")
    body = {"code": 5, "message": "resource not found", "details": []}
    response = http.Response(404, json=body, request=request)
    failure = errors.failure_of(openai.NotFoundError("not found", response=response, body=body))
    assert failure is not None and (failure.status, failure.message, failure.code) == (404, "resource not found", "5")


def test_the_base_url_is_the_host_as_the_sdk_reads_it() -> None:
    assert (
        host_of("https://api.fireworks.ai/inference/v1/")
        == host_of("https://api.fireworks.ai")
        == "https://api.fireworks.ai"
    )
    # the SDK's chat path: /inference/v1 at its default host, /v1 under a base URL of one's own
    assert chat_base("https://api.fireworks.ai") == "https://api.fireworks.ai/inference/v1"
    assert chat_base("http://127.0.0.1:8000/fireworks") == "http://127.0.0.1:8000/fireworks/v1"
