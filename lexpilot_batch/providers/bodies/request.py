"""Request bodies: what one role's requests carry besides the model and the prompt, per dialect.

Providers disagree on the body they accept; each API's folder holds its dialects' bodies
(`openai.dialect`: `openai` and `max_tokens`; `anthropic.dialect`; `google.dialect`), and a
provider names its dialect (`spec.Provider.dialect`; its API's, `spec.ApiSpec.dialect`, unless it
declares one). A bare name keeps the body it always had (`max_tokens` and the temperature). Per-model arguments (`--model-arg`, a model list's `body`) then
set or remove any field (Gemini's `generationConfig` is merged field by field).

What a run's roles send is decided once, when the run is registered, and pinned in its manifest
(`RoleRequest.to_json`): compiling reads it from there, so a later version of these rules never
changes the requests of a run already under way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.openai import dialect as openai_dialect
from lexpilot_batch.providers.prefixes import ModelName
from lexpilot_batch.providers.registry import BARE, PROVIDERS, api_spec
from lexpilot_batch.providers.spec import Dialect

# What `--reasoning-effort` takes, and whether a bare name is an OpenAI reasoning model, which OpenAI
# refuses `max_tokens` and a temperature for (`study.lineup`): the bare API's rules (`openai.dialect`).
REASONING_EFFORTS = openai_dialect.REASONING_EFFORTS
is_openai_reasoning_model = openai_dialect.is_openai_reasoning_model


@dataclass(frozen=True)
class RoleRequest:
    """What one role's requests of a run carry: pinned in the run's manifest."""

    provider: str | None  # `registry.ModelName.key`: "openai", "openai-api/sima"; None for a bare name
    model: str  # the `model` of every body: the name after the prefix
    body: dict[str, Any]  # every other body field but `messages`, in the order they are sent
    not_applied: tuple[str, ...] = ()  # settings the body does not carry: "temperature", "max_tokens"
    model_args: dict[str, Any] = field(default_factory=dict)  # the per-model fields asked for (None: removed)
    # How its lines lay out the prompt's shared part for the provider's cache (`cache_layout`,
    # `spec.Provider.cache`);
    # None, as in every run registered before it existed: as they always were.
    cache: str | None = None

    @cached_property
    def fields(self) -> str:
        """The body fields as JSON text: what request lines are framed from (`providers.lines`)."""
        return json.dumps(self.body, ensure_ascii=False, separators=(",", ":"))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider, "model": self.model, "body": self.body}
        if self.not_applied:
            out["not_applied"] = list(self.not_applied)
        if self.model_args:
            out["model_args"] = self.model_args
        if self.cache:
            out["cache"] = self.cache
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoleRequest:
        return cls(
            data["provider"],
            data["model"],
            dict(data["body"]),
            tuple(data.get("not_applied", ())),
            dict(data.get("model_args", {})),
            data.get("cache"),
        )


def role_request(
    role: str,
    name: ModelName,
    settings: Settings,
    *,
    reasoning_effort: str | None = None,
    args: Mapping[str, Any] | None = None,
    reasoning: bool | None = None,
) -> RoleRequest:
    """The body a role's requests to this model carry, in its provider's dialect.

    `reasoning` overrides what the name says (an Azure deployment's name may not tell);
    `reasoning_effort` is sent to reasoning models of the OpenAI dialect only; `args` set fields,
    or remove them with None, last.
    """
    temperature = settings.temperature_for(role)
    dialect = dialect_of(name)
    body = dialect.body(name.sent, temperature, settings.max_tokens, reasoning_effort, reasoning)
    _check_thinking(name, role, args or {})
    for key, value in (args or {}).items():
        if dialect.merge(body, key, value):
            continue
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    sent_temperature, sent_limits = dialect.sent(body)
    not_applied = []
    if sent_temperature != temperature:
        not_applied.append("temperature")
    if settings.max_tokens not in sent_limits:
        not_applied.append("max_tokens")
    return RoleRequest(name.key, name.sent, body, tuple(not_applied), dict(args or {}), cache_layout(name))


def dialect_of(name: ModelName) -> Dialect:
    """The body dialect of a model's requests: its provider's, else its API's (a bare name: OpenAI's `max_tokens`)."""
    if name.provider is None:
        return BARE.dialect
    return name.provider.dialect or api_spec(name.provider.api).dialect


def cache_layout(name: ModelName) -> str | None:
    """The cache layout a run's requests to `name` are sent with (`cache_layout`); None: none."""
    provider = name.provider
    return provider.cache(name.sent) if provider is not None and provider.cache is not None else None


def _check_thinking(name: ModelName, role: str, args: Mapping[str, Any]) -> None:
    """Refuse another platform's thinking switch (`enable_thinking` sent to Zhipu, `thinking` to
    SiliconFlow): the provider would ignore it or refuse every request, and the run would not be the
    one asked for. A provider that documents no switch, and a bare name, take anything."""
    provider = name.provider
    if provider is None or not provider.thinking:
        return
    others = {p.thinking for p in PROVIDERS.values() if p.thinking and p.thinking != provider.thinking}
    wrong = sorted(k for k in args if k in others)
    if wrong:
        raise ConfigError(
            f"{name.name} ({role} role): {wrong[0]} is another platform's thinking switch; {provider.title} "
            f"switches thinking with {provider.thinking}, e.g. --model-arg '{name.name}:{provider.thinking_example}'"
        )


def legacy_request(role: str, model: str, settings: Settings) -> RoleRequest:
    """What a run registered before dialects sends: a bare name, `max_tokens` and the temperature."""
    return role_request(role, ModelName(model, model), settings)


def applied_settings(settings: Settings, requests: Mapping[str, RoleRequest]) -> Settings:
    """`settings` as a run's manifest records them: a temperature or a token limit that no role's
    body carries is None, rather than a value that was never sent."""

    def unused(setting: str, roles: tuple[str, ...]) -> bool:
        return all(setting in requests[role].not_applied for role in roles)

    return replace(
        settings,
        temperature=None if unused("temperature", ("eval", "user")) else settings.temperature,
        judge_temperature=None if unused("temperature", ("judge",)) else settings.judge_temperature,
        max_tokens=None if unused("max_tokens", ("eval", "user", "judge")) else settings.max_tokens,
    )
