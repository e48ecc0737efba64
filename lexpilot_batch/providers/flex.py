"""Flex tiers: synchronous calls at batch prices, for the models whose provider offers them.

- OpenAI's Flex processing: `service_tier: "flex"` on Chat Completions (and Responses), "priced at
  Batch API rates", slower answers, and "429 Resource Unavailable" when capacity is short, for which
  "you will not be charged"; the guide raises the SDK's timeout to 15 minutes (900 s). Models: the
  ones its pricing page lists under Flex (https://platform.openai.com/docs/guides/flex-processing,
  https://platform.openai.com/docs/pricing?latest-pricing=flex). The SDK declares the field:
  `openai.types.chat.completion_create_params.CompletionCreateParamsBase.service_tier`
  (`Literal["auto", "default", "flex", "scale", "priority"]`).
- Azure OpenAI's Flex processing (preview) takes the same field on Global Standard deployments of
  supported models, and answers 400 for others rather than falling back
  (https://learn.microsoft.com/azure/foundry/openai/how-to/flex-processing). A deployment's name does
  not tell its model, so Azure is never assumed: `--flex MODEL=on` turns it on.
- Gemini's Flex inference: `serviceTier: "flex"` in the generateContent request body, "50% cost
  reduction", "best-effort availability", a target latency of 1 to 15 minutes
  (https://ai.google.dev/gemini-api/docs/flex-inference, https://ai.google.dev/gemini-api/docs/optimization).
- Anthropic has no flex tier (its `service_tier` chooses priority capacity, at list price or more):
  its models never travel flex.

`FLEX_MODELS` is the one table of which models take flex; `--flex MODEL=on|off` (a workspace
remembers it; `*` for every model whose API has a flex tier) overrides it either way. A rehearsal
judges a model as its real run would; the simulated provider's own models (`sim-eval`, `gpt-sim`)
always take flex, which its chat completions and generateContent routes speak (`simulated.chat`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.apis import GOOGLE, OPENAI, SIMULATED
from lexpilot_batch.providers.endpoints import DEFAULT_BASE_URL
from lexpilot_batch.providers.registry import parse_model
from lexpilot_batch.providers.routes import Route
from lexpilot_batch.providers.served import is_simulator_name

TIER = "flex"
# The APIs with a flex tier, and the request field that asks for it: OpenAI's Chat Completions
# `service_tier`, and the generateContent request's `serviceTier` (its REST name: the `google-genai`
# SDK sends `GenerateContentConfig.service_tier` so, `models._GenerateContentConfig_to_mldev`, and the
# request contract knows no other, `google.contract`).
TIER_FIELD: dict[str, str] = {OPENAI: "service_tier", GOOGLE: "serviceTier"}
ANY = "*"  # `--flex '*=off'`: every model without a flag of its own
# OpenAI's guide: "increase default timeout to 15 minutes"; Gemini's targets 1 to 15 minutes too.
TIMEOUT = 900.0

# (API shape, model names as sent, source). A model is flex-capable when its provider's own
# endpoint serves it and its name matches; the sources list the models at the time of writing.
FLEX_MODELS: tuple[tuple[str, str, str], ...] = (
    (
        OPENAI,
        r"(gpt-5(\.\d+)?(-mini|-nano)?|o3|o4-mini)(-\d{4}-\d{2}-\d{2})?",
        "platform.openai.com/docs/pricing (Flex)",
    ),
    (GOOGLE, r"gemini-(3|3\.\d+)-[a-z0-9.-]+", "ai.google.dev/gemini-api/docs/flex-inference"),
)


def parse_flex_flags(flags: list[str] | None) -> dict[str, bool]:
    """`--flex MODEL=on|off` (repeatable) as {model: on}; a `ConfigError` for anything else."""
    out: dict[str, bool] = {}
    for flag in flags or []:
        model, sep, value = flag.partition("=")
        if not sep or not model.strip() or value.strip().lower() not in ("on", "off"):
            raise ConfigError(f"--flex {flag!r} must be MODEL=on or MODEL=off (e.g. --flex openai/o4-mini=on)")
        out[model.strip()] = value.strip().lower() == "on"
    return out


# The providers (`registry` keys) whose endpoints have a flex tier this package sends to: OpenAI's,
# Azure OpenAI's (only when forced: a deployment's name does not tell its model) and Gemini's; and,
# when forced, an endpoint of your own (`openai-api/NAME/...`, or a bare name at OPENAI_BASE_URL),
# which may be a gateway to one of them. The other platforms speak OpenAI's request shape but
# document no flex tier.
FLEX_PROVIDERS = frozenset({"openai", "azure", "google"})
_OWN_ENDPOINT = "openai-api/"


def _has_tier(route: Route) -> bool:
    if route.api not in TIER_FIELD:
        return False
    return route.provider is None or route.provider in FLEX_PROVIDERS or route.provider.startswith(_OWN_ENDPOINT)


def takes_flex(route: Route, forced: Mapping[str, bool] | None = None) -> bool:
    """Whether requests of this route may travel on the flex tier: never where there is none (an
    API without one: Anthropic's, Mistral's, Together's; a provider without one among those that
    speak OpenAI's API: DashScope's, Groq's...): `--flex MODEL=on` for such a model is refused, `*=on`
    passes it by. Then `--flex MODEL=on|off`; then `FLEX_MODELS` for the provider's own endpoint,
    as a rehearsal (`--provider simulated`) judges it too. The simulated provider's own models
    (`served.is_simulator_name`: `sim-eval`, `gpt-sim`) always take it; a bare name is otherwise
    judged as its real run would be, at an OpenAI-compatible endpoint: only when forced."""
    if not _has_tier(route):
        if forced and forced.get(route.model):
            where = f"the {route.api} API" if route.api not in TIER_FIELD else f"{route.provider}/"
            raise ConfigError(
                f"--flex {route.model}=on: {route.model} is sent to {where}, which has no flex tier "
                f"(flex goes to {', '.join(sorted(p + '/' for p in FLEX_PROVIDERS))} models, and to an endpoint of "
                f"your own when forced); "
                f"leave the flag out (a workspace that remembers it from an earlier command: --flex {route.model}=off)"
            )
        return False
    if forced and (route.model in forced or ANY in forced):
        return forced.get(route.model, forced.get(ANY, False))
    if route.provider is None:
        return route.backend == SIMULATED and is_simulator_name(route.model)
    if route.api == OPENAI and not _first_party(route):
        return False  # Azure: only when forced
    sent = parse_model(route.model).sent
    return any(api == route.api and re.fullmatch(pattern, sent) for api, pattern, _ in FLEX_MODELS)


def _first_party(route: Route) -> bool:
    """Whether an OpenAI-shaped route is OpenAI's own endpoint, or the rehearsal of an `openai/` model."""
    if route.backend == SIMULATED:
        return route.provider == "openai"
    return route.endpoint.base_url.rstrip("/") == DEFAULT_BASE_URL


def tier_fields(api: str) -> dict[str, Any]:
    """What a flex call adds to a request line's body: its API's documented field (`TIER_FIELD`)."""
    if api not in TIER_FIELD:
        raise ConfigError(f"the {api} API has no flex tier")
    return {TIER_FIELD[api]: TIER}
