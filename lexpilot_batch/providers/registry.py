"""Every provider's declaration, collected: the one place shared code asks which API a request
speaks, where its prefix sends it and within which limits.

The declarations are found, not listed (`providers.spec`): each folder `providers/<api>/` with a
`spec.py` gives its `API` and its `PROVIDERS`, and each module of `providers/platforms/` one
OpenAI-compatible platform's `PROVIDER`. So adding a provider touches no file but its own
(docs/adding-a-provider.md). The lookups below read the declarations; none names a provider.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers import platforms
from lexpilot_batch.providers.backends import BATCH, FLEX, SYNC
from lexpilot_batch.providers.results import Normalise
from lexpilot_batch.providers.routing.endpoints import simulated_target
from lexpilot_batch.providers.spec import ApiSpec, Limits, Provider

_PACKAGE = "lexpilot_batch.providers"


def _modules() -> tuple[list[ModuleType], list[ModuleType]]:
    """The API folders' `spec` modules, and the platforms' modules, in the order of their names."""
    from lexpilot_batch import providers

    apis = [
        importlib.import_module(f"{_PACKAGE}.{info.name}.spec")
        for info in pkgutil.iter_modules(providers.__path__)
        if info.ispkg and importlib.util.find_spec(f"{_PACKAGE}.{info.name}.spec") is not None
    ]
    found = [
        importlib.import_module(f"{platforms.__name__}.{info.name}")
        for info in pkgutil.iter_modules(platforms.__path__)
    ]
    return apis, found


def _collect() -> tuple[dict[str, ApiSpec], dict[str, Provider]]:
    api_modules, platform_modules = _modules()
    apis = {m.API.name: m.API for m in api_modules}
    declared = [p for m in api_modules for p in m.PROVIDERS] + [m.PROVIDER for m in platform_modules]
    providers: dict[str, Provider] = {}
    # Named prefixes in alphabetical order, the generic one last: the order messages list them in.
    for provider in sorted(declared, key=lambda p: (p.generic, p.prefix)):
        if provider.prefix in providers:
            raise RuntimeError(f"the provider prefix {provider.prefix!r} is declared twice")
        if provider.api not in apis:
            raise RuntimeError(f"{provider.prefix}/ speaks the API {provider.api!r}, which no folder declares")
        providers[provider.prefix] = provider
    if sum(a.bare for a in apis.values()) != 1:
        raise RuntimeError("exactly one API must take the model names without a prefix (`ApiSpec.bare`)")
    return apis, providers


APIS, PROVIDERS = _collect()
# The API a name without a provider prefix speaks (OpenAI's shape, at its role's endpoint).
BARE: ApiSpec = next(a for a in APIS.values() if a.bare)

# The limits of a bare name's endpoint of unknown make, and of a provider that declares none.
GENERIC = "generic"
PROFILES: dict[str, Limits] = {GENERIC: Limits(), **{p.prefix: p.limits for p in PROVIDERS.values() if p.limits}}


def api_spec(name: str) -> ApiSpec:
    """The declaration of an API shape by its name (`spec.ApiSpec.name`)."""
    try:
        return APIS[name]
    except KeyError:
        raise ConfigError(f"the {name!r} API is unknown to this version of lexpilot-batch") from None


def guess_profile(base_url: str) -> str:
    """The profile a base URL most likely needs: the provider whose host fragment it holds (the
    longest fragment, where several match: `api.groq.com/openai/v1` is Groq's, not Azure's
    `/openai/v1`); `generic` when nothing is recognised."""
    url = base_url.lower()
    found = [(len(host), p.prefix) for p in PROVIDERS.values() if p.limits for host in p.hosts if host in url]
    return max(found)[1] if found else GENERIC


def resolve_limits(
    profile: str | None,
    base_url: str,
    max_requests: int | None = None,
    max_bytes: int | None = None,
    completion_window: str | None = None,
    endpoint: str | None = None,
) -> Limits:
    """A profile's limits (None: the base URL's, `guess_profile`), each overridden where given."""
    name = profile or guess_profile(base_url)
    if name not in PROFILES:
        raise ConfigError(f"unknown provider profile {name!r}; known: {', '.join(PROFILES)}")
    base = PROFILES[name]
    return Limits(
        max_requests=max_requests or base.max_requests,
        max_bytes=max_bytes or base.max_bytes,
        completion_window=completion_window or base.completion_window,
        endpoint=endpoint or base.endpoint,
        enqueued_tokens=base.enqueued_tokens,
        file_expiry=base.file_expiry,
        delete_files=base.delete_files,
        min_requests=base.min_requests,
    )


def native_simulated() -> frozenset[str]:
    """The APIs the simulated provider speaks on their own routes (`simulated/<api>`)."""
    return frozenset(a.name for a in APIS.values() if a.simulated_native)


def missing_sdk(api: str) -> str | None:
    """What to install for `api`'s requests to be sent, when its SDK is missing or older than its
    extra asks; None when it is fine, or needs none. Looked up, not imported: `prepare` asks
    before anything is compiled."""
    extra = api_spec(api).extra
    return extra.problem() if extra is not None else None


def batch_backend(api: str, endpoint: Any, limits: Limits, timeout: float) -> Any:
    """The batch backend (`batch.BatchBackend`) of `api`'s shape at `endpoint`."""
    backend_class, _ = api_spec(api).load()
    return backend_class(endpoint, limits, timeout=timeout)  # type: ignore[call-arg]


def chat_call(api: str, endpoint: Any, timeout: float, max_retries: int, model: str = "") -> Any:
    """The synchronous call (`sync.call.ChatCall`) of `api`'s shape at `endpoint`."""
    _, call_class = api_spec(api).load()
    return call_class(endpoint, timeout, max_retries, model)


def chat_policy(provider: str | None, timeout: float, retries: int) -> tuple[float, int]:
    """The timeout and retries of one synchronous request to `provider` (a manifest's key; None: a
    bare name): the command's, or the longer ones its declaration keeps (`Provider.chat_timeout`)."""
    declared = PROVIDERS.get((provider or "").partition("/")[0])
    if declared is None:
        return timeout, retries
    return max(timeout, declared.chat_timeout or 0.0), max(retries, declared.chat_retries or 0)


def file_api(row: Mapping[str, Any]) -> str:
    """The API shape of a compiled file's lines and results: its provider's on the `batch` backend,
    on `sync` (a provider's chat-completions-only models, and the groups of a batch route that
    `--tail-sync` sends through its API's synchronous call) and on `flex` (the groups `--tail auto`
    sends through that call on the flex tier); the bare API's (OpenAI's) on every other (manual).
    A file of the simulated provider names its endpoint `simulated/<api>` when it is rehearsed on
    a native API's routes, else `simulated[/<platform>]`."""
    target = simulated_target(row["endpoint"] or "")
    if target is not None:
        # `simulated/<api>`: rehearsed on that API's own routes (`routing.routes`); any other, OpenAI's.
        return target if target in native_simulated() else BARE.name
    if row["backend"] not in (BATCH, SYNC, FLEX) or not row["provider"]:
        return BARE.name
    head = row["provider"].partition("/")[0]
    if head not in PROVIDERS:
        raise ConfigError(f"provider {row['provider']!r} recorded in a run's manifest is unknown to this version")
    return PROVIDERS[head].api


def result_reader(api: str, tag: str) -> Normalise | None:
    """How a result line of `api` reads as an OpenAI batch output line (None: it is one already).
    `tag` is the workspace's (`ids.id_tag`): an id of another workspace is not ours."""
    return api_spec(api).read_results(tag)
