"""Mistral's Batch API, its lines and objects against its documented formats: its request lines
(`{custom_id, body}`, https://docs.mistral.ai/capabilities/batch) and, where the official `mistralai`
SDK is installed (optional: it is no extra of ours), its `BatchRequest` type and its own client run
against the simulated provider's batch job routes; its jobs read as batches, its content chunks and
error bodies, and the guard's copy of its request's fields."""

from __future__ import annotations

import json

import openai
import pytest

from lexpilot_batch.providers.mistral import results as mistral_results
from lexpilot_batch.providers.mistral.batch import STATUSES, info, timeout_hours
from lexpilot_batch.providers.mistral.errors import error_message
from lexpilot_batch.providers.mistral.spec import NAME as MISTRAL
from lexpilot_batch.providers.openai.batch import status_of
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from tests.helpers.request_lines import PROMPT
from tests.helpers.request_lines import provider_line as _line
from tests.helpers.request_lines import sdk_keys as _sdk_keys


def test_a_mistral_line_is_a_custom_id_and_the_body_the_endpoint_would_be_sent():
    line = _line("mistral/mistral-small-latest", MISTRAL)
    assert list(line) == ["custom_id", "body"]  # no method, no url: the job names the endpoint
    assert line["body"]["model"] == "mistral-small-latest"
    assert line["body"]["messages"] == [{"role": "user", "content": PROMPT}]
    assert line["body"]["max_tokens"] == 8192 and line["body"]["temperature"] == 0.7


def test_a_mistral_line_is_the_mistralai_sdks_batch_request():
    models = pytest.importorskip("mistralai.client.models")
    line = _line("mistral/mistral-small-latest", MISTRAL)
    parsed = models.BatchRequest.model_validate(line)
    assert parsed.custom_id == line["custom_id"] and parsed.body == line["body"]
    models.ChatCompletionRequest.model_validate(line["body"])  # the body is a chat completion request


def test_mistral_jobs_read_as_batches():
    job = {
        "id": "0b8b1d2e-3f1a-4c55-9a3e-5f1f2d3c4b5a",
        "status": "TIMEOUT_EXCEEDED",
        "output_file": "f-out",
        "error_file": None,
        "total_requests": 10,
        "succeeded_requests": 7,
        "failed_requests": 1,
        "metadata": {"lexpilot_file": "a.jsonl"},
        "created_at": 1_700_000_000,
        "errors": [{"message": "3 requests timed out", "count": 3}],
    }
    read = info(job)
    assert (read.status, read.output_file_id, read.error_file_id) == ("expired", "f-out", None)
    assert read.request_counts == {"total": 10, "completed": 7, "failed": 1}
    assert read.metadata == {"lexpilot_file": "a.jsonl"} and read.created_at == 1_700_000_000
    assert set(STATUSES) == {
        "QUEUED",
        "RUNNING",
        "SUCCESS",
        "FAILED",
        "TIMEOUT_EXCEEDED",
        "CANCELLATION_REQUESTED",
        "CANCELLED",
    }
    assert (timeout_hours("24h"), timeout_hours("7d"), timeout_hours("bogus")) == (24, 168, 24)
    assert status_of("in_queue") == "validating" and status_of("IN_PROGRESS") == "in_progress"


def test_mistral_content_chunks_are_the_answer_and_its_reasoning():
    message = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "先看事实。"}]},
            {"type": "text", "text": '{"label": "A"}'},
        ],
    }
    line = {"custom_id": "x", "response": {"status_code": 200, "body": {"choices": [{"message": message}]}}}
    read = mistral_results.result(line)["response"]["body"]["choices"][0]["message"]
    assert read["content"] == '{"label": "A"}' and read["reasoning_content"] == "先看事实。"
    plain = {"custom_id": "y", "response": {"status_code": 200, "body": {"choices": [{"message": {"content": "答"}}]}}}
    assert mistral_results.result(plain) == plain
    error = {"custom_id": "z", "response": None, "error": {"code": "server_error", "message": "boom"}}
    assert mistral_results.result(error) == error


def test_mistral_error_bodies_give_its_own_message():
    assert error_message({"object": "error", "message": "Invalid model", "type": "invalid_model"}, "x") == (
        "Invalid model"
    )
    detail = {"detail": [{"loc": ["body", "input_files"], "msg": "field required", "type": "missing"}]}
    assert error_message(detail, "x") == "body.input_files: field required"
    assert error_message("not json", "fallback") == "fallback"


def test_the_mistralai_sdk_runs_a_job_on_the_simulated_batch_routes(tmp_path):
    """Mistral's own client against the simulated provider: uploads, creates, lists, polls and
    downloads, each answer parsed into the SDK's types (`BatchJob`, `ListBatchJobsResponse`)."""
    mistralai = pytest.importorskip("mistralai.client")
    line = _line("mistral/mistral-small-latest", MISTRAL)
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        client = mistralai.Mistral(api_key="sk-simulated", server_url=server.root_url)
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        uploaded = client.files.upload(file={"file_name": "in.jsonl", "content": data}, purpose="batch")
        job = client.batch.jobs.create(
            input_files=[uploaded.id],
            model="mistral-small-latest",
            endpoint="/v1/chat/completions",
            metadata={"lexpilot_file": "in.jsonl"},
        )
        assert job.status in ("QUEUED", "RUNNING", "SUCCESS") and job.total_requests == 1
        listed = client.batch.jobs.list(order_by="-created")
        assert [j.id for j in listed.data or []] == [job.id] and listed.total == 1
        done = client.batch.jobs.get(job_id=job.id)
        assert done.status == "SUCCESS" and done.succeeded_requests == 1 and done.output_file
        out = json.loads(client.files.download(file_id=done.output_file).read())
        assert out["custom_id"] == line["custom_id"] and out["response"]["status_code"] == 200
        with pytest.raises(Exception) as refused:  # an OpenAI-shaped line is not Mistral's
            bad = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": line["body"]}
            up = client.files.upload(
                file={"file_name": "bad.jsonl", "content": json.dumps(bad).encode()}, purpose="batch"
            )
            client.batch.jobs.create(input_files=[up.id], model="m", endpoint="/v1/chat/completions")
        assert "unexpected field(s) method, url" in str(refused.value)
        # The openai SDK reads Mistral's flat error body through `mistral.errors`.
        raw = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.NotFoundError) as missing:
            raw.get("/batch/jobs/0b8b1d2e-3f1a-4c55-9a3e-5f1f2d3c4b5a", cast_to=object)
        assert error_message(missing.value.body, "") == "Batch job 0b8b1d2e-3f1a-4c55-9a3e-5f1f2d3c4b5a not found."


# --- the OpenAI-compatible platforms' lines against their official SDKs' request types ---------------
# Each SDK is optional (in the `test` extra): its test is skipped, saying so, where it is not installed.


def test_the_guards_mistral_field_list_is_the_sdks():
    """Without the `mistralai` SDK the guard keeps a cited copy of its request's fields: the same."""
    request = pytest.importorskip("mistralai.client.models.chatcompletionrequest", reason="mistralai not installed")
    from lexpilot_batch.providers.mistral.contract import _FIELDS

    assert _sdk_keys(request.ChatCompletionRequestTypedDict) == _FIELDS
