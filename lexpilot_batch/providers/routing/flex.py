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

Each API declares its tier (`spec.ApiSpec.flex`: the request field, and the models its provider
lists as taking it), and each provider whether its endpoint has one (`spec.Provider.flex`: OpenAI's
for the listed models at its own endpoint, Gemini's for the listed models, Azure's and an endpoint
of your own only when forced, none for the others). `--flex MODEL=on|off` (a workspace remembers
it; `*` for every model whose API has a flex tier) overrides them either way. A rehearsal judges a
model as its real run would; the simulated provider's own models (`sim-eval`, `gpt-sim`) always
take flex, which its chat completions and generateContent routes speak (`simulated.chat`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import SIMULATED
from lexpilot_batch.providers.bodies.model_names import is_simulator_name
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.registry import PROVIDERS, api_spec
from lexpilot_batch.providers.routing.routes import Route
from lexpilot_batch.providers.spec import FORCED, HOME, NO_FLEX

TIER = "flex"
ANY = "*"  # `--flex '*=off'`: every model without a flag of its own
# OpenAI's guide: "increase default timeout to 15 minutes"; Gemini's targets 1 to 15 minutes too.
TIMEOUT = 900.0


def parse_flex_flags(flags: list[str] | None) -> dict[str, bool]:
    """`--flex MODEL=on|off` (repeatable) as {model: on}; a `ConfigError` for anything else."""
    out: dict[str, bool] = {}
    for flag in flags or []:
        model, sep, value = flag.partition("=")
        if not sep or not model.strip() or value.strip().lower() not in ("on", "off"):
            raise ConfigError(f"--flex {flag!r} must be MODEL=on or MODEL=off (e.g. --flex openai/o4-mini=on)")
        out[model.strip()] = value.strip().lower() == "on"
    return out


def _has_tier(route: Route) -> bool:
    if api_spec(route.api).flex is None:
        return False
    if route.provider is None:
        return True  # a bare name, at an endpoint of the user's (only when forced)
    return _provider(route).flex != NO_FLEX


def _provider(route: Route) -> Any:
    return PROVIDERS[(route.provider or "").partition("/")[0]]


def _tiered() -> str:
    """The prefixes whose models may travel flex, as a refusal lists them."""
    return ", ".join(sorted(p.prefix + "/" for p in PROVIDERS.values() if p.flex != NO_FLEX and not p.generic))


def takes_flex(route: Route, forced: Mapping[str, bool] | None = None) -> bool:
    """Whether requests of this route may travel on the flex tier: never where there is none (an
    API without one: Anthropic's, Mistral's, Together's; a provider without one among those that
    speak OpenAI's API: DashScope's, Groq's...): `--flex MODEL=on` for such a model is refused, `*=on`
    passes it by. Then `--flex MODEL=on|off`; then the models its API lists (`spec.FlexTier`) at the provider's own endpoint,
    as a rehearsal (`--provider simulated`) judges it too. The simulated provider's own models
    (`bodies.model_names.is_simulator_name`: `sim-eval`, `gpt-sim`) always take it; a bare name is otherwise
    judged as its real run would be, at an OpenAI-compatible endpoint: only when forced."""
    if not _has_tier(route):
        if forced and forced.get(route.model):
            where = f"the {route.api} API" if api_spec(route.api).flex is None else f"{route.provider}/"
            raise ConfigError(
                f"--flex {route.model}=on: {route.model} is sent to {where}, which has no flex tier "
                f"(flex goes to {_tiered()} models, and to an endpoint of "
                f"your own when forced); "
                f"leave the flag out (a workspace that remembers it from an earlier command: --flex {route.model}=off)"
            )
        return False
    if forced and (route.model in forced or ANY in forced):
        return forced.get(route.model, forced.get(ANY, False))
    if route.provider is None:
        return route.backend == SIMULATED and is_simulator_name(route.model)
    provider = _provider(route)
    if provider.flex == FORCED or (provider.flex == HOME and not _at_home(route)):
        return False  # Azure's, an endpoint of your own: only when forced; OpenAI's models elsewhere too
    tier = api_spec(route.api).flex
    sent = parse_model(route.model).sent
    return tier is not None and any(re.fullmatch(pattern, sent) for pattern, _ in tier.models)


def _at_home(route: Route) -> bool:
    """Whether a route goes to its provider's own endpoint, or is the rehearsal of one that would."""
    if route.backend == SIMULATED:
        return True
    return route.endpoint.base_url.rstrip("/") == (_provider(route).base_url or "")


def tier_fields(api: str) -> dict[str, Any]:
    """What a flex call adds to a request line's body: its API's documented field (`spec.FlexTier`)."""
    tier = api_spec(api).flex
    if tier is None:
        raise ConfigError(f"the {api} API has no flex tier")
    return {tier.field: TIER}
