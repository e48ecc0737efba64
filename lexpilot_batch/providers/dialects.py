"""Request bodies: what one role's requests carry besides the model and the prompt, per dialect.

Providers disagree on the body they accept. OpenAI and Azure take `max_completion_tokens`, and
their reasoning models (o1, o3, o4-mini, the gpt-5 family) refuse `max_tokens` and any temperature
but the default: they get no temperature, and `--reasoning-effort` instead. Other providers keep
`max_tokens`. A bare name keeps the body it always had (`max_tokens` and the temperature).
Anthropic's Messages take `max_tokens` (required) and a temperature between 0 and 1; extended
thinking is a per-model argument (`thinking={"type": "enabled", "budget_tokens": N}`, with
`temperature=null`: Anthropic allows no other temperature while thinking). Gemini takes both
inside `generationConfig` (`temperature`, `maxOutputTokens`), and a `generationConfig` argument is
merged into it field by field (`generationConfig={"thinkingConfig": {"thinkingBudget": 1024}}`).
Per-model arguments (`--model-arg`, a model list's `body`) then set or remove any field.

What a run's roles send is decided once, when the run is registered, and pinned in its manifest
(`RoleRequest.to_json`): compiling reads it from there, so a later version of these rules never
changes the requests of a run already under way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.registry import ModelName

OPENAI = "openai"  # max_completion_tokens; reasoning models: no temperature, reasoning_effort
MAX_TOKENS = "max_tokens"  # max_tokens and the temperature: what every request carried before dialects
ANTHROPIC = "anthropic"  # Messages: max_tokens (required) and a temperature in [0, 1]
GOOGLE = "google"  # Gemini: generationConfig {temperature, maxOutputTokens}
GENERATION_CONFIG = "generationConfig"

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")

# OpenAI's reasoning models by name, dated snapshots included; `gpt-5-chat-latest` is not one. An
# Azure deployment is named by its owner: say `reasoning = true` in a model list when its name
# does not tell (`model_list`).
_OPENAI_REASONING = re.compile(r"(?:o\d+|gpt-5(?:\.\d+)?|codex-mini)(?!-chat)(?:[-.].*)?")


def is_openai_reasoning_model(model: str) -> bool:
    """Whether OpenAI would treat a model of this name as a reasoning model."""
    return _OPENAI_REASONING.fullmatch(model) is not None


@dataclass(frozen=True)
class RoleRequest:
    """What one role's requests of a run carry: pinned in the run's manifest."""

    provider: str | None  # `registry.ModelName.key`: "openai", "openai-api/sima"; None for a bare name
    model: str  # the `model` of every body: the name after the prefix
    body: dict[str, Any]  # every other body field but `messages`, in the order they are sent
    not_applied: tuple[str, ...] = ()  # settings the body does not carry: "temperature", "max_tokens"
    model_args: dict[str, Any] = field(default_factory=dict)  # the per-model fields asked for (None: removed)

    @cached_property
    def fields(self) -> str:
        """The body fields as JSON text: what request lines are framed from (`request_lines`)."""
        return json.dumps(self.body, ensure_ascii=False, separators=(",", ":"))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider, "model": self.model, "body": self.body}
        if self.not_applied:
            out["not_applied"] = list(self.not_applied)
        if self.model_args:
            out["model_args"] = self.model_args
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoleRequest:
        return cls(
            data["provider"],
            data["model"],
            dict(data["body"]),
            tuple(data.get("not_applied", ())),
            dict(data.get("model_args", {})),
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
    dialect = name.provider.dialect if name.provider is not None else MAX_TOKENS
    body: dict[str, Any]
    if dialect == OPENAI:
        thinks = is_openai_reasoning_model(name.sent) if reasoning is None else reasoning
        body = {} if thinks else {"temperature": temperature}
        body["max_completion_tokens"] = settings.max_tokens
        body["n"] = 1
        if thinks and reasoning_effort is not None:
            body["reasoning_effort"] = reasoning_effort
    elif dialect == MAX_TOKENS:
        body = {"temperature": temperature, "max_tokens": settings.max_tokens, "n": 1}
    elif dialect == ANTHROPIC:
        body = {"max_tokens": settings.max_tokens, "temperature": temperature}
    elif dialect == GOOGLE:
        body = {GENERATION_CONFIG: {"temperature": temperature, "maxOutputTokens": settings.max_tokens}}
    else:
        raise ConfigError(f"{name.name}: the {dialect} request format is unknown to this version")
    for key, value in (args or {}).items():
        if dialect == GOOGLE and key == GENERATION_CONFIG and isinstance(value, Mapping):
            merged = {**body.get(GENERATION_CONFIG, {}), **value}
            body[key] = {k: v for k, v in merged.items() if v is not None}
        elif value is None:
            body.pop(key, None)
        else:
            body[key] = value
    sent_temperature, sent_limits = _sent_settings(dialect, body)
    if dialect == ANTHROPIC:
        _check_anthropic(name.name, role, body)
    not_applied = []
    if sent_temperature != temperature:
        not_applied.append("temperature")
    if settings.max_tokens not in sent_limits:
        not_applied.append("max_tokens")
    return RoleRequest(name.key, name.sent, body, tuple(not_applied), dict(args or {}))


def _sent_settings(dialect: str, body: Mapping[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    """The temperature and the output-token limits a body carries, wherever its dialect puts them."""
    if dialect == GOOGLE:
        config = body.get(GENERATION_CONFIG)
        config = config if isinstance(config, Mapping) else {}
        return config.get("temperature"), (config.get("maxOutputTokens"),)
    return body.get("temperature"), (body.get("max_tokens"), body.get("max_completion_tokens"))


def _check_anthropic(model: str, role: str, body: Mapping[str, Any]) -> None:
    """Refuse before anything is compiled what Message Batches would refuse on every line."""
    if not isinstance(body.get("max_tokens"), int):
        raise ConfigError(
            f"{model} ({role} role): Anthropic's Messages need max_tokens (--max-tokens); do not remove it"
        )
    temperature = body.get("temperature")
    if temperature is not None and not (isinstance(temperature, (int, float)) and 0 <= temperature <= 1):
        raise ConfigError(
            f"{model} ({role} role): Anthropic takes a temperature between 0 and 1, not {temperature} "
            "(--temperature / --judge-temperature, or --model-arg MODEL:temperature=...)"
        )
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled" and temperature not in (None, 1):
        raise ConfigError(
            f"{model} ({role} role): with extended thinking Anthropic allows no temperature but 1; "
            f"add --model-arg {model}:temperature=null"
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
