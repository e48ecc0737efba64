"""The contract of OpenAI's Chat Completions: what a request body (`{"model", "messages", ...}`) may
hold, checked before a line is written and by the simulated provider.

Two strictnesses:

- **OpenAI's own API** (`openai/`, `azure/`): the body must be a `CompletionCreateParamsNonStreaming`
  of the installed `openai` SDK (an unknown field is refused, as OpenAI answers 400 "Unrecognized
  request argument"), and keep its model family's rules (`families`: reasoning models take no
  `max_tokens`, no temperature or top_p but 1, and only their `reasoning_effort` values; output
  token limits; temperature and top_p ranges).
- **An OpenAI-compatible endpoint** (bare names, `openai-api/<service>/`, DashScope, DeepSeek):
  the fields OpenAI knows must have its types and ranges; a field OpenAI does not know is the
  endpoint's own extension (vLLM's `top_k`, DashScope's `enable_thinking`: such servers take
  them) unless it is a misspelling of one OpenAI knows (`temprature`), which is refused.

The SDK is a dependency of the product, so its types are always there; should a version of it lack
the request type, the fields of openai-openapi's `CreateChatCompletionRequest` stand in (`_FIELDS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from lexpilot_batch.providers.bodies.families import Family
from lexpilot_batch.providers.bodies.schema import (
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
from lexpilot_batch.providers.openai.families import COMPATIBLE, OPENAI_CHAT, OPENAI_THINKING, family_of

# openai-openapi `CreateChatCompletionRequest` (and the SDK's `CompletionCreateParamsBase`): the
# fields a body may hold, for an SDK without the type, and for telling a misspelling.
_FIELDS = frozenset(
    {
        "messages",
        "model",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)
_LIMITS = ("max_completion_tokens", "max_tokens")
# Extensions OpenAI-compatible servers document beyond OpenAI's fields, which a misspelling check
# must not take for one of OpenAI's (`top_k` is one letter from `top_p`): vLLM's extra sampling
# parameters (vLLM docs, "OpenAI-Compatible Server: Extra parameters"), DashScope's and DeepSeek's
# thinking switches (their compatible-mode references).
EXTENSIONS = frozenset(
    {
        "top_k",
        "min_p",
        "min_tokens",
        "repetition_penalty",
        "length_penalty",
        "best_of",
        "use_beam_search",
        "stop_token_ids",
        "ignore_eos",
        "skip_special_tokens",
        "include_stop_str_in_output",
        "chat_template_kwargs",
        "guided_json",
        "guided_regex",
        "guided_choice",
        "enable_thinking",
        "thinking_budget",
        "enable_search",
        "thinking",
    }
)


@lru_cache(maxsize=1)
def _sdk() -> tuple[Validate | None, frozenset[str]]:
    """The installed SDK's check of a body and the fields it knows; (None, the spec's) without it."""
    try:
        from openai.types.chat import completion_create_params

        tp = completion_create_params.CompletionCreateParamsNonStreaming
        return fields_validator(tp), typed_dict_keys(tp)
    except (ImportError, AttributeError, TypeError, ValueError):  # an SDK without the type: the spec's fields
        return None, _FIELDS


def known_fields() -> frozenset[str]:
    """The body fields OpenAI's Chat Completions take (the installed SDK's)."""
    return _sdk()[1]


def problems(
    body: Mapping[str, Any], *, first_party: bool, reasoning: bool | None = None, known_extensions: bool = False
) -> list[Problem]:
    """What OpenAI's contract refuses in a chat-completions body (module docstring). `first_party`:
    OpenAI's own API (or Azure's); `reasoning` overrides what the model's name says;
    `known_extensions`: of a compatible endpoint's own fields only the documented `EXTENSIONS`
    are taken (the simulated provider, whose own fields those are)."""
    validate, known = _sdk()
    found = validate(dict(body)) if validate is not None else unknown_fields(body, known)
    out: list[Problem] = []
    for problem in found:
        if problem.kind == UNKNOWN:
            top = "." not in problem.field
            if not first_party and top and problem.field in EXTENSIONS:
                continue  # a documented extension of compatible servers
            guess = near_miss(problem.field, known) if top else None
            if not first_party and guess is None and top and not known_extensions:
                continue  # an extension of the endpoint's own
            hint = f"; did you mean {guess}?" if guess else ""
            where = "OpenAI's Chat Completions" if first_party else "the OpenAI API"
            out.append(Problem(problem.field, f"not a field of {where}{hint}", UNKNOWN))
        else:
            out.append(problem)
    model = body.get("model")
    family = rules_for(model if isinstance(model, str) else "", first_party=first_party, reasoning=reasoning)
    out.extend(family_problems(body, family))
    return out


def rules_for(model: str, *, first_party: bool, reasoning: bool | None = None) -> Family:
    """The family whose rules a model's requests keep (`families`)."""
    if not first_party:
        return COMPATIBLE
    family = family_of(model)
    if reasoning is True and (family is None or not family.reasoning):
        return OPENAI_THINKING
    if reasoning is False and family is not None and family.reasoning:
        return OPENAI_CHAT
    return family or OPENAI_CHAT


def family_problems(body: Mapping[str, Any], family: Family) -> list[Problem]:
    """What a model family's rules refuse in a body (its fields already of the right types)."""
    out: list[Problem] = []
    cite = f" ({family.cited()})"
    model = body.get("model")
    if not family.chat:
        return [Problem("model", f"{model} is not a chat model{cite}", UNSUPPORTED)]
    if family.reasoning:
        if "max_tokens" in body:
            out.append(
                Problem("max_tokens", f"{family.name} takes max_completion_tokens, not max_tokens{cite}", UNSUPPORTED)
            )
        for name in ("temperature", "top_p"):
            value = body.get(name)
            if value is not None and value != 1:
                out.append(
                    Problem(name, f"{family.name} takes no {name} but the default 1, not {value!r}{cite}", UNSUPPORTED)
                )
    else:
        for name, allowed in (("temperature", family.temperature), ("top_p", family.top_p)):
            value = body.get(name)
            if allowed is not None and value is not None and not number_in(value, *allowed):
                out.append(Problem(name, f"must be between {allowed[0]} and {allowed[1]}, not {value!r}{cite}", RANGE))
    effort = body.get("reasoning_effort")
    if effort is not None and family.efforts is not None:
        if not family.efforts:
            what = "not a reasoning model" if not family.reasoning else "a reasoning model without the setting"
            out.append(Problem("reasoning_effort", f"{model} ({what}) takes no reasoning_effort{cite}", UNSUPPORTED))
        elif effort not in family.efforts:
            takes = ", ".join(family.efforts)
            out.append(Problem("reasoning_effort", f"{family.name} takes {takes}; not {effort!r}{cite}", RANGE))
    n = body.get("n")
    if n is not None and not integer_in(n, 1, 128):
        out.append(Problem("n", f"must be an integer between 1 and 128, not {n!r} (openai-openapi)", RANGE))
    for name in _LIMITS:
        value = body.get(name)
        if value is None:
            continue
        if not integer_in(value, 1, None):
            out.append(Problem(name, f"must be a whole number of tokens of at least 1, not {value!r}", TYPE))
        elif family.max_output is not None and value > family.max_output:
            out.append(
                Problem(name, f"{family.name} writes at most {family.max_output:,} tokens, not {value:,}{cite}", RANGE)
            )
    return out
