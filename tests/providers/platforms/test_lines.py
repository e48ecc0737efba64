"""The OpenAI-compatible platforms' lines (`providers/platforms/`): each names its platform's url,
another platform's thinking switch is refused, and, where each official SDK is installed, the lines
are that SDK's request types (Groq's batch requests, what the zhipuai SDK sends, Volcengine Ark's
batch chat requests)."""

from __future__ import annotations

from typing import Any

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.bodies.request import role_request
from lexpilot_batch.providers.openai.spec import NAME as OPENAI
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.registry import PROFILES, PROVIDERS, guess_profile
from tests.helpers.request_lines import PROMPT
from tests.helpers.request_lines import provider_line as _line
from tests.helpers.request_lines import sdk_keys as _sdk_keys


def test_the_profiles_lines_name_each_platforms_url():
    assert _line("zhipu/glm-4.5", OPENAI, PROFILES["zhipu"].endpoint)["url"] == "/v4/chat/completions"
    for prefix in ("groq", "siliconflow", "moonshot"):
        assert PROFILES[PROVIDERS[prefix].profile or ""].endpoint == "/v1/chat/completions"
    assert PROFILES["siliconflow"].max_requests == 5_000 and PROFILES["zhipu"].max_bytes == 100_000_000
    assert PROVIDERS["ark"].backend == "sync" and not PROVIDERS["ark"].batch_api
    assert (PROVIDERS["ark"].base_url or "").endswith("/api/v3/batch")  # + /chat/completions: its batch chat route
    assert guess_profile("https://open.bigmodel.cn/api/paas/v4") == "zhipu"
    assert guess_profile("https://api.mistral.ai/v1") == "mistral"


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


def _sdk_hint(tp: Any, name: str) -> Any:
    import typing

    hint = typing.get_type_hints(tp)[name]
    while typing.get_args(hint) and typing.get_origin(hint) is not typing.Literal:
        hint = typing.get_args(hint)[0]
    return hint


def typing_args(tp: Any) -> tuple[Any, ...]:
    import typing

    return typing.get_args(tp)
