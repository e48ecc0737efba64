"""The request bodies of Gemini's generateContent (and Batch Mode's requests): the temperature and
the output-token limit inside `generationConfig` (`temperature`, `maxOutputTokens`). A
`generationConfig` argument is merged into it field by field
(`generationConfig={"thinkingConfig": {"thinkingBudget": 1024}}`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.spec import Dialect

GENERATION_CONFIG = "generationConfig"


def body(temperature: float | None, max_tokens: int | None) -> dict[str, Any]:
    """The body fields of a request, before per-model arguments."""
    return {GENERATION_CONFIG: {"temperature": temperature, "maxOutputTokens": max_tokens}}


def merge(fields: dict[str, Any], key: str, value: Any) -> bool:
    """Apply a per-model argument that merges rather than replaces; whether it was one."""
    if key != GENERATION_CONFIG or not isinstance(value, Mapping):
        return False
    merged = {**fields.get(GENERATION_CONFIG, {}), **value}
    fields[key] = {k: v for k, v in merged.items() if v is not None}
    return True


def sent_settings(fields: Mapping[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    """The temperature and the output-token limit a body carries."""
    config = fields.get(GENERATION_CONFIG)
    config = config if isinstance(config, Mapping) else {}
    return config.get("temperature"), (config.get("maxOutputTokens"),)


GOOGLE = Dialect(
    "google",
    lambda model, temperature, max_tokens, effort, reasoning: body(temperature, max_tokens),
    sent_settings,
    merge,
)
