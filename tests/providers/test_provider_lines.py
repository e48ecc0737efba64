"""Issue 28's providers, their lines and objects against their documented formats: Mistral's request
lines (`{custom_id, body}`, https://docs.mistral.ai/capabilities/batch) and, where the official
`mistralai` SDK is installed (optional: it is no extra of ours), its `BatchRequest` type and its own
client run against the simulated provider's batch job routes; Mistral's content chunks and error
bodies; the profiles' request urls, statuses and thinking switches."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.bodies.request import role_request
from lexpilot_batch.providers.ids import custom_id, id_tag, request_check
from lexpilot_batch.providers.lines import request_line
from lexpilot_batch.providers.mistral import results as mistral_results
from lexpilot_batch.providers.mistral.batch import STATUSES, info, timeout_hours
from lexpilot_batch.providers.mistral.errors import error_message
from lexpilot_batch.providers.mistral.spec import NAME as MISTRAL
from lexpilot_batch.providers.openai.batch import status_of
from lexpilot_batch.providers.openai.spec import NAME as OPENAI
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.registry import PROFILES, PROVIDERS, guess_profile
from lexpilot_batch.simulated import SimulatedServer, parse_faults

TAG = id_tag("workspace-1")
PROMPT = "请根据以下案情作答：原告诉称……"


def _line(model: str, api: str, url: str = "/v1/chat/completions") -> dict[str, Any]:
    request = role_request("eval", parse_model(model), Settings())
    cid = custom_id("0a1b2c3d", 4, "dcg.t1", 1, request_check(TAG, request.fields.encode("utf-8")))
    raw = request_line(cid, request.model, PROMPT, request.fields, url, api=api, tag=TAG)
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    return json.loads(raw)


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


def test_the_profiles_lines_name_each_platforms_url():
    assert _line("zhipu/glm-4.5", OPENAI, PROFILES["zhipu"].endpoint)["url"] == "/v4/chat/completions"
    for prefix in ("groq", "siliconflow", "moonshot"):
        assert PROFILES[PROVIDERS[prefix].profile or ""].endpoint == "/v1/chat/completions"
    assert PROFILES["siliconflow"].max_requests == 5_000 and PROFILES["zhipu"].max_bytes == 100_000_000
    assert PROVIDERS["ark"].backend == "sync" and not PROVIDERS["ark"].batch_api
    assert (PROVIDERS["ark"].base_url or "").endswith("/api/v3/batch")  # + /chat/completions: its batch chat route
    assert guess_profile("https://open.bigmodel.cn/api/paas/v4") == "zhipu"
    assert guess_profile("https://api.mistral.ai/v1") == "mistral"


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


def test_another_platforms_thinking_switch_is_refused_naming_the_right_one():
    body = role_request("eval", parse_model("zhipu/glm-4.5"), Settings(), args={"thinking": {"type": "disabled"}})
    assert body.body["thinking"] == {"type": "disabled"}
    with pytest.raises(ConfigError, match=r"zhipu/glm-4.5:thinking=\{\"type\": \"disabled\"\}"):
        role_request("eval", parse_model("zhipu/glm-4.5"), Settings(), args={"enable_thinking": False})
    with pytest.raises(ConfigError, match="enable_thinking=false"):
        role_request("judge", parse_model("siliconflow/Qwen/Qwen3-8B"), Settings(), args={"thinking": {}})
    # A bare name, and a provider documenting no switch, take anything.
    role_request("eval", parse_model("Qwen/Qwen3-8B"), Settings(), args={"thinking": {}})
    role_request("eval", parse_model("mistral/magistral-small-latest"), Settings(), args={"enable_thinking": True})


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


def _bodies(model: str, args: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The body every role of `model` sends (the evaluated model's, the User Model's, the judge's
    temperature), each checked by the guard first, as `prepare` checks it."""
    from lexpilot_batch.providers.bodies.contract import check_role_body

    out = []
    for role in ("eval", "user", "judge"):
        name = parse_model(model)
        request = role_request(role, name, Settings(), args=args)
        check_role_body(role, name, request.body)
        out.append({"model": request.model, "messages": [{"role": "user", "content": PROMPT}], **request.body})
    return out


def _sdk_keys(tp: Any) -> set[str]:
    import typing

    return set(typing.get_type_hints(tp))


