"""The contract of Mistral's chat completions (the `body` of a Mistral batch line, and the sync
backend's request): what a body (`{"model", "messages", ...}`) may hold, checked before a line is
written.

- **Fields and types**: the `mistralai` SDK's `ChatCompletionRequestTypedDict` where the SDK is
  installed (strict, closed: Mistral answers a field it does not know with 422 `extra_forbidden`
  "Extra inputs are not permitted", e.g. OpenAI's `max_completion_tokens` and `store`, as users
  of OpenAI-shaped clients have met: Gitlawb/openclaude issue 739); without it, the fields of the
  same request in Mistral's API reference (`_FIELDS`, https://docs.mistral.ai/api, "Chat
  Completion"), unknown ones refused.
- **Ranges**: `top_p` is a probability mass (0 to 1); `temperature` at least 0 (the reference
  recommends 0 to 0.7 and documents no maximum); `max_tokens` and `n` at least 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from lexpilot_batch.providers.bodies.schema import (
    MISSING,
    RANGE,
    UNKNOWN,
    Problem,
    Validate,
    fields_validator,
    integer_in,
    near_miss,
    number_in,
)

SOURCE = "Mistral chat completion reference; the mistralai SDK's ChatCompletionRequest"
# The request fields of Mistral's chat completion (the mistralai SDK 3.7's `ChatCompletionRequest`).
_FIELDS = frozenset(
    {
        "model",
        "messages",
        "temperature",
        "top_p",
        "max_tokens",
        "stream",
        "stop",
        "random_seed",
        "metadata",
        "response_format",
        "tools",
        "tool_choice",
        "presence_penalty",
        "frequency_penalty",
        "min_tokens",
        "repetition_penalty",
        "top_k",
        "logprobs",
        "top_logprobs",
        "prompt_logprobs",
        "top_prompt_logprobs",
        "n",
        "prediction",
        "parallel_tool_calls",
        "reasoning_effort",
        "prompt_mode",
        "guardrails",
        "prompt_cache_key",
        "service_tier",
        "safe_prompt",
    }
)
_RANGES: dict[str, tuple[float | None, float | None]] = {"temperature": (0, None), "top_p": (0, 1)}


@lru_cache(maxsize=1)
def _sdk() -> tuple[Validate | None, frozenset[str]]:
    """The installed SDK's check of a body and the fields it knows; (None, the reference's) without it."""
    try:
        from mistralai.client.models import chatcompletionrequest

        tp = chatcompletionrequest.ChatCompletionRequestTypedDict
        return fields_validator(tp), frozenset(tp.__required_keys__ | tp.__optional_keys__)
    except (ImportError, AttributeError, TypeError, ValueError):
        return None, _FIELDS


def problems(model: str, body: Mapping[str, Any]) -> list[Problem]:
    """What Mistral's contract refuses in a chat-completions body (module docstring)."""
    validate, known = _sdk()
    if validate is not None:
        found = validate(dict(body))
    else:
        found = [Problem(k, "required, and missing", MISSING) for k in ("model", "messages") if k not in body]
        found += [Problem(k, "not a field this API takes", UNKNOWN) for k in body if k not in known]
    out: list[Problem] = []
    for problem in found:
        if problem.kind == UNKNOWN and "." not in problem.field:
            guess = near_miss(problem.field, known)
            hint = f"; did you mean {guess}?" if guess else ""
            out.append(Problem(problem.field, f"not a field of Mistral's chat completions{hint} ({SOURCE})", UNKNOWN))
        else:
            out.append(problem)
    if any(p.field in _RANGES or p.field in ("max_tokens", "n") for p in out):
        return out
    for name, (low, high) in _RANGES.items():
        value = body.get(name)
        if value is not None and not number_in(value, low, high):
            span = f"between {low} and {high}" if high is not None else f"at least {low}"
            out.append(Problem(name, f"must be {span}, not {value!r} ({SOURCE})", RANGE))
    for name in ("max_tokens", "n"):
        value = body.get(name)
        if value is not None and not integer_in(value, 1, None):
            out.append(Problem(name, f"must be a whole number of at least 1, not {value!r} ({SOURCE})", RANGE))
    return out
