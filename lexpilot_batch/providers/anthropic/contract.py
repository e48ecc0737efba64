"""The contract of Anthropic's Messages (and of a Message Batches request's `params`): what a body
(`{"model", "messages", "max_tokens", ...}`) may hold, checked before a line is written and by the
simulated provider.

- **Fields and types**: the installed `anthropic` SDK's `MessageCreateParamsNonStreaming` (strict:
  an unknown field is refused, as the API answers 400 `invalid_request_error` "Extra inputs are not
  permitted"); without the optional extra, the fields of the public Messages API reference
  (`_FIELDS`). Message roles are the reference's (`user`, `assistant`: a system prompt is the
  `system` field), though the installed SDK also types a `system` role (`_roles`).
- **Disputed fields** (`families`): the installed SDK's types have no `temperature`, `top_p` or
  `top_k`, the public reference documents them (temperature 0-1). The default body carries none;
  one asked for with `--model-arg` is checked against the reference's range, not refused.
- **The model family's rules** (`families`): the output limit (`max_tokens`), whether it takes
  extended thinking and the range of `thinking.budget_tokens` (at least 1,024 and below
  `max_tokens`, per the extended thinking guide), and no temperature but 1 while thinking.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from lexpilot_batch.providers.anthropic.families import ANTHROPIC, family_of
from lexpilot_batch.providers.bodies.families import Family
from lexpilot_batch.providers.bodies.schema import (
    MISSING,
    RANGE,
    TYPE,
    UNKNOWN,
    UNSUPPORTED,
    Problem,
    Validate,
    fields_validator,
    integer_in,
    near_miss,
    number_in,
    typed_dict_keys,
    unknown_fields,
)

# The Messages API reference's request fields (https://docs.anthropic.com/en/api/messages), for an
# installation without the SDK, and the disputed sampling fields with their documented ranges.
_FIELDS = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "cache_control",
        "container",
        "mcp_servers",
        "metadata",
        "service_tier",
        "stop_sequences",
        "stream",
        "system",
        "temperature",
        "thinking",
        "tool_choice",
        "tools",
        "top_k",
        "top_p",
    }
)
_SAMPLING: dict[str, tuple[float, float | None]] = {"temperature": (0, 1), "top_p": (0, 1), "top_k": (0, None)}
_ROLES = ("user", "assistant")
_FALLBACK = Family(ANTHROPIC, "a Claude model", r".*", "Anthropic Messages API reference", temperature=(0, 1))


@lru_cache(maxsize=1)
def _sdk() -> tuple[Validate | None, frozenset[str]]:
    """The installed SDK's check of a body and the fields it knows; (None, the reference's) without it."""
    try:
        from anthropic.types import message_create_params

        tp = message_create_params.MessageCreateParamsNonStreaming
        return fields_validator(tp), typed_dict_keys(tp)
    except (ImportError, AttributeError, TypeError, ValueError):
        return None, _FIELDS


def known_fields() -> frozenset[str]:
    """The body fields Anthropic's Messages take: the installed SDK's, and the disputed ones."""
    return _sdk()[1] | frozenset(_SAMPLING)


def problems(body: Mapping[str, Any]) -> list[Problem]:
    """What Anthropic's contract refuses in a Messages body (module docstring)."""
    validate, known = _sdk()
    model = body.get("model")
    family = family_of(model if isinstance(model, str) else "") or _FALLBACK
    disputed = {k: v for k, v in body.items() if k in _SAMPLING and k not in known}
    checked = {k: v for k, v in body.items() if k not in disputed}
    plain = _plain(body.get("messages"))
    if plain:
        # Text messages are what the SDK's types take for every role (`content: str`): their roles
        # are checked below, without building the SDK's whole content-block union (seconds).
        del checked["messages"]
    found = validate(checked) if validate is not None else [*_missing(checked), *unknown_fields(checked, known)]
    found = [p for p in found if not (plain and p.field == "messages")]
    out: list[Problem] = []
    for problem in found:
        if problem.kind == UNKNOWN and "." not in problem.field:
            guess = near_miss(problem.field, known_fields())
            hint = f"; did you mean {guess}?" if guess else ""
            out.append(Problem(problem.field, f"not a field of Anthropic's Messages{hint}", UNKNOWN))
        else:
            out.append(problem)
    if validate is None or plain:
        out.extend(_roles(body.get("messages")))
    out.extend(_block_problems(body.get("messages")))
    for name, value in disputed.items():
        low, high = _SAMPLING[name]
        if name == "temperature" and family.temperature is not None:
            low, high = family.temperature
        ok = integer_in(value, int(low), None) if name == "top_k" else number_in(value, low, high)
        if value is not None and not ok:
            span = f"at least {low}" if high is None else f"between {low} and {high}"
            out.append(Problem(name, f"must be {span}, not {value!r} (Anthropic Messages API reference)", RANGE))
    if not any(p.field.startswith(("max_tokens", "thinking")) for p in out):
        out.extend(family_problems(body, family))
    return out


