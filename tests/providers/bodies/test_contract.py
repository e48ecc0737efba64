"""The conformance guard (issue 25): every body `prepare` would compile checked against its API's
contract, the answer kinds of providers' documented result shapes, and Gemini's inlined responses.

Sources, besides the installed SDKs (`openai` 3.x `CompletionCreateParamsNonStreaming`,
`anthropic` `MessageCreateParamsNonStreaming`, `google-genai` `types.GenerationConfig`,
`types.FinishReason`, `types.BatchJobDestination`):

- OpenAI API reference, Chat Completions `reasoning_effort`: o-series models take low, medium and
  high; `none` is gpt-5.1's and later's.
- vLLM `vllm/entrypoints/openai/run_batch.py` (`make_error_request_output`) and
  `protocol.BatchRequestOutput`: a refused request is a line with `response.status_code` 400,
  `body: null`, and `error` a string or an `ErrorResponse` (`{"object": "error", "message",
  "type", "param", "code": 400}`).
- DeepSeek API docs, `finish_reason`: `insufficient_system_resource`, "the request is interrupted
  due to insufficient resource of the inference system".
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine.answers import judge_line
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.bodies.contract import check_role_body, line_problems
from lexpilot_batch.providers.bodies.request import role_request
from lexpilot_batch.providers.google import results as google_results
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.state.states import INVALID, PERMANENT


def _check(model: str, args: dict[str, Any] | None = None, effort: str | None = None) -> dict[str, Any]:
    name = parse_model(model)
    request = role_request("eval", name, Settings(), reasoning_effort=effort, args=args)
    check_role_body("eval", name, request.body)
    return request.body


# --- item 3: reasoning efforts ----------------------------------------------------------------------


def test_o4_mini_refuses_reasoning_effort_none_and_gpt_5_1_takes_it():
    """Before the guard `--reasoning-effort none` compiled for o4-mini, and every judge line got a 400."""
    with pytest.raises(ConfigError) as caught:
        _check("openai/o4-mini", effort="none")
    message = str(caught.value)
    assert "openai/o4-mini" in message and "reasoning_effort" in message and "'none'" in message
    assert "Nothing was compiled" in message
    assert _check("openai/o4-mini", effort="high")["reasoning_effort"] == "high"
    assert _check("openai/gpt-5.1", effort="none")["reasoning_effort"] == "none"
    with pytest.raises(ConfigError, match="reasoning_effort"):
        _check("openai/gpt-4o-mini", {"reasoning_effort": "low"})  # not a reasoning model


# --- item 7 and 8: the body and --model-arg ---------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "args", "field"),
    [
        ("openai/gpt-4o-mini", {"temprature": 0.5}, "did you mean temperature"),  # a mistyped --model-arg
        ("openai/gpt-4o-mini", {"bogus": 1}, "bogus: not a field of OpenAI's Chat Completions"),
        ("openai/gpt-4o-mini", {"temperature": 3}, "temperature: must be between 0 and 2"),
        ("openai/gpt-4o-mini", {"temperature": "0.7"}, "temperature"),
        ("azure/my-deployment", {"top_p": 1.5}, "top_p: must be between 0 and 1"),
        ("dashscope/qwen-plus", {"temprature": 0.5}, "did you mean temperature"),
        ("anthropic/claude-sonnet-4-5", {"n": 1}, "n: not a field of Anthropic's Messages"),
        ("anthropic/claude-sonnet-4-5", {"max_completion_tokens": 8}, "max_completion_tokens"),
        ("anthropic/claude-3-haiku-20240307", {"max_tokens": 200_000}, "at most 4,096"),
        ("anthropic/claude-sonnet-4-5", {"temperature": 1.5}, "temperature: must be between 0 and 1"),
        (
            "anthropic/claude-sonnet-4-5",
            {"thinking": {"type": "enabled", "budget_tokens": 512}},
            "thinking.budget_tokens: must be between 1,024",
        ),
        ("google/gemini-2.5-flash", {"generationConfig": {"max_tokens": 5}}, "generationConfig.max_tokens"),
        ("google/gemini-2.5-flash", {"generationConfig": {"temperature": 5}}, "generationConfig.temperature"),
        (
            "google/gemini-2.5-flash",
            {"generationConfig": {"thinkingConfig": {"thinkingBudget": 100_000}}},
            "thinkingBudget",
        ),
        (
            "google/gemini-2.5-pro",
            {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
            "cannot turn thinking off",
        ),
    ],
)
def test_prepare_refuses_what_the_contract_refuses_naming_model_and_field(model, args, field):
    with pytest.raises(ConfigError) as caught:
        _check(model, args)
    assert model in str(caught.value) and field in str(caught.value)
    assert "?." not in str(caught.value)  # "did you mean temperature?", then the next sentence


@pytest.mark.parametrize(
    ("model", "args"),
    [
        # Issue 27's fields, real API fields: OpenAI Chat Completions `service_tier`, `prompt_cache_key`.
        ("openai/gpt-4o-mini", {"service_tier": "flex", "prompt_cache_key": "lexpilot-case-1"}),
        ("azure/my-deployment", {"service_tier": "flex"}),
        # Anthropic `cache_control` on a system block and at the top (the installed SDK types both).
        (
            "anthropic/claude-sonnet-4-5",
            {"system": [{"type": "text", "text": "律师", "cache_control": {"type": "ephemeral"}}]},
        ),
        ("anthropic/claude-sonnet-4-5", {"cache_control": {"type": "ephemeral"}}),
        # Gemini `serviceTier` (google-genai `GenerateContentConfig.service_tier`, sent as `serviceTier`).
        ("google/gemini-2.5-flash", {"serviceTier": "flex"}),
        # Extensions of compatible servers are theirs to take (vLLM's `top_k`, DashScope's switch).
        ("openai-api/vllm/Qwen/Qwen2.5-7B-Instruct", {"top_k": 20}),
        ("dashscope/qwen-plus", {"enable_thinking": False}),
        ("anthropic/claude-sonnet-4-5", {"thinking": {"type": "enabled", "budget_tokens": 2048}}),
    ],
)
def test_documented_fields_pass_the_guard(model, args, monkeypatch):
    monkeypatch.setenv("VLLM_BASE_URL", "http://127.0.0.1:8000/v1")
    body = _check(model, args)
    assert all(body[k] == v for k, v in args.items() if k != "generationConfig")


# --- issue 28's providers: their own contracts (`contracts.OWN`) -----------------------------------


@pytest.mark.parametrize(
    ("model", "args", "field"),
    [
        # Mistral (the mistralai SDK's ChatCompletionRequest: closed; 422 extra_forbidden for OpenAI's fields)
        (
            "mistral/mistral-small-latest",
            {"max_completion_tokens": 64},
            "max_completion_tokens: not a field of Mistral",
        ),
        ("mistral/mistral-small-latest", {"temprature": 0.5}, "did you mean temperature"),
        ("mistral/mistral-small-latest", {"top_p": 1.5}, "top_p: must be between 0 and 1"),
        # Groq (the groq SDK's CompletionCreateParams: its fields only, n 1, its reasoning_effort values)
        ("groq/llama-3.3-70b-versatile", {"n": 2}, "n: Groq takes only 1"),
        ("groq/llama-3.3-70b-versatile", {"top_k": 20}, "top_k: not a field of Groq's chat completions"),
        ("groq/qwen/qwen3-32b", {"reasoning_effort": "minimal"}, "reasoning_effort: must be one of none, default"),
        # Zhipu (docs.bigmodel.cn: thinking {"type": enabled|disabled}; temperature 0-1)
        ("zhipu/glm-4.5", {"temperature": 1.5}, "temperature: Zhipu BigModel takes 0 to 1"),
        ("zhipu/glm-4.5", {"thinking": {"type": "off"}}, "thinking: must be {\"type\": 'enabled' or 'disabled'}"),
        # Qianfan and SiliconFlow (enable_thinking a boolean; SiliconFlow's thinking_budget 128-32,768)
        ("qianfan/deepseek-v3.2", {"enable_thinking": "false"}, "enable_thinking: must be true or false"),
        ("siliconflow/Qwen/Qwen3-8B", {"thinking_budget": 64}, "thinking_budget: must be an integer from 128"),
        ("siliconflow/Qwen/Qwen3-8B", {"min_p": 2}, "min_p: must be a number of at most 1"),
        # Moonshot (platform.kimi.com models overview: n at most 5; Kimi K2.6 fixes its sampling)
        ("moonshot/kimi-k2-0905-preview", {"n": 6}, "n: Moonshot (Kimi) takes 1 to 5"),
        ("moonshot/kimi-k2-0905-preview", {"temperature": 1.3}, "temperature: Moonshot (Kimi) takes 0 to 1"),
        ("moonshot/kimi-k2.6", None, "temperature: Kimi K2.5 and K2.6 take no temperature"),
        # Ark (the Ark SDK: thinking {"type": enabled|disabled|auto}; temperature 0-2)
        ("ark/ep-bi-20250101-abc", {"thinking": {"type": "on"}}, "thinking: must be"),
        ("ark/ep-bi-20250101-abc", {"temperature": 2.5}, "temperature: Volcengine Ark takes 0 to 2"),
    ],
)
def test_prepare_refuses_what_a_platforms_own_contract_refuses(model, args, field):
    """Before, each of these compiled (only misspellings of OpenAI's fields were refused)."""
    with pytest.raises(ConfigError) as caught:
        _check(model, args)
    assert model in str(caught.value) and field in str(caught.value) and "Nothing was compiled" in str(caught.value)


def test_mistrals_contract_without_its_sdk_keeps_the_references_fields(monkeypatch):
    """Without the optional `mistralai` SDK the guard keeps the cited field list (`_FIELDS`, the
    same as the SDK's: providers/mistral/test_lines.py) and the ranges."""
    from lexpilot_batch.providers.mistral import contract as mistral_contract

    monkeypatch.setattr(mistral_contract, "_sdk", lambda: (None, mistral_contract._FIELDS))
    assert _check("mistral/mistral-small-latest", {"random_seed": 7})["random_seed"] == 7
    for args, field in (({"max_completion_tokens": 8}, "max_completion_tokens"), ({"temperature": -1}, "temperature")):
        with pytest.raises(ConfigError, match=field):
            _check("mistral/mistral-small-latest", args)


@pytest.mark.parametrize(
    ("model", "args"),
    [
        ("mistral/magistral-small-latest", {"prompt_mode": "reasoning", "random_seed": 7}),
        ("groq/qwen/qwen3-32b", {"reasoning_effort": "default", "reasoning_format": "parsed"}),
        ("zhipu/glm-4.5", {"thinking": {"type": "disabled"}, "do_sample": False}),
        ("qianfan/deepseek-v3.2", {"enable_thinking": True}),
        ("siliconflow/Qwen/Qwen3-8B", {"enable_thinking": True, "thinking_budget": 4096, "min_p": 0.05}),
        ("moonshot/kimi-k2.6", {"temperature": None, "thinking": {"type": "disabled"}}),
        ("ark/ep-bi-20250101-abc", {"thinking": {"type": "auto"}}),
    ],
)
def test_a_platforms_documented_fields_pass_its_contract(model, args):
    body = _check(model, args)
    assert all(body.get(k) == v for k, v in args.items() if v is not None)


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        ("openai/gpt-4o-mnii", "did you mean gpt-4o-mini"),  # `openai.types.ChatModel` lists gpt-4o-mini
        ("openai/openai/gpt-4o", "openai/ is lexpilot-batch's provider prefix"),
        ("openai/claude-sonnet-4-5", "send it as anthropic/claude-sonnet-4-5"),
        ("anthropic/gpt-4o", "Claude models only"),
        ("anthropic/claude-sonet-4-6", "did you mean claude-sonnet-4-6"),  # `anthropic.types.Model` lists it
        ("google/claude-sim", "the Gemini API serves no Anthropic model"),
        ("google/gpt-sim", "the Gemini API serves Gemini and Gemma models"),
        ("mistral/gemini-2.5-flash", "send it as google/gemini-2.5-flash"),
    ],
)
def test_prepare_refuses_a_model_its_api_does_not_serve(model, needle):
    """Item 8's "any model name": the rule of `providers.served`, the same the simulated provider keeps."""
    with pytest.raises(ConfigError) as caught:
        _check(model)
    assert model in str(caught.value) and needle in str(caught.value) and "Nothing was compiled" in str(caught.value)
    assert "?." not in str(caught.value)  # a question ends its sentence (issue 48 point 8)


