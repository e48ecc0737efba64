"""The conformance guard: every request body checked against the contract of the API it goes to,
before anything is compiled, and by the simulated provider on every line it is sent.

Each API's folder holds its contract (`openai.contract`, `anthropic.contract`,
`google.contract`): the installed official SDK's request types where the SDK is there, a small
cited schema where it is not, and the model families' rules (`families`). This module only
chooses which one a provider's requests keep, and says a refusal as the user should read it.

Which contract a provider keeps: its API shape's, with OpenAI's in two strictnesses: OpenAI's own
API and Azure's (`FIRST_PARTY`: unknown fields refused, the model families' rules applied), any
other OpenAI-compatible endpoint (unknown fields are its own extensions, only misspellings of
OpenAI's refused). A provider with a contract of its own has a row in `OWN`, keyed by its prefix:
Mistral's, and the OpenAI-compatible platforms' dialects. Whether the API serves the model at all
is `served`'s rule.

A request's lines differ only in their custom_id, the text of their one user message, which our
prompts fill, and how that text is laid out for the provider's prompt cache (`providers.prefixes`:
OpenAI's `prompt_cache_key`, Anthropic's text blocks with `cache_control`): so checking a role's
body once, with the run's fields and a placeholder message, checks every field the role will send;
the layouts are checked on every line by the simulated provider and by the tests that compile every
task and check every line against the SDKs' types.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers import served
from lexpilot_batch.providers.anthropic import contract as anthropic_contract
from lexpilot_batch.providers.apis import ANTHROPIC, GOOGLE, MISTRAL, OPENAI
from lexpilot_batch.providers.google import contract as google_contract
from lexpilot_batch.providers.mistral import contract as mistral_contract
from lexpilot_batch.providers.openai import contract as openai_contract
from lexpilot_batch.providers.openai import platforms
from lexpilot_batch.providers.registry import ModelName
from lexpilot_batch.providers.schema import TYPE, UNKNOWN, Problem

FIRST_PARTY = frozenset({"openai", "azure"})
# Contracts of providers that keep one of their own: prefix -> check of (model, body). Mistral's
# (`mistral.contract`: its SDK's types, else its reference's fields), and the OpenAI-compatible
# platforms' dialects (`openai.platforms`: thinking switches, token and sampling ranges, Groq's
# closed field list), each rule citing its page.
OWN: dict[str, Callable[[str, Mapping[str, Any]], list[Problem]]] = {
    "mistral": mistral_contract.problems,
    **{prefix: partial(platforms.problems, prefix) for prefix in platforms.PLATFORMS},
}

# The urls an OpenAI batch line may name: OpenAI's, Azure's v1 API's (Azure OpenAI "Global Batch"
# how-to: `"url": "/chat/completions"`; the dated API versions' `/v1/chat/completions`), Zhipu
# BigModel's `/v4/...` and Baidu Qianfan's `/v2/...` (their batch documentation).
CHAT_URLS = frozenset({"/v1/chat/completions", "/chat/completions", "/v4/chat/completions", "/v2/chat/completions"})
# Anthropic Message Batches: a request's custom_id (`batch_create_params.Request`, API reference).
ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
PLACEHOLDER = "x"  # the text of the one user message a role's body is checked with


def body_problems(
    api: str, model: str, body: Mapping[str, Any], *, prefix: str | None = None, reasoning: bool | None = None
) -> list[Problem]:
    """What the contract of `api` (as provider `prefix` keeps it; None: a bare name) refuses in a
    request body. For OpenAI and Anthropic `body` holds `model`; for Gemini it does not (the batch's
    create call names the model)."""
    if prefix in OWN:
        return OWN[prefix](model, body)
    if api == ANTHROPIC:
        return anthropic_contract.problems(body)
    if api == GOOGLE:
        return google_contract.problems(body, model)
    return openai_contract.problems(body, first_party=prefix in FIRST_PARTY, reasoning=reasoning)


def line_problems(
    api: str, line: Mapping[str, Any], *, model: str = "", prefix: str | None = None, reasoning: bool | None = None
) -> list[Problem]:
    """What the contract refuses in one batch input line of `api`'s shape (`providers.lines`)."""
    if api == ANTHROPIC:
        out = _id_problems(line, "custom_id", ANTHROPIC_ID)
        params = line.get("params")
        if not isinstance(params, Mapping):
            return [*out, Problem("params", "must be a JSON object", TYPE)]
        out += _extra(line, {"custom_id", "params"})
        return out + [_under("params", p) for p in body_problems(api, model, params, prefix=prefix)]
    if api == GOOGLE:
        out = _id_problems(line, "key", None)
        request = line.get("request")
        if not isinstance(request, Mapping):
            return [*out, Problem("request", "must be a JSON object", TYPE)]
        out += _extra(line, {"key", "request", "metadata"})
        return out + [_under("request", p) for p in body_problems(api, model, request, prefix=prefix)]
    if api == MISTRAL:  # `{"custom_id", "body"}`: the job names endpoint and model (`mistral.lines`)
        out = _id_problems(line, "custom_id", None) + _extra(line, {"custom_id", "body"})
        body = line.get("body")
        if not isinstance(body, Mapping):
            return [*out, Problem("body", "must be a JSON object", TYPE)]
        return out + [_under("body", p) for p in body_problems(api, model, body, prefix=prefix or "mistral")]
    out = _id_problems(line, "custom_id", None) + _extra(line, {"custom_id", "method", "url", "body"})
    if line.get("method") != "POST":
        out.append(Problem("method", f"must be POST, not {line.get('method')!r}", TYPE))
    if line.get("url") not in CHAT_URLS:
        out.append(Problem("url", f"must be one of {', '.join(sorted(CHAT_URLS))}, not {line.get('url')!r}", TYPE))
    body = line.get("body")
    if not isinstance(body, Mapping):
        return [*out, Problem("body", "must be a JSON object", TYPE)]
    return out + [_under("body", p) for p in body_problems(api, model, body, prefix=prefix, reasoning=reasoning)]