def test_groq_lines_are_the_groq_sdks_batch_requests():
    """The `groq` SDK's `CompletionCreateParams` (the body of a line) and `BatchCreateParams`
    (`endpoint` `/v1/chat/completions`, the url of a line); the guard's copy of Groq's field list is
    the SDK's own."""
    chat = pytest.importorskip("groq.types.chat.completion_create_params", reason="the groq SDK is not installed")
    from groq.types import batch_create_params
    from pydantic import TypeAdapter

    from lexpilot_batch.providers.platforms.groq import FIELDS as GROQ_FIELDS

    assert _sdk_keys(chat.CompletionCreateParams) == GROQ_FIELDS
    adapter = TypeAdapter(chat.CompletionCreateParams)
    (endpoint,) = typing_args(_sdk_hint(batch_create_params.BatchCreateParams, "endpoint"))
    line = _line("groq/llama-3.3-70b-versatile", OPENAI, PROFILES["groq"].endpoint)
    assert line["url"] == endpoint and line["method"] == "POST"
    for body in [line["body"], *_bodies("groq/qwen/qwen3-32b", {"reasoning_effort": "none"})]:
        assert set(body) <= GROQ_FIELDS, body
        adapter.validate_python(body)
        assert body["n"] == 1  # "only n=1 is supported. Other values will result in a 400"


def test_zhipu_lines_are_what_the_zhipuai_sdk_sends():
    """The `zhipuai` SDK's `chat.completions.create` (its keyword arguments are the fields of a
    request; it keeps temperature and top_p inside (0, 1), rewriting others): every compiled body
    binds to it, with its values sent unchanged. Where the sources disagree: the SDK's
    `BatchCreateParams.endpoint` is `/v1/chat/completions` (its batch types are OpenAI's, their
    docstrings still linking platform.openai.com), while BigModel's batch guide
    (docs.bigmodel.cn/cn/guide/tools/batch) names `/v4/chat/completions` in each line: the profile
    follows the guide. And the SDK sends no `n`, which every `max_tokens`-dialect body carries as 1
    (OpenAI's default): the one field outside the SDK's, left as compiled (docs/providers.md)."""
    completions = pytest.importorskip(
        "zhipuai.api_resource.chat.completions", reason="the zhipuai SDK is not installed"
    )
    import inspect

    signature = inspect.signature(completions.Completions.create)
    for body in _bodies("zhipu/glm-4.5", {"thinking": {"type": "disabled"}}):
        assert body["n"] == 1 and "n" not in signature.parameters
        signature.bind(None, **{k: v for k, v in body.items() if k != "n"})  # TypeError for another field
        assert 0 < body["temperature"] < 1 and body["thinking"]["type"] in ("enabled", "disabled")
    assert _line("zhipu/glm-4.5", OPENAI, PROFILES["zhipu"].endpoint)["url"] == "/v4/chat/completions"


def test_ark_requests_are_the_volcengine_ark_sdks_batch_chat_requests():
    """The Volcengine Ark SDK (`volcengine-ark-runtime`): its batch chat `Completions.create`
    (`POST /batch/chat/completions`, the route `ark/` sends each request to) takes every compiled
    body's fields, their types those of its `CompletionCreateParamsBase` and `Thinking`."""
    chat = pytest.importorskip(
        "volcenginesdkarkruntime.resources.batch_chat.completions",
        reason="the Volcengine Ark SDK (volcengine-ark-runtime) is not installed",
    )
    import inspect

    from pydantic import TypeAdapter
    from volcenginesdkarkruntime.types.chat import completion_create_params as params

    signature = inspect.signature(chat.Completions.create)
    typed = TypeAdapter(params.CompletionCreateParamsBase)
    keys = _sdk_keys(params.CompletionCreateParamsBase)
    for body in _bodies("ark/ep-bi-20250101-abc", {"thinking": {"type": "disabled"}}):
        signature.bind(None, **body)
        typed.validate_python({k: v for k, v in body.items() if k in keys})
        TypeAdapter(params.Thinking).validate_python(body["thinking"])


def test_the_guards_mistral_field_list_is_the_sdks():
    """Without the `mistralai` SDK the guard keeps a cited copy of its request's fields: the same."""
    request = pytest.importorskip("mistralai.client.models.chatcompletionrequest", reason="mistralai not installed")
    from lexpilot_batch.providers.mistral.contract import _FIELDS

    assert _sdk_keys(request.ChatCompletionRequestTypedDict) == _FIELDS


def _sdk_hint(tp: Any, name: str) -> Any:
    import typing

    hint = typing.get_type_hints(tp)[name]
    while typing.get_args(hint) and typing.get_origin(hint) is not typing.Literal:
        hint = typing.get_args(hint)[0]
    return hint


def typing_args(tp: Any) -> tuple[Any, ...]:
    import typing

    return typing.get_args(tp)
