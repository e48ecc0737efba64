"""Where one (role, model)'s requests go: backend, endpoint, key variable and limits.

A provider-qualified model goes to its provider (`spec.Provider`, `registry`): the endpoint in
`<PROVIDER>_BASE_URL` or the provider's default, the key in its key variable, its default backend,
its limits profile. A bare name goes where its role's variables say (`routing.endpoints.role_endpoint`), as
it always did. A
model list may give one model its own base URL, key variable and backend (`ModelRoute`).

The backend of a (role, model) is, first to last: the command's `--provider simulated`,
`--<role>-backend` or `LEXPILOT_<ROLE>_BACKEND`, or what the workspace remembers of them; the
model list's `backend`; the provider's default (`sync` for a provider without a Batch API,
`batch` otherwise and for bare names). Choosing `batch` for a provider without a Batch API is an
error, raised before anything is compiled; so is `manual` for a provider whose lines are not
OpenAI's (`spec.ApiSpec.openai_lines`: Anthropic, Google...): its files are run by tools that read
the OpenAI chat format. `batch` and `sync` speak the provider's own API (`sync` through its
synchronous call, `sync.call`); so does the simulated provider for the APIs it speaks natively
(`spec.ApiSpec.simulated_native`: Anthropic's, Gemini's, Mistral's and Together's), and the OpenAI
shape for every other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import BATCH, MANUAL, SIMULATED, check_backend
from lexpilot_batch.providers.prefixes import known_prefixes, provider_of
from lexpilot_batch.providers.registry import BARE, PROVIDERS, api_spec, guess_profile, resolve_limits
from lexpilot_batch.providers.routing.endpoints import (
    DEFAULT_BASE_URL,
    VLLM_ENDPOINT,
    Endpoint,
    endpoint_identity,
    role_endpoint,
    simulated_endpoint,
)
from lexpilot_batch.providers.spec import Limits, Provider


@dataclass(frozen=True)
class ModelRoute:
    """One model's own endpoint, key variable and backend, from a model list (never a key)."""

    base_url: str | None = None
    key_var: str | None = None
    backend: str | None = None

    def to_json(self) -> dict[str, str]:
        return {
            k: v for k, v in (("base_url", self.base_url), ("key_var", self.key_var), ("backend", self.backend)) if v
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelRoute:
        return cls(data.get("base_url"), data.get("key_var"), data.get("backend"))


@dataclass(frozen=True)
class Route:
    """Where the requests of one (role, model) go, and within which limits."""

    role: str
    model: str  # as registered: provider-qualified or bare
    provider: str | None  # `registry.ModelName.key`; None for a bare name
    endpoint: Endpoint
    limits: Limits
    api: str = BARE.name  # the provider's API shape (`spec.Provider.api`)

    @property
    def backend(self) -> str:
        return self.endpoint.backend

    @property
    def label(self) -> str:
        """The endpoint as a run's manifest records it (no key, no loopback port)."""
        return SIMULATED if self.backend == SIMULATED else endpoint_identity(self.endpoint.base_url)


@dataclass(frozen=True)
class RouteRules:
    """What decides routes besides the model's name: the command, the workspace, the environment."""

    choices: Mapping[str, str] = field(default_factory=dict)  # role -> backend chosen for the role
    model_routes: Mapping[str, ModelRoute] = field(default_factory=dict)  # by registered name
    profiles: Mapping[str, str | None] = field(default_factory=dict)  # role -> profile, for bare names
    max_requests: int | None = None
    max_bytes: int | None = None
    completion_window: str | None = None
    batch_endpoint: str | None = None
    environ: Mapping[str, str] | None = None  # None: os.environ

    def limits(self, profile: str | None, base_url: str) -> Limits:
        return resolve_limits(
            profile, base_url, self.max_requests, self.max_bytes, self.completion_window, self.batch_endpoint
        )


def resolve_route(role: str, model: str, provider: str | None, rules: RouteRules) -> Route:
    """The route of `model` (as registered) in `role`; `provider` is its key, None for a bare name.

    Needs no key and no server: compiling resolves routes, only sending uses their keys. Files of
    the `manual` backend are run by vLLM's `run-batch` (or a console), whose lines must name
    `/v1/chat/completions` whatever the profile says.
    """
    route = _resolve_route(role, model, provider, rules)
    if route.backend == MANUAL and route.limits.endpoint != VLLM_ENDPOINT:
        route = replace(route, limits=replace(route.limits, endpoint=VLLM_ENDPOINT))
    return route


def _resolve_route(role: str, model: str, provider: str | None, rules: RouteRules) -> Route:
    env = os.environ if rules.environ is None else rules.environ
    own = rules.model_routes.get(model, ModelRoute())
    spec, service = provider_of(provider) if provider is not None else (None, None)
    if spec is not None and not spec.ready:
        raise ConfigError(f"{model} ({role} role): {spec.title} is not supported yet")
    backend = _backend(role, model, spec, own, rules.choices)
    if backend == SIMULATED:
        if spec is not None and api_spec(spec.api).simulated_native:
            # Rehearsed on its own API's routes of the simulated provider, within its provider's
            # limits: the lines, backend, SDK and contract of its real run (`session` finds the URL).
            endpoint = simulated_endpoint(role, f"{SIMULATED}/{spec.api}", model)
            return Route(role, model, provider, endpoint, rules.limits(spec.profile, SIMULATED), spec.api)
        # Every other model goes to its OpenAI routes, with their own limits.
        profile = _bare_profile(role, model, rules) if spec is None else None
        endpoint = simulated_endpoint(role, SIMULATED, model if spec is not None else None)
        return Route(role, model, provider, endpoint, rules.limits(profile, SIMULATED))
    if spec is None:
        endpoint = replace(role_endpoint(role, env), backend=backend)
        if own.base_url:
            endpoint = replace(endpoint, base_url=own.base_url.rstrip("/"))
        if own.key_var:
            endpoint = replace(endpoint, key_var=own.key_var, api_key=env.get(own.key_var) or None, key_hint="")
        if "/" in model and backend != "manual" and endpoint.base_url == DEFAULT_BASE_URL:
            # A Hugging Face-style id (org/model) is served by the user's own server, never by OpenAI.
            raise ConfigError(
                f"{model} ({role} role): a name with a '/' and no provider prefix goes to the endpoint of "
                f"LEXPILOT_{role.upper()}_BASE_URL or OPENAI_BASE_URL, and neither is set, so it would go to "
                f"OpenAI, which does not serve it; set one to the endpoint that serves {model} (a vLLM server, "
                f"say), or write openai-api/<service>/{model}, or a known prefix ({known_prefixes()})"
            )
        return Route(role, model, None, endpoint, rules.limits(_bare_profile(role, model, rules), endpoint.base_url))
    url_var = spec.url_var_for(service)
    key_var = own.key_var or spec.key_var_for(service)
    base_url = own.base_url or env.get(url_var) or spec.base_url
    if not base_url:
        example = f" ({spec.url_example})" if spec.url_example else ""
        raise ConfigError(
            f"{model} ({role} role): {spec.title} has no default endpoint: set {url_var} to its base URL{example}"
        )
    base_url = base_url.rstrip("/")
    endpoint = Endpoint(role, base_url, key_var, env.get(key_var) or None, backend, model, keyless=spec.keyless)
    return Route(
        role, model, provider, endpoint, rules.limits(spec.profile or guess_profile(base_url), base_url), spec.api
    )


def real_endpoint(route: Route, environ: Mapping[str, str] | None = None) -> str:
    """Where a rehearsed route's requests would go in a real run: the endpoint (its identity) its
    model's provider or role's variables name, or what has to be set first."""
    try:
        real = _resolve_route(route.role, route.model, route.provider, RouteRules(environ=environ))
    except ConfigError:
        return "its provider's endpoint, once its variables are set"
    return endpoint_identity(real.endpoint.base_url)


def _bare_profile(role: str, model: str, rules: RouteRules) -> str | None:
    """The profile `--profile` gives a bare name; a native API's profile is its provider's alone."""
    profile = rules.profiles.get(role)
    if profile in PROVIDERS and not api_spec(PROVIDERS[profile].api).openai_lines:
        raise ConfigError(
            f"--profile {role}={profile}: the {profile} profile is for {PROVIDERS[profile].title}, whose models are "
            f"named {profile}/<model>; {model} ({role} role) speaks the OpenAI API"
        )
    return profile


def _backend(role: str, model: str, spec: Provider | None, own: ModelRoute, choices: Mapping[str, str]) -> str:
    if role in choices:
        backend, source = (
            choices[role],
            f"--{role}-backend (or LEXPILOT_{role.upper()}_BACKEND, or this workspace's last choice)",
        )
    elif own.backend:
        backend, source = check_backend(own.backend, role), "the model list"
    else:
        return spec.backend if spec is not None else "batch"
    if backend == BATCH and spec is not None and not spec.batch_api:
        raise ConfigError(
            f"{model} ({role} role): {spec.title} has no Batch API, but {source} chose the batch backend; "
            f"send it with --{role}-backend sync (the default for {spec.prefix}/) or manual"
        )
    if backend == MANUAL and spec is not None and not api_spec(spec.api).openai_lines:
        raise ConfigError(
            f"{model} ({role} role): {source} chose the manual backend, whose files are OpenAI chat-format batches; "
            f"{spec.prefix}/ models go through {spec.title} (the batch backend), its synchronous calls (sync) "
            "or the simulated provider. "
            f"For an OpenAI-compatible endpoint of the same provider write openai-api/<service>/{model.partition('/')[2]}"
        )
    return backend
