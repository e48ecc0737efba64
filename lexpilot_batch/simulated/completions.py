"""`/v1/chat/completions` bodies: a simulated answer wrapped as a realistic chat.completion.

Used by the synchronous routes and by every line of a batch, on every API (the native APIs convert
their requests into chat.completions bodies first). `check_body` keeps what answering needs (a
model, messages with roles); what OpenAI's API and each OpenAI-compatible platform refuse is
`check_openai`'s, which their routes call on every request they are sent (`apis.openai`), by what
the providers publish (`sources`): the official SDK's request type, the model names the SDK lists,
and each platform's own (`profiles.Profile`). The answer comes from `roles`; this module adds the
envelope (ids, `usage` with cached and reasoning tokens, `finish_reason`) and the per-request
content faults: truncation (`finish_reason="length"`, content cut), malformed judge JSON, empty
content, content-filtered answers and refusals. Token counts are estimates (about 1.5 characters
per token, which is roughly right for Chinese), enough for the product's usage bookkeeping.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import TYPE_CHECKING, Any

from lexpilot_batch.simulated import caching, roles
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.sources import names, requests, typed

if TYPE_CHECKING:
    from lexpilot_batch.simulated.profiles import Profile

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
    """The (model, prompt) of a chat.completions body; `ApiError` 400 when it cannot be answered.

    The prompt is the last user message: the benchmark sends each filled template as one.
    """
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.", param=None)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("you must provide a model parameter", "model", "missing_required_parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty array", param="messages", code="missing_required_parameter")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise bad_request(f"Invalid message at messages[{i}]: a role is required.", f"messages[{i}]")
    if body.get("stream"):
        raise bad_request("stream=true is not supported by the simulated provider.", param="stream")
    users = [_text_of(m.get("content")) for m in messages if m.get("role") == "user"]
    prompt = users[-1] if users else "\n".join(_text_of(m.get("content")) for m in messages)
    return model, prompt


def check_openai(body: Any, profile: Profile | None = None) -> None:
    """Refuse what OpenAI's API (`profile` None) or an OpenAI-compatible platform refuses in a chat
    completion, as it answers: a model it does not serve (404 `model_not_found`), a field its request
    type does not take or a value of the wrong type (400, OpenAI's wording), the parameters a
    reasoning model refuses. On OpenAI's own routes an OpenAI model's request is held to the
    `openai` SDK's type whole (OpenAI refuses an unknown field); any other name stands for an
    OpenAI-compatible server of its own make, whose extra fields are its own."""
    model, _ = check_body(body)
    missing = model_problem(model, profile)
    if missing is not None:
        raise ApiError(
            404,
            f"The model `{model}` does not exist or you do not have access to it ({missing}).",
            code="model_not_found",
        )
    _check_parameters(model, body)
    fields = profile.chat_fields() if profile is not None and profile.chat_fields is not None else None
    request_type = requests.openai_chat()
    if fields is not None:  # a platform whose SDK sends its own fields, null when not given (Ark's)
        extra = sorted(set(body) - fields)
        found = [(k, "is not a field of this request") for k in extra]
        known = {k: v for k, v in body.items() if k in fields}
        found += typed.problems(known, request_type, closed=False, nulls=True) if request_type else []
    elif request_type is not None:
        # OpenAI's own models, and the simulator's own but its Claude and Gemini names, on OpenAI's
        # routes: OpenAI refuses a field it does not know. Any other name stands for a compatible
        # server of its own make (`claude-sim` or `gemini-sim` there: a lab's compatibility layer, a
        # rehearsal an earlier version sent through these routes), whose extra fields are its own.
        own = names.is_sim(model) and not (names.CLAUDE.fullmatch(model) or names.GOOGLE.fullmatch(model))
        closed = profile is None and (model in names.openai() or own)
        found = typed.problems(body, request_type, closed=closed)
    else:
        found = []
    ranges = profile.ranges if profile is not None and profile.ranges is not None else requests.OPENAI_DOCUMENTED
    for name, (low, high) in ranges.items():
        value = body.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not low <= value <= high:
            found.append((name, f"must be between {low:g} and {high:g}, not {value!r}"))
    if found:
        field, what = found[0]
        if what == "is not a field of this request":
            raise bad_request(f"Unrecognized request argument supplied: {field}", field, "unknown_parameter")
        raise bad_request(f"Invalid '{field}': {what}.", field, "invalid_value")


def model_problem(model: str, profile: Profile | None = None) -> str | None:
    """Why OpenAI's API (`profile` None), or a platform, does not serve `model`; None when it does.

    A platform that lists its models (`Profile.models`) serves those and the simulator's own. On
    OpenAI's routes, which also stand for the OpenAI-compatible server a bare name's role may point
    at, a name is refused only when it cannot be an OpenAI model and is recognisably another's or a
    slip (`sources.names`): Anthropic's and Google's models, a provider prefix left before an OpenAI
    model, a near miss of one."""
    if not model.strip():
        return "no model name"
    listed = profile.models() if profile is not None and profile.models is not None else None
    several = names.joined(model, listed if listed is not None else names.openai() | names.mistral())
    if several is not None:
        return several
    if names.is_sim(model):
        return None
    if profile is not None:
        listed = profile.models() if profile.models is not None else None
        if listed is None or model in listed:
            return None
        near = names.near_miss(model, listed)
        return f"{profile.name} serves no such model" + (f"; did you mean {near}?" if near else "")
    known = names.openai()
    if model in known:
        return None
    if names.CLAUDE.fullmatch(model) or names.GOOGLE.fullmatch(model):
        return "OpenAI's API serves no Anthropic or Google model"
    bare = names.prefix_left_on(model, known)
    if bare is not None:
        return f"a prefix is left on: send {bare}"
    near = names.near_miss(model, known, same_start=True)
    return f"did you mean {near}?" if near else None


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
        cache = prefixes.usage(caching.rule_for(model), model, body, new_prefixes)
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