@pytest.mark.parametrize(
    "model",
    [
        "openai/gpt-sim",
        "anthropic/claude-sim",
        "google/gemini-sim",
        "mistral/mistral-sim",
        "azure/gpt-4o-mnii",  # an Azure deployment is named by its owner
        "openai-api/groq/openai/gpt-oss-20b",  # Groq's own model id
        "google/models/gemini-2.5-flash",  # the resource name's form, which the Gemini API takes
        # On a compatible endpoint a name that starts with one of our prefixes is the service's own id:
        "together/google/gemma-3n-E4B-it",  # Together's model list
        "openai-api/openrouter/openai/gpt-4o",  # OpenRouter's
        "openai-api/openrouter/anthropic/claude-sonnet-4.5",
        "openai-api/vertex/google/gemini-2.5-flash",  # Vertex AI's OpenAI-compatible endpoint
    ],
)
def test_prepare_takes_simulator_names_new_versions_and_other_endpoints_names(model, monkeypatch):
    monkeypatch.setenv("GROQ_BASE_URL", "https://api.groq.com/openai/v1")
    monkeypatch.setenv("OPENROUTER_BASE_URL", "https://openrouter.ai/api/v1")
    monkeypatch.setenv(
        "VERTEX_BASE_URL", "https://aiplatform.googleapis.com/v1/projects/p/locations/global/endpoints/openapi"
    )
    _check(model)