def _id_problems(line: Mapping[str, Any], key: str, pattern: re.Pattern[str] | None) -> list[Problem]:
    value = line.get(key)
    if not isinstance(value, str) or not value:
        return [Problem(key, "required: a non-empty string", TYPE)]
    if pattern is not None and not pattern.fullmatch(value):
        return [Problem(key, f"must match ^{pattern.pattern}$", TYPE)]
    return []


def _extra(line: Mapping[str, Any], keys: set[str]) -> list[Problem]:
    return [Problem(k, "not a field of a batch input line", UNKNOWN) for k in line if k not in keys]


def _under(where: str, problem: Problem) -> Problem:
    return Problem(f"{where}.{problem.field}", problem.reason, problem.kind)


def sample_body(api: str, model: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A role's body as every line of it is sent, with a placeholder message (module docstring)."""
    if api == GOOGLE:
        return {"contents": [{"role": "user", "parts": [{"text": PLACEHOLDER}]}], **fields}
    return {"model": model, "messages": [{"role": "user", "content": PLACEHOLDER}], **fields}


def model_route(api: str, prefix: str | None) -> str:
    """The kind of route (`served`) a provider's model names are checked for: its API's own for
    OpenAI (`openai/`) and the native APIs; any other endpoint's model list is its own (an Azure
    deployment is named by its owner)."""
    if api in (ANTHROPIC, GOOGLE, MISTRAL) or (api == OPENAI and prefix == "openai"):
        return api
    return served.COMPATIBLE


def check_role_body(
    role: str, name: ModelName, fields: Mapping[str, Any], *, reasoning: bool | None = None, option: str = "--model-arg"
) -> None:
    """Refuse, before anything is registered or compiled, a model its API does not serve
    (`served`) or a role's body its API's contract refuses: one `ConfigError` naming the model,
    the role, each field and why."""
    api = name.provider.api if name.provider is not None else OPENAI
    prefix = name.provider.prefix if name.provider is not None else None
    missing = served.model_problem(model_route(api, prefix), name.sent)
    if missing is not None:
        raise ConfigError(
            f"{name.name} ({role} role): the model {name.sent!r} is refused: {missing}. Nothing was compiled; "
            "check the model's name (--model, --user-model, --judge-model or the model list)"
        )
    found = body_problems(api, name.sent, sample_body(api, name.sent, fields), prefix=prefix, reasoning=reasoning)
    if not found:
        return
    shown = "; ".join(str(p) for p in found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
    raise ConfigError(
        f"{name.name} ({role} role): the request body is refused by its API's contract: {shown}. Nothing was "
        f"compiled; change the option that set it ({option} {name.name}:FIELD=VALUE, or =null to remove a field)"
    )