def _missing(body: Mapping[str, Any]) -> list[Problem]:
    return [Problem(k, "required, and missing", MISSING) for k in ("model", "messages", "max_tokens") if k not in body]


def _plain(messages: Any) -> bool:
    """Whether every message is `{"role": ..., "content": "text"}`, or its content text blocks as
    request lines lay out a cache breakpoint (`providers.cache_layout`)."""
    return (
        isinstance(messages, list)
        and bool(messages)
        and all(isinstance(m, Mapping) and set(m) == {"role", "content"} and _text(m["content"]) for m in messages)
    )


# `anthropic.types.TextBlockParam` (`text`, `type: "text"`, `cache_control`) and its
# `CacheControlEphemeralParam` (`type: "ephemeral"`, `ttl`: "5m" or "1h"), checked by hand: the
# SDK's whole content-block union takes seconds to build. Anthropic refuses an empty text block.
def _text(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return (
        isinstance(content, list)
        and bool(content)
        and all(
            isinstance(b, Mapping)
            and b.get("type") == "text"
            and isinstance(b.get("text"), str)
            and b["text"] != ""
            and set(b) <= {"type", "text", "cache_control"}
            and ("cache_control" not in b or _ephemeral(b["cache_control"]))
            for b in content
        )
    )


def _block_problems(messages: Any) -> list[Problem]:
    """What the API refuses in text blocks that the SDK's types let through: an empty text, or a
    `cache_control` other than `CacheControlEphemeralParam`'s."""
    out: list[Problem] = []
    for i, m in enumerate(messages if isinstance(messages, list) else ()):
        content = m.get("content") if isinstance(m, Mapping) else None
        for j, b in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(b, Mapping) or b.get("type") != "text":
                continue
            where = f"messages.{i}.content.{j}"
            if b.get("text") == "":
                out.append(Problem(f"{where}.text", "text content blocks must be non-empty", RANGE))
            if b.get("cache_control") is not None and not _ephemeral(b["cache_control"]):
                out.append(
                    Problem(
                        f"{where}.cache_control",
                        'must be {"type": "ephemeral"}, with an optional "ttl" of "5m" or "1h"',
                        TYPE,
                    )
                )
    return out


def _ephemeral(control: Any) -> bool:
    return (
        isinstance(control, Mapping)
        and control.get("type") == "ephemeral"
        and set(control) <= {"type", "ttl"}
        and control.get("ttl", "5m") in ("5m", "1h")
    )


def _roles(messages: Any) -> list[Problem]:
    """The reference's message roles (`user`, `assistant`). The installed SDK's `MessageParam` also
    has a `SystemMessageParam`; the public Messages API reference has no system role in `messages`
    (a system prompt is the `system` field): where the sources disagree the guard keeps the stricter."""
    if not isinstance(messages, list):
        return [Problem("messages", "must be a list of messages", TYPE)]
    return [
        Problem(f"messages.{i}.role", f"must be one of {', '.join(_ROLES)} (a system prompt is the system field)", TYPE)
        for i, m in enumerate(messages)
        if not isinstance(m, Mapping) or m.get("role") not in _ROLES
    ]


def family_problems(body: Mapping[str, Any], family: Family) -> list[Problem]:
    """What a Claude family's rules refuse in a body whose fields have the right types."""
    out: list[Problem] = []
    cite = f" ({family.cited()})"
    limit = body.get("max_tokens")
    if isinstance(limit, int) and not integer_in(limit, 1, family.max_output):
        top = f"at most {family.max_output:,}" if family.max_output else "at least 1"
        out.append(Problem("max_tokens", f"{family.name} takes {top} output tokens, not {limit:,}{cite}", RANGE))
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return out
    if not family.thinks:
        out.append(Problem("thinking", f"{family.name} has no extended thinking{cite}", UNSUPPORTED))
        return out
    budget = thinking.get("budget_tokens")
    low, high = family.thinking_budget or (1_024, None)
    if isinstance(limit, int) and (high is None or limit - 1 < high):
        high = limit - 1  # the budget must be below max_tokens
    if not integer_in(budget, low, high):
        out.append(
            Problem("thinking.budget_tokens", f"must be between {low:,} and {high:,}, not {budget!r}{cite}", RANGE)
        )
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        out.append(
            Problem(
                "temperature",
                f"extended thinking takes no temperature but 1, not {temperature!r}; "
                "add --model-arg MODEL:temperature=null" + cite,
                UNSUPPORTED,
            )
        )
    return out
