"""Together AI's Batch API, piece by piece, against its documented formats: the `together/` prefix and
its limits, its `{custom_id, body}` lines, its job objects and statuses read as ours, its result lines
(a reasoning model's `reasoning`), what the simulated routes refuse, and, where the official
`together` SDK is installed, its own client driving the simulated routes (upload through the signed
URL, create, retrieve, list, download, cancel), its types parsing every answer.

Sources: https://docs.together.ai/docs/inference/batch/overview (limits), /tutorial (lines),
/manage (statuses, results, errors); https://docs.together.ai/reference/batch-create; the `together`
SDK 3.x (`resources/batches.py`, `types/batch_job.py`, `lib/resources/files.py`) and
together-python (`src/together/types/batch.py`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.providers.batch import BatchStatus
from lexpilot_batch.providers.bodies.request import dialect_of, role_request
from lexpilot_batch.providers.ids import custom_id, id_tag, request_check
from lexpilot_batch.providers.lines import request_line
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.registry import PROFILES, PROVIDERS
from lexpilot_batch.providers.registry import result_reader as normaliser
from lexpilot_batch.providers.spec import MB
from lexpilot_batch.providers.together.batch import info, seconds
from lexpilot_batch.providers.together.spec import NAME as TOGETHER
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.simulated.apis.together import TogetherApi
from lexpilot_batch.simulated.apis.together import _line as sim_line
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.store import Store

TAG = id_tag("workspace-1")
PROMPT = "请根据以下案情作答：原告诉称……"
MODEL = "together/meta-llama/Llama-3.3-70B-Instruct-Turbo"


def _raw_line(model: str = MODEL, step: str = "dcg.t1") -> bytes:
    request = role_request("eval", parse_model(model), Settings())
    cid = custom_id("0a1b2c3d", 4, step, 1, request_check(TAG, request.fields.encode("utf-8")))
    return request_line(cid, request.model, PROMPT, request.fields, "/v1/chat/completions", api=TOGETHER, tag=TAG)


def test_the_together_prefix_names_its_endpoint_key_backend_and_limits():
    name = parse_model(MODEL)
    assert name.provider is PROVIDERS["together"] and name.sent == "meta-llama/Llama-3.3-70B-Instruct-Turbo"
    provider = PROVIDERS["together"]
    assert (provider.base_url, provider.url_var, provider.key_var) == (
        "https://api.together.ai/v1",
        "TOGETHER_BASE_URL",
        "TOGETHER_API_KEY",
    )
    assert (provider.backend, provider.api, dialect_of(name).name, provider.batch_api) == (
        "batch",
        TOGETHER,
        "max_tokens",
        True,
    )
    # 50,000 requests per batch, 100 MB per input file, a window of 24h that cannot be changed.
    limits = PROFILES["together"]
    assert (limits.max_requests, limits.max_bytes, limits.completion_window) == (50_000, 100 * MB, "24h")


def test_a_together_line_is_custom_id_and_body_byte_for_byte():
    raw = _raw_line()
    line = json.loads(raw)
    assert list(line) == ["custom_id", "body"] and len(line["custom_id"]) <= 64
    assert line["body"]["model"] == "meta-llama/Llama-3.3-70B-Instruct-Turbo"
    assert line["body"]["messages"] == [{"role": "user", "content": PROMPT}] and "max_tokens" in line["body"]
    assert raw == (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


JOB = {
    "id": "01234567-8901-2345-6789-012345678901",
    "user_id": "user_789xyz012",
    "input_file_id": "file-input123abc456def",
    "file_size_bytes": 1048576,
    "status": "IN_PROGRESS",
    "job_deadline": "2024-01-15T15:30:00Z",
    "created_at": "2024-01-15T14:30:00Z",
    "endpoint": "/v1/chat/completions",
    "progress": 75,
    "model_id": "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo",
    "output_file_id": None,
    "error_file_id": None,
    "error": None,
    "completed_at": None,
}  # the API reference's example job (batch-get), its files not yet there


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        ("VALIDATING", BatchStatus.VALIDATING),
        ("IN_PROGRESS", BatchStatus.IN_PROGRESS),
        ("COMPLETED", BatchStatus.COMPLETED),
        ("FAILED", BatchStatus.FAILED),
        ("EXPIRED", BatchStatus.EXPIRED),
        ("CANCELLED", BatchStatus.CANCELLED),
        ("CANCELING", BatchStatus.CANCELLING),  # together-python's BatchJobStatus
        ("SOMETHING_NEW", BatchStatus.IN_PROGRESS),  # an unknown word is not taken for an end
    ],
)
def test_a_jobs_status_reads_as_ours(theirs, ours):
    assert info({**JOB, "status": theirs}).status == ours


def test_a_job_reads_with_its_input_file_its_time_and_its_error():
    job = info(JOB)
    assert job.input_file_id == "file-input123abc456def"  # how a lost create is found again
    assert job.created_at == seconds("2024-01-15T14:30:00+00:00") == 1705329000.0
    assert job.metadata == {} and job.request_counts == {} and job.errors == []
    failed = info({**JOB, "status": "FAILED", "error": "Invalid model specified"})
    assert failed.terminal and failed.errors == [{"code": "batch_failed", "message": "Invalid model specified"}]
    done = info({**JOB, "status": "COMPLETED", "output_file_id": "file-o", "error_file_id": "file-e"})
    assert (done.output_file_id, done.error_file_id) == ("file-o", "file-e")


def test_a_reasoning_models_thinking_is_read_as_reasoning_never_as_the_answer():
    read = normaliser(TOGETHER, TAG)
    assert read is not None
    body = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"label": "直接判断"}', "reasoning": "先看案情。"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
    line = {"custom_id": "a-1", "response": {"status_code": 200, "body": body}}
    message = read(line)["response"]["body"]["choices"][0]["message"]
    assert message["content"] == '{"label": "直接判断"}' and message["reasoning_content"] == "先看案情。"
    assert "reasoning" not in message
    error = {"custom_id": "a-2", "error": {"message": "Request timeout", "code": "timeout"}}
    assert read(error) == error  # the error file's lines are read as they are


def test_the_simulated_results_are_togethers_lines():
    """An OpenAI-shaped simulated result line as Together's output or error line; a request an
    expired job never ran is in neither file."""
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "答", "reasoning_content": "想"}}]}
    ok = sim_line({"id": "r", "custom_id": "a", "response": {"status_code": 200, "body": body}, "error": None})
    assert ok == {
        "custom_id": "a",
        "response": {
            "status_code": 200,
            "body": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "答", "reasoning": "想"}}]},
        },
    }
    failed = sim_line(
        {"id": "r", "custom_id": "b", "response": None, "error": {"code": "server_error", "message": "boom"}}
    )
    assert failed == {"custom_id": "b", "error": {"message": "boom", "code": "server_error"}}
    assert sim_line({"custom_id": "c", "response": None, "error": {"code": "batch_expired", "message": "x"}}) is None


@pytest.fixture
def api(tmp_path: Path) -> TogetherApi:
    return TogetherApi(Store(tmp_path / "sim"), parse_faults(""), 0, random.Random(0).random)


def _uploaded(api: TogetherApi, data: bytes) -> str:
    file_id = api.store.add_file(data, "eval__x__000.jsonl", "batch-api")["id"]
    return str(file_id)


def _refusal(api: TogetherApi, lines: list[Any], **body: Any) -> str:
    data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")
    with pytest.raises(ApiError) as refused:
        api.create({"input_file_id": _uploaded(api, data), "endpoint": "/v1/chat/completions", **body})
    assert refused.value.status == 400
    return refused.value.message


def test_the_simulated_routes_refuse_what_together_does_not_document(api):
    ours = json.loads(_raw_line())
    assert "method, url" in _refusal(api, [{**ours, "method": "POST", "url": "/v1/chat/completions"}])
    assert "at most 64" in _refusal(api, [{**ours, "custom_id": "x" * 65}])
    assert "not unique" in _refusal(api, [ours, ours])
    assert "cannot be changed" in _refusal(api, [ours], completion_window="48h")
    assert "names no model" in _refusal(api, [{**ours, "body": {"messages": []}}])
    created = api.create(
        {"input_file_id": _uploaded(api, _raw_line()), "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    )
    assert set(created) == {"job", "warning"} and created["job"]["status"] in ("VALIDATING", "IN_PROGRESS", "COMPLETED")


def _request_file(tmp_path: Path) -> Path:
    path = tmp_path / "eval__together-sim__000.jsonl"
    path.write_bytes(_raw_line(step="dcg.t1") + _raw_line(step="dcg.t2"))
    return path


def test_the_official_together_sdk_drives_the_simulated_routes(tmp_path):
    """The SDK's own client (not ours) uploads through the signed URL, creates, polls, lists,
    downloads and cancels on the simulated routes, and its types parse every answer."""
    together = pytest.importorskip("together", reason="the official `together` SDK is not installed (test extra)")
    path = _request_file(tmp_path)
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        client = together.Together(base_url=server.root_url + "/together", api_key="sk-simulated", max_retries=0)
        uploaded = client.files.upload(file=path, purpose="batch-api", check=False)
        assert (
            uploaded.id.startswith("file-")
            and uploaded.purpose == "batch-api"
            and uploaded.bytes == path.stat().st_size
        )
        again = client.files.upload(file=path, purpose="batch-api", check=False)
        assert again.id == uploaded.id  # the same checksum: 409, and the SDK takes the file it names
        assert server.stats["calls:together_upload_put"] == 1
        created = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions")
        job = created.job
        assert (
            job is not None
            and job.input_file_id == uploaded.id
            and job.x_model_id == "meta-llama/Llama-3.3-70B-Instruct-Turbo"
        )
        for _ in range(200):
            job = client.batches.retrieve(job.id)
            if job.status == "COMPLETED":
                break
        assert job.status == "COMPLETED" and job.progress == 100.0 and job.output_file_id
        assert job.id in [j.id for j in client.batches.list()]
        lines = [json.loads(x) for x in client.files.content(job.output_file_id).read().decode("utf-8").splitlines()]
        sent = [json.loads(x)["custom_id"] for x in path.read_text(encoding="utf-8").splitlines()]
        assert sorted(x["custom_id"] for x in lines) == sorted(sent)
        assert all(x["response"]["status_code"] == 200 and x["response"]["body"]["choices"] for x in lines)
        with pytest.raises(together.BadRequestError):
            client.batches.cancel(job.id)  # it has ended
        with pytest.raises(together.NotFoundError):
            client.batches.retrieve("01234567-8901-2345-6789-012345678901")


@pytest.mark.parametrize(
    "answer",
    [
        {"file_id": "file-1", "message": "already uploaded"},  # the simulated provider's (and the docs') shape
        {"error": {"message": "already uploaded", "file_id": "file-1"}},  # wrapped, as the openai SDK's body reads
        {"error": {"message": "already uploaded"}, "file_id": "file-1"},  # beside an error member
    ],
)
def test_a_409_names_the_file_uploaded_before_wherever_its_answer_holds_the_id(answer):
    """Together's SDK reads a 409's `file_id` from the answer's JSON (`e.response.json()["file_id"]`);
    the openai SDK's `APIStatusError.body` is the answer's `error` member when it has one, where the
    id may not be: the upload reads the answer itself."""
    import openai

    from lexpilot_batch.providers.sync.call import http
    from lexpilot_batch.providers.together.batch import _conflicting_file

    request = http.Request("POST", "https://api.together.ai/v1/files")
    response = http.Response(409, json=answer, request=request)
    body = answer.get("error", answer)
    assert _conflicting_file(openai.APIStatusError("conflict", response=response, body=body)) == "file-1"
    empty = http.Response(409, content=b"not json", request=request)
    assert _conflicting_file(openai.APIStatusError("conflict", response=empty, body=None)) is None
