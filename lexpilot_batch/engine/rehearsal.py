"""Where a rehearsal (`--provider simulated`) sends each route: as its real run sends it
(`rehearsed`), and a file compiled by an earlier version on the endpoint it names
(`compiled_route`); `session.Session` asks them."""

from __future__ import annotations

from dataclasses import replace

from lexpilot_batch.providers.backends import SIMULATED, SYNC
from lexpilot_batch.providers.registry import BARE, PROVIDERS, api_spec, native_simulated
from lexpilot_batch.providers.routing.endpoints import simulated_target
from lexpilot_batch.providers.routing.routes import Route, RouteRules


def rehearsed(route: Route, rules: RouteRules) -> Route:
    """A route of the simulated provider as its real run sends it: a provider with no Batch API
    (DeepSeek's, Ark's) through the sync backend, on the simulated provider's chat route (its
    platform's path where it has one) and at list price; a model of an OpenAI-compatible platform
    the simulated provider rehearses on its own path (`simulated.profiles`: Groq, Zhipu, Qianfan,
    SiliconFlow, Moonshot) routed there with the platform's limits (its line url, requests per file,
    window), so that `--provider simulated` refuses what the platform would (a bare name given such
    a platform's `--profile` too: Azure's, whose `/chat/completions` OpenAI's routes refuse); every
    other route is the OpenAI routes' as before."""
    from lexpilot_batch.simulated.profiles import PROFILES

    spec = PROVIDERS.get(route.provider or "")
    platform = PROFILES.get(route.provider or "" if spec is not None else rules.profiles.get(route.role) or "")
    own_path = platform is not None and (spec is None or spec.profile == platform.name)
    if spec is not None and not spec.batch_api:
        where = f"{SIMULATED}/{platform.name}" if own_path and platform is not None else SIMULATED
        return replace(route, endpoint=replace(route.endpoint, base_url=where, backend=SYNC))
    openai_shaped = (
        spec is not None and api_spec(spec.api).openai_lines and simulated_target(route.endpoint.base_url) == ""
    )
    if (not own_path or platform is None or not platform.batches) and openai_shaped and spec and spec.profile:
        # On the OpenAI routes, with the path its lines and batches name in its real run (Azure's
        # `/chat/completions`) and its files' expiry: the same lines, hence the same custom_ids.
        real = rules.limits(spec.profile, SIMULATED)
        limits = replace(
            route.limits, endpoint=real.endpoint, file_expiry=real.file_expiry, delete_files=real.delete_files
        )
        return replace(route, limits=limits)
    if not own_path or platform is None or not platform.batches:
        return route
    endpoint = replace(route.endpoint, base_url=f"{SIMULATED}/{platform.name}")
    return replace(route, endpoint=endpoint, limits=rules.limits(platform.name, SIMULATED))


def compiled_route(route: Route, recorded: str, rules: RouteRules) -> Route:
    """A simulated route as a file naming the endpoint `recorded` was compiled for: on the OpenAI
    routes (`simulated`) or a platform's path (`simulated/<platform>`), OpenAI's API and the limits
    of the one or the other, or on a native API's routes (`simulated/<api>`)."""
    platform = simulated_target(recorded) or None
    endpoint = replace(route.endpoint, base_url=recorded)
    if platform in native_simulated():
        return replace(route, endpoint=endpoint, api=platform)
    return replace(route, endpoint=endpoint, limits=rules.limits(platform, SIMULATED), api=BARE.name)
