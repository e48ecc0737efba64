"""Each simulated API's request types, from its official SDK, and what its documentation adds to
them. A type is looked up when a request is checked; an SDK that is not installed leaves its API
checked by what its documentation says alone (`None` below: the route keeps its structural checks).

| request | type | documented beside it |
| --- | --- | --- |
| OpenAI batch create | `openai.types.batch_create_params.BatchCreateParams` (closed; `endpoint` a `Literal`) | |
| OpenAI chat completion | `openai.types.chat.completion_create_params.CompletionCreateParamsNonStreaming` | temperature 0 to 2 and `top_p` 0 to 1 (openai-openapi `CreateChatCompletionRequest`) |
| Groq batch create | `groq.types.batch_create_params.BatchCreateParams` | |
| Zhipu batch create | `zhipuai.types.batch_create_params.BatchCreateParams` (`auto_delete_input_file`, `completion_window` sent null) | BigModel's create reference: `/v4/chat/completions` |
| Anthropic Messages | `anthropic.types.message_create_params.MessageCreateParamsNonStreaming` | `temperature` (0 to 1), `top_p`, `top_k`: the Messages API reference documents them, the installed SDK's type lacks them; a message's role `user` or `assistant` (the reference's; the SDK's type also names `system`) |
| Gemini generateContent | `google.genai.types.Content` (each content, `role` "user" or "model") and `GenerationConfig` | the request's fields: those google-genai 3.6.1 writes into it (`models._GenerateContentParameters_to_mldev`, `_GenerateContentConfig_to_mldev`) |
| Mistral chat completion | `mistralai.client.models.chatcompletionrequest.ChatCompletionRequestTypedDict` (closed) | |
| OpenRouter batch request body | `openrouter.components.ChatRequestTypedDict` (closed) | a batch takes `provider.only` only, as the batch's (its batch quickstart) |
| xAI batch request body | its fields: those of `xai_sdk.proto.v6.chat_pb2.GetCompletionsRequest`; their values: OpenAI's chat completion (open) | "an OpenAI-compatible" chat completions body (its REST reference) |
| Moonshot chat completion | OpenAI's | temperature 0 to 1 (Moonshot's chat reference) |
| Ark batch chat | the fields `volcenginesdkarkruntime` `batch_chat.completions.Completions.create` sends, each null when not given | |
"""

from __future__ import annotations

import importlib
import inspect
from functools import cache
from typing import Any


def _type(module: str, name: str) -> Any | None:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def openai_batch_create() -> Any | None:
    return _type("openai.types.batch_create_params", "BatchCreateParams")


def openai_chat() -> Any | None:
    return _type("openai.types.chat.completion_create_params", "CompletionCreateParamsNonStreaming")


# The ranges OpenAI's API reference gives the sampling fields its types leave as numbers
# (openai-openapi `CreateChatCompletionRequest`: temperature "between 0 and 2", top_p 0 to 1).
OPENAI_DOCUMENTED = {"temperature": (0.0, 2.0), "top_p": (0.0, 1.0)}
# Moonshot's chat reference (https://platform.moonshot.cn/docs/api/chat, "temperature": between 0
# and 1): its temperature is narrower than OpenAI's; `top_p` as OpenAI's.
MOONSHOT_DOCUMENTED = {**OPENAI_DOCUMENTED, "temperature": (0.0, 1.0)}


def openrouter_chat() -> Any | None:
    """OpenRouter's chat completions request, the body of each request of a batch to
    `/v1/chat/completions` (its official SDK, `openrouter`: `components.ChatRequestTypedDict`)."""
    return _type("openrouter.components", "ChatRequestTypedDict")


def xai_completion_fields() -> frozenset[str] | None:
    """The fields of xAI's chat completions request, as its official SDK's protobuf message names
    them (`xai-sdk`: `proto.v6.chat_pb2.GetCompletionsRequest`); the REST body of each request of a
    batch (`chat_get_completion`) is its JSON."""
    message = _type("xai_sdk.proto.v6.chat_pb2", "GetCompletionsRequest")
    return None if message is None else frozenset(f.name for f in message.DESCRIPTOR.fields)


def groq_batch_create() -> Any | None:
    return _type("groq.types.batch_create_params", "BatchCreateParams")


def zhipu_batch_create() -> Any | None:
    return _type("zhipuai.types.batch_create_params", "BatchCreateParams")


def anthropic_messages() -> Any | None:
    return _type("anthropic.types.message_create_params", "MessageCreateParamsNonStreaming")


# The Messages API reference's sampling fields, which the installed SDK's type does not carry:
# temperature "Ranges from 0.0 to 1.0", top_p and top_k.
ANTHROPIC_DOCUMENTED = {"temperature": (0.0, 1.0), "top_p": (0.0, 1.0), "top_k": (0.0, None)}
# A message's role in the Messages API reference: "user" or "assistant" (a system prompt is the
# top-level `system`); the installed SDK's type also names "system" there.
ANTHROPIC_ROLES = ("user", "assistant")


def gemini_content() -> Any | None:
    return _type("google.genai.types", "Content")


def gemini_generation_config() -> Any | None:
    return _type("google.genai.types", "GenerationConfig")


# The fields of a GenerateContentRequest as google-genai 3.6.1 writes one (`contents` and
# `generationConfig` from `_GenerateContentParameters_to_mldev`, the rest from
# `_GenerateContentConfig_to_mldev`); the API's own `model` is in the call's path.
GEMINI_REQUEST_FIELDS = frozenset(
    {
        "contents",
        "generationConfig",
        "systemInstruction",
        "safetySettings",
        "tools",
        "toolConfig",
        "cachedContent",
        "labels",
        "serviceTier",
        "store",
        "continuationToken",
    }
)
# `Content.role`: "Optional. The producer of the content. Must be either 'user' or 'model'."
GEMINI_ROLES = ("user", "model")


def mistral_chat() -> Any | None:
    return _type("mistralai.client.models.chatcompletionrequest", "ChatCompletionRequestTypedDict")


@cache
def ark_batch_chat_fields() -> frozenset[str] | None:
    """The body fields Ark's SDK sends to its batch chat route (its `create`'s own parameters)."""
    found = _type("volcenginesdkarkruntime.resources.batch_chat.completions", "Completions")
    if found is None:
        return None
    create = found.create
    # Its decorators (`with_sts_token`, `with_e2e_encryption`) keep no `__wrapped__`: the function
    # they wrap is the one in their closure.
    while getattr(create, "__closure__", None) and "kwargs" in inspect.signature(create).parameters:
        inner = [c.cell_contents for c in create.__closure__ if inspect.isfunction(c.cell_contents)]
        if not inner:
            break
        create = inner[0]
    names = inspect.signature(create).parameters
    skip = ("self", "extra_headers", "extra_query", "extra_body", "timeout")
    return frozenset(n for n in names if n not in skip and names[n].kind is inspect.Parameter.KEYWORD_ONLY)