@pytest.mark.parametrize(
    ("model", "near"),
    [
        ("anthropic/claude-sonnet-4-7", None),  # a version no catalogue lists: maybe newer, maybe a slip
        ("google/gemma-3-27b-it", None),  # a family the Gemini API names, but no catalogue lists it
        ("google/learnlm-2.0-flash-experimental", None),
        ("anthropic/claude-sonet-4-5", "claude-sonnet-4-5"),  # issue 45: a family row matched, the API said 404
        ("google/gemini-2.5-flsh", "gemini-2.5-flash"),
        ("mistral/mistral-medum-latest", "mistral-medium-latest"),
        ("zhipu/glm-4-pluss", "glm-4-plus"),
        ("deepseek/deepseek-resoner", "deepseek-reasoner"),
    ],
)
def test_a_name_no_catalogue_lists_is_refused_unless_allowed(model, near):
    """Issue 45: a family pattern alone no longer makes a name known. A name neither the installed
    SDK's list nor the provider's bundled, dated catalogue holds is refused, naming the value, its
    role, the catalogue's source and what to pass instead (`--allow-model`, for a model newer than
    the catalogue); allowed, it is taken."""
    with pytest.raises(ConfigError) as caught:
        _check(model)
    said = str(caught.value)
    name = parse_model(model)
    assert name.provider is not None and name.provider.catalogue is not None
    taken = name.provider.catalogue.taken
    assert model in said and "(eval role)" in said and f"--allow-model {model}" in said and taken in said
    assert (f"did you mean {near}?" in said) if near else ("did you mean" not in said)
    check_role_body("eval", name, role_request("eval", name, Settings()).body, allowed=frozenset({model}))


