"""The request bodies of Anthropic's Messages (and Message Batches' params): `max_tokens` (required)
and a temperature between 0 and 1. Extended thinking is a per-model argument (`thinking={"type":
"enabled", "budget_tokens": N}`, with `temperature=null`: Anthropic allows no other temperature
while thinking).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.errors import ConfigError

ANTHROPIC = "anthropic"


def body(temperature: float | None, max_tokens: int | None) -> dict[str, Any]:
    """The body fields of a request, before per-model arguments."""
    return {"max_tokens": max_tokens, "temperature": temperature}


def sent_settings(fields: Mapping[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    """The temperature and the output-token limits a body carries."""
    return fields.get("temperature"), (fields.get("max_tokens"),)


def check(model: str, role: str, fields: Mapping[str, Any]) -> None:
    """Refuse before anything is compiled what Message Batches would refuse on every line."""
    if not isinstance(fields.get("max_tokens"), int):
        raise ConfigError(
            f"{model} ({role} role): Anthropic's Messages need max_tokens (--max-tokens); do not remove it"
        )
    temperature = fields.get("temperature")
    if temperature is not None and not (isinstance(temperature, (int, float)) and 0 <= temperature <= 1):
        raise ConfigError(
            f"{model} ({role} role): Anthropic takes a temperature between 0 and 1, not {temperature} "
            "(--temperature / --judge-temperature, or --model-arg MODEL:temperature=...)"
        )
    thinking = fields.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("type") == "enabled" and temperature not in (None, 1):
        raise ConfigError(
            f"{model} ({role} role): with extended thinking Anthropic allows no temperature but 1; "
            f"add --model-arg {model}:temperature=null"
        )
