"""The conformance guard: every request body checked against the contract of the API it goes to,
before anything is compiled, and by the simulated provider on every line it is sent.

Each API's folder holds its contract (`openai.contract`, `anthropic.contract`, `google.contract`,
`mistral.contract`): the installed official SDK's request types where the SDK is there, a small
cited schema where it is not, and the model families' rules (`bodies.families`). A provider
declares which one its requests keep (`spec.Provider`): its API's (`spec.ApiSpec.contract`), in
OpenAI's two strictnesses (`first_party`: OpenAI's own API and Azure's, unknown fields refused and
the model families' rules applied; any other OpenAI-compatible endpoint, whose unknown fields are
its own extensions, only misspellings of OpenAI's refused), or a contract of its own (the
OpenAI-compatible platforms' dialects, `openai.platforms`). This module only chooses, and says a
refusal as the user should read it. Whether the API serves the model at all is
`bodies.model_names`'s rule.

A request's lines differ only in their custom_id, the text of their one user message, which our
prompts fill, and how that text is laid out for the provider's prompt cache (`cache_layout`:
OpenAI's `prompt_cache_key`, Anthropic's text blocks with `cache_control`): so checking a role's
body once, with the run's fields and a placeholder message, checks every field the role will send;
the layouts are checked on every line by the simulated provider and by the tests that compile every
task and check every line against the SDKs' types.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.bodies import model_names
from lexpilot_batch.providers.bodies.schema import TYPE, UNKNOWN, Problem
from lexpilot_batch.providers.prefixes import ModelName
from lexpilot_batch.providers.registry import BARE, PROVIDERS, api_spec
from lexpilot_batch.providers.spec import COMPATIBLE, Provider
from lexpilot_batch.util.text import ended


def _provider(prefix: str | None) -> Provider | None:
    return PROVIDERS.get(prefix) if prefix is not None else None


def body_problems(
    api: str, model: str, body: Mapping[str, Any], *, prefix: str | None = None, reasoning: bool | None = None
) -> list[Problem]:
    """What the contract of `api` (as provider `prefix` keeps it; None: a bare name) refuses in a
    request body. For OpenAI and Anthropic `body` holds `model`; for Gemini it does not (the batch's
    create call names the model)."""
    provider = _provider(prefix)
    first_party = provider is not None and provider.first_party
    if provider is not None and provider.contract is not None:
        return provider.contract(model, body, first_party, reasoning)
    return api_spec(api).contract(model, body, first_party, reasoning)


def line_problems(
    api: str, line: Mapping[str, Any], *, model: str = "", prefix: str | None = None, reasoning: bool | None = None
) -> list[Problem]:
    """What the contract refuses in one batch input line of `api`'s shape (`providers.lines`)."""
    shape = api_spec(api).lines
    out = _id_problems(line, shape.id_key, shape.id_pattern)
    request = line.get(shape.body_key)
    if shape.method_url:  # OpenAI's: the line's own fields, then where it is sent
        out += _extra(line, shape.keys)
        if line.get("method") != "POST":
            out.append(Problem("method", f"must be POST, not {line.get('method')!r}", TYPE))
        if line.get("url") not in shape.urls:
            out.append(Problem("url", f"must be one of {', '.join(sorted(shape.urls))}, not {line.get('url')!r}", TYPE))
        if not isinstance(request, Mapping):
            return [*out, Problem(shape.body_key, "must be a JSON object", TYPE)]
    else:
        if not isinstance(request, Mapping):
            return [*out, Problem(shape.body_key, "must be a JSON object", TYPE)]
        out += _extra(line, shape.keys)
    found = body_problems(api, model, request, prefix=prefix, reasoning=reasoning)
    return out + [_under(shape.body_key, p) for p in found]


def _id_problems(line: Mapping[str, Any], key: str, pattern: re.Pattern[str] | None) -> list[Problem]:
    value = line.get(key)
    if not isinstance(value, str) or not value:
        return [Problem(key, "required: a non-empty string", TYPE)]
    if pattern is not None and not pattern.fullmatch(value):
        return [Problem(key, f"must match ^{pattern.pattern}$", TYPE)]
    return []


def _extra(line: Mapping[str, Any], keys: frozenset[str]) -> list[Problem]:
    return [Problem(k, "not a field of a batch input line", UNKNOWN) for k in line if k not in keys]


def _under(where: str, problem: Problem) -> Problem:
    return Problem(f"{where}.{problem.field}", problem.reason, problem.kind)


def sample_body(api: str, model: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A role's body as every line of it is sent, with a placeholder message (module docstring)."""
    return api_spec(api).sample_body(model, fields)


def model_route(api: str, prefix: str | None) -> str:
    """The kind of route (`bodies.model_names`) a provider's model names are checked for: its API's
    own (a provider that declares so: OpenAI's `openai/`, the native APIs), or any other endpoint's,
    whose model list is its own (an Azure deployment is named by its owner)."""
    provider = _provider(prefix)
    return provider.names if provider is not None else COMPATIBLE


def check_role_body(
    role: str,
    name: ModelName,
    fields: Mapping[str, Any],
    *,
    reasoning: bool | None = None,
    option: str = "--model-arg",
    allowed: frozenset[str] = frozenset(),
) -> None:
    """Refuse, before anything is registered or compiled, a model its provider does not serve
    (`bodies.model_names`: its API's rules, then its catalogue, unless `allowed` names it:
    `--allow-model`) or a role's body its API's contract refuses: one `ConfigError` naming the
    model, the role, each field and why."""
    api = name.provider.api if name.provider is not None else BARE.name
    prefix = name.provider.prefix if name.provider is not None else None
    missing = model_names.model_problem(model_route(api, prefix), name.sent)
    if missing is not None:
        raise ConfigError(
            f"{name.name} ({role} role): the model {name.sent!r} is refused: {ended(missing)} Nothing was compiled; "
            "check the model's name (--model, --user-model, --judge-model or the model list)"
        )
    unlisted = model_names.catalogue_problem(name.provider, name.sent) if name.provider is not None else None
    if unlisted is not None and name.name not in allowed:
        raise ConfigError(
            f"{name.name} ({role} role): the model {name.sent!r} is refused: {unlisted}. Nothing was compiled; "
            f"check the model's name, or, for a model newer than the catalogue, pass --allow-model {name.name} "
            "(after checking it against the provider's live model listing: lexpilot-batch preflight)"
        )
    found = body_problems(api, name.sent, sample_body(api, name.sent, fields), prefix=prefix, reasoning=reasoning)
    if not found:
        return
    shown = "; ".join(str(p) for p in found[:5]) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
    raise ConfigError(
        f"{name.name} ({role} role): the request body is refused by its API's contract: {ended(shown)} Nothing was "
        f"compiled; change the option that set it ({option} {name.name}:FIELD=VALUE, or =null to remove a field)"
    )