def test_claude_follows_the_installed_sdk_no_temperature_unless_asked_for():
    """Item 7. The installed `anthropic` SDK's `MessageCreateParamsNonStreaming` has no
    `temperature`; the public Messages reference documents one (0-1). We follow the SDK: none by
    default; `--model-arg MODEL:temperature=0.5` sends one, checked against the reference's range."""
    from anthropic.types import message_create_params

    assert "temperature" not in message_create_params.MessageCreateParamsNonStreaming.__annotations__
    assert "temperature" not in _check("anthropic/claude-sonnet-4-5")
    assert _check("anthropic/claude-sonnet-4-5", {"temperature": 0.5})["temperature"] == 0.5
    assert "temperature" not in _check("anthropic/claude-sonnet-4-5", {"temperature": None})


# --- items 4, 5, 6: answer kinds --------------------------------------------------------------------


def _answer(finish: str | None, content: str = "好的，请说明。") -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
    return {"custom_id": "c", "response": {"status_code": 200, "body": {"choices": [choice]}}, "error": None}


@pytest.mark.parametrize(
    "error",
    [
        "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.",
        {
            "object": "error",
            "message": "maximum context length exceeded",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ],
)
def test_a_vllm_error_line_with_a_4xx_status_is_permanent(error):
    """Item 4: before, such a line was a transport failure, sent `--retries` more times."""
    line = {
        "id": "vllm-1",
        "custom_id": "c",
        "response": {"status_code": 400, "request_id": "r", "body": None},
        "error": error,
    }
    ok, _, _, reason, kind, _ = judge_line(line, "text", 0)
    assert not ok and kind == PERMANENT and "context length" in str(reason)
    # A 5xx (or a bare error without a status) is still the provider's failure: retried.
    line["response"]["status_code"] = 500
    assert judge_line(line, "text", 0)[4] != PERMANENT


def test_deepseeks_insufficient_system_resource_is_no_answer():
    """Item 6: a cut-off answer was accepted as a User Model or consultation reply."""
    ok, _, _, reason, kind, _ = judge_line(_answer("insufficient_system_resource"), "text", 0)
    assert not ok and kind == INVALID and "insufficient_system_resource" in str(reason)
    assert judge_line(_answer("stop"), "text", 0)[0]


@pytest.mark.parametrize(
    "reason", ["CONTINUATION", "ESCALATION", "MALFORMED_RESPONSE", "OTHER", "LANGUAGE", "FINISH_REASON_UNSPECIFIED"]
)
def test_gemini_incomplete_finish_reasons_are_no_answer(reason):
    """Item 5: google-genai `types.FinishReason` values other than STOP, MAX_TOKENS and the filters."""
    from google.genai import types

    assert reason in types.FinishReason.__members__
    response = {"candidates": [{"content": {"role": "model", "parts": [{"text": "部分回答"}]}, "finishReason": reason}]}
    line = google_results.result({"key": "c", "response": response})
    ok, _, _, why, kind, _ = judge_line(line, "text", 0)
    assert not ok and kind == INVALID and reason in str(why)
    stop = google_results.result(
        {"key": "c", "response": {**response, "candidates": [{**response["candidates"][0], "finishReason": "STOP"}]}}
    )
    assert judge_line(stop, "text", 0)[0]


# --- item 9: Gemini inlined responses ---------------------------------------------------------------


def test_a_gemini_job_with_inlined_responses_is_read():
    """Before, `dest.inlined_responses` (google-genai `types.BatchJobDestination`) read as
    completed with no output file: every request was lost."""
    from google.genai import types

    from lexpilot_batch.providers.google.batch import INLINED, _info, inlined_lines

    response = types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                content=types.Content(role="model", parts=[types.Part(text="好的")]),
                finish_reason=types.FinishReason.STOP,
            )
        ]
    )
    job = types.BatchJob(
        name="batches/abc",
        state=types.JobState.JOB_STATE_SUCCEEDED,
        dest=types.BatchJobDestination(
            inlined_responses=[
                types.InlinedResponse(response=response, metadata={"key": "c-1"}),
                types.InlinedResponse(error=types.JobError(code=3, message="bad"), metadata={"key": "c-2"}),
            ]
        ),
    )
    info = _info(job)
    assert info.status == "completed" and info.output_file_id == INLINED + "batches/abc"
    lines = [json.loads(x) for x in inlined_lines(job).decode("utf-8").splitlines()]
    read = [judge_line(google_results.result(line), "text", 0) for line in lines]
    assert [line["key"] for line in lines] == ["c-1", "c-2"]
    assert read[0][0] and read[0][1] == "好的" and not read[1][0] and read[1][4] == PERMANENT


# --- the line contract ------------------------------------------------------------------------------


def test_batch_lines_keep_their_api_shape():
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 8}
    line = {"custom_id": "c", "method": "POST", "url": "/chat/completions", "body": body}
    assert line_problems("openai", line, prefix="azure") == []  # Azure's documented url
    assert [p.field for p in line_problems("openai", {**line, "url": "/v1/embeddings"}, prefix="openai")] == ["url"]
    params = {"model": "claude-sonnet-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    assert [p.field for p in line_problems("anthropic", {"custom_id": "a.b", "params": params})] == ["custom_id"]
    system = {**params, "messages": [{"role": "system", "content": "x"}]}
    assert [p.field for p in line_problems("anthropic", {"custom_id": "a", "params": system})] == [
        "params.messages.0.role"
    ]
