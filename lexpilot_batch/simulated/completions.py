"""`/v1/chat/completions` bodies: a simulated answer wrapped as a realistic chat.completion.

Used by the synchronous route and by every line of a batch. A body is checked as OpenAI checks it,
the parameters a reasoning model refuses included (an HTTP 400, or a 400 line in a batch), and a
model the route cannot serve is answered as OpenAI answers one, 404 `model_not_found`, saying why
(`providers.bodies.model_names`: this route serves every lab's models, as `--provider simulated`
sends them all here, but no name with our prefix left on and no near miss of an SDK's model list).
The answer comes from `roles`; this module adds the envelope (ids, `usage` with cached and
reasoning tokens, `finish_reason`) and the per-request content faults: truncation
(`finish_reason="length"`, content cut), malformed judge JSON, empty content, content-filtered
answers and refusals. Token counts are estimates (about 1.5 characters per token, which is roughly
right for Chinese), enough for the product's usage bookkeeping.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from typing import Any

from lexpilot_batch.providers.anthropic import contract as anthropic_contract
from lexpilot_batch.providers.anthropic.spec import NAME as ANTHROPIC
from lexpilot_batch.providers.bodies import model_names as served
from lexpilot_batch.providers.bodies.schema import MISSING, RANGE, TYPE, UNKNOWN, UNSUPPORTED, Problem
from lexpilot_batch.providers.google import contract as google_contract
from lexpilot_batch.providers.google.spec import NAME as GOOGLE
from lexpilot_batch.providers.openai import contract as openai_contract
from lexpilot_batch.providers.openai.spec import NAME as OPENAI
from lexpilot_batch.simulated import caching, roles
from lexpilot_batch.simulated.errors import ApiError, bad_request

CHARS_PER_TOKEN = 1.5

# OpenAI's reasoning models as its API knows them, dated snapshots included. Written from the
# provider's side on purpose, apart from the client's rule (`providers.bodies.request`): the tests check
# the client's bodies against this, so a shared rule would hide a mistake in it.
_REASONING_MODELS = re.compile(
    r"(?:o1|o1-mini|o1-preview|o1-pro|o3|o3-mini|o3-pro|o3-deep-research|o4-mini|o4-mini-deep-research"
    r"|gpt-5|gpt-5-mini|gpt-5-nano|gpt-5-pro|gpt-5-codex|gpt-5\.1|gpt-5\.1-codex|gpt-5\.1-codex-mini"
    r"|codex-mini-latest)(?:-\d{4}-\d{2}-\d{2})?"
)


def tokens(text: str) -> int:
    return max(1, int(len(text) / CHARS_PER_TOKEN))


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def check_body(body: Any) -> tuple[str, str]:
    """The (model, prompt) of a chat.completions body; `ApiError` 400 when it is unusable.

    The prompt is the last user message: the benchmark sends each filled template as one.
    """
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.", param=None)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("you must provide a model parameter", "model", "missing_required_parameter")
    missing = served.model_problem(served.ANY, model)
    if missing is not None:  # OpenAI's answer to a model it does not serve, and why (`providers.bodies.model_names`)
        raise ApiError(
            404,
            f"The model `{model}` does not exist or you do not have access to it ({missing}).",
            code="model_not_found",
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty array", param="messages", code="missing_required_parameter")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise bad_request(f"Invalid message at messages[{i}]: a role is required.", f"messages[{i}]")
    if body.get("stream"):
        raise bad_request("stream=true is not supported by the simulated provider.", param="stream")
    _check_parameters(model, body)
    _check_contract(model, body)
    users = [_text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    prompt = users[-1] if users else "\n".join(_text_of(m.get("content")) for m in messages)
    return model, prompt


def _check_parameters(model: str, body: dict[str, Any]) -> None:
    """Refuse what OpenAI refuses: `max_tokens` or a temperature other than the default for a
    reasoning model, `reasoning_effort` for any other model (HTTP 400, OpenAI's messages)."""
    if _REASONING_MODELS.fullmatch(model):
        if "max_tokens" in body:
            raise bad_request(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        temperature = body.get("temperature")
        if temperature is not None and temperature != 1:
            raise bad_request(
                f"Unsupported value: 'temperature' does not support {temperature} with this model. "
                "Only the default (1) value is supported.",
                "temperature",
                "unsupported_value",
            )
    elif "reasoning_effort" in body:
        raise bad_request(
            "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
            "reasoning_effort",
            "unsupported_parameter",
        )


# How OpenAI words each kind of refusal (its 400 answers: `invalid_request_error`, the field as
# `param`): "Unrecognized request argument supplied", "Invalid 'temperature': ...", ...
_WORDING = {
    UNKNOWN: ("Unrecognized request argument supplied: {field}", "unknown_parameter"),
    RANGE: ("Invalid '{field}': {reason}", "invalid_value"),
    UNSUPPORTED: ("Unsupported value: '{field}': {reason}", "unsupported_value"),
    MISSING: ("Missing required parameter: '{field}'.", "missing_required_parameter"),
    TYPE: ("Invalid type for '{field}': {reason}", "invalid_type"),
}


def _claude(model: str, body: dict[str, Any]) -> list[Problem]:
    return anthropic_contract.problems(body)


def _gemini(model: str, body: dict[str, Any]) -> list[Problem]:
    if "generationConfig" not in body:
        return []  # a line the Gemini routes made of a request they checked (`apis.gemini`)
    # A Gemini body rehearsed over the OpenAI routes: its fields beside one text content.
    rest = {k: v for k, v in body.items() if k not in ("model", "messages")}
    return google_contract.problems({"contents": [{"role": "user", "parts": [{"text": "x"}]}], **rest}, model)


def _openai(model: str, body: dict[str, Any]) -> list[Problem]:
    return openai_contract.problems(body, first_party=True, known_extensions=True)


def _compatible(model: str, body: dict[str, Any]) -> list[Problem]:
    return openai_contract.problems(body, first_party=False, known_extensions=True)


# The contract a body on the OpenAI routes is held to, by its model's lab (`served.lab_of`): a Claude
# or Gemini body (rehearsed here with `--provider simulated`) to its own API's, an OpenAI model's
# to OpenAI's own API, any other (a deployment, a compatible server's model) to an
# OpenAI-compatible endpoint's rules, as `prepare` holds it.
_CONTRACTS: dict[str | None, Callable[[str, dict[str, Any]], list[Problem]]] = {
    ANTHROPIC: _claude,
    GOOGLE: _gemini,
    OPENAI: _openai,
}


def _check_contract(model: str, body: dict[str, Any]) -> None:
    """Refuse what the contract the client keeps refuses (the installed SDK's types, and the model
    family's rules: `_CONTRACTS`), so a clean rehearsal means a clean first wave. A compatible
    endpoint's own fields are those it takes of the documented extensions (vLLM's, DashScope's)."""
    found = _CONTRACTS.get(served.lab_of(model, also=False), _compatible)(model, body)
    if found:
        first = found[0]
        message, code = _WORDING.get(first.kind, _WORDING[TYPE])
        raise bad_request(message.format(field=first.field, reason=first.reason), first.field, code)


def count_prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt tokens of a checked body, as `usage` reports them: about 3 tokens of chat framing
    per message."""
    return sum(tokens(_text_of(m.get("content"))) + 3 for m in body["messages"])


def _prompt_hex(head: str, encoded: bytes) -> str:
    """sha256 of `head` + the encoded prompt, as hex."""
    digest = hashlib.sha256(head.encode("utf-8"))
    digest.update(encoded)
    return digest.hexdigest()


def complete(
    body: Any,
    seed: int,
    *,
    key: str,
    truncate: bool = False,
    malformed: bool = False,
    empty: bool = False,
    filtered: bool = False,
    refused: bool = False,
    created: int | None = None,
    sample: str = "",
    prefixes: caching.PrefixCache | None = None,
    new_prefixes: list[bytes] | None = None,
) -> dict[str, Any]:
    """The chat.completion for `body`; `key` makes its ids unique (a custom_id or a call id).

    Its cached tokens are what `prefixes` (the provider's prefix store) holds of its prompt under
    its model's rule (`caching`), and it leaves its own prefixes there (the new ones also in
    `new_prefixes`, for the caller to persist); without a store nothing is cached.

    `truncate` cuts the answer as if `max_tokens` ran out; `malformed` (judge prompts only)
    replaces the answer with one the judges' parsers reject; `empty` answers with empty or null
    content and `finish_reason="stop"`; `filtered` answers the first third of the text with
    `finish_reason="content_filter"`; `refused` answers a `refusal` and null content.
    """
    model, prompt = check_body(body)
    # Three hashes cover the whole prompt (the answer's draws, the envelope's, the id): encode once.
    encoded = prompt.encode("utf-8")
    reply = roles.respond(prompt, seed, sample=sample, encoded=encoded)
    rng = roles.rng_from(f"{seed}|envelope|{key}|", encoded)
    content = reply.content
    reasoning = reply.reasoning
    if malformed and reply.kind in roles.JUDGE_KINDS:
        content, reasoning = roles.malformed_judge(reply.kind, prompt, rng), None

    # About 3 tokens of chat framing per message, as OpenAI counts them.
    prompt_tokens = count_prompt_tokens(body)
    # Judges are reasoning models in the benchmark's defaults: they think before answering.
    reasoning_tokens = rng.randint(80, 600) if reply.kind in roles.JUDGE_KINDS else 0
    completion_tokens = tokens(content) + reasoning_tokens
    # The cache is the providers' documented rule over the requests seen before (`caching`), never a
    # draw; the draw that once decided it stays, so that the envelope's later draws (truncation,
    # empty content) and with them every answer are what they were.
    rng.random()
    cache = caching.Usage()
    if prefixes is not None:
        cache = prefixes.usage(caching.rule_for(served.lab_of(model, also=False), model), model, body, new_prefixes)
    cached = min(cache.read, prompt_tokens)

    finish_reason = "stop"
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(limit, int) and limit > 0 and completion_tokens > limit:
        truncate = True
    if truncate:
        # Cut mid-answer: what a client sees when the output budget runs out.
        keep = max(1, int(len(content) * rng.uniform(0.3, 0.7)))
        content = content[:keep]
        finish_reason = "length"
        spent = limit if isinstance(limit, int) and limit > 0 else tokens(content) + reasoning_tokens
        completion_tokens = spent

    if filtered and not truncate:
        content = content[: max(1, len(content) // 3)]
        finish_reason = "content_filter"
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
    if refused and not truncate and not filtered:
        message.update(content=None, refusal="抱歉，我无法协助处理这个请求。(I'm sorry, I can't help with that.)")
        reasoning = None
    elif empty and not truncate:
        # Both shapes a client meets: an empty string, and null content.
        message["content"] = "" if rng.random() < 0.5 else None
        reasoning = None
    if reasoning:
        message["reasoning_content"] = reasoning
    n = body.get("n", 1)
    n = n if isinstance(n, int) and n > 0 else 1
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens * n,
        "total_tokens": prompt_tokens + completion_tokens * n,
        "prompt_tokens_details": {
            "cached_tokens": cached,
            "audio_tokens": 0,
            # Not an OpenAI field: Anthropic's cache writes, for its routes (`apis.anthropic`).
            **({"cache_write_tokens": cache.written} if cache.written else {}),
        },
        "completion_tokens_details": {
            "reasoning_tokens": reasoning_tokens * n,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    if model.startswith("deepseek"):  # DeepSeek's own fields (https://api-docs.deepseek.com/api/create-chat-completion)
        usage.update(prompt_cache_hit_tokens=cached, prompt_cache_miss_tokens=prompt_tokens - cached)
    return {
        "id": "chatcmpl-" + _prompt_hex(f"{seed}|{key}|", encoded)[:29],
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": [
            {"index": i, "message": dict(message), "logprobs": None, "finish_reason": finish_reason} for i in range(n)
        ],
        "usage": usage,
        "service_tier": "default",
        "system_fingerprint": "fp_lexsim",
    }


def kind_of(body: Any) -> str | None:
    """The simulated role a body's prompt is for, or None when the body is unusable."""
    try:
        return roles.identify_kind(check_body(body)[1])
    except ApiError:
        return None
