"""The request bodies of OpenAI's API shape, in its two dialects.

`openai` (OpenAI and Azure): `max_completion_tokens`; reasoning models (o1, o3, o4-mini, the gpt-5
family) refuse `max_tokens` and any temperature but the default, so they get no temperature, and
`--reasoning-effort` instead. `max_tokens` (every other OpenAI-compatible provider, and bare
names): `max_tokens` and the temperature, the body every request carried before dialects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from typing import Any

from lexpilot_batch.providers.spec import Dialect

REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")

# OpenAI's reasoning models by name, dated snapshots included; `gpt-5-chat-latest` is not one. An
# Azure deployment is named by its owner: say `reasoning = true` in a model list when its name
# does not tell (`study.model_list`).
_OPENAI_REASONING = re.compile(r"(?:o\d+|gpt-5(?:\.\d+)?|codex-mini)(?!-chat)(?:[-.].*)?")


def is_openai_reasoning_model(model: str) -> bool:
    """Whether OpenAI would treat a model of this name as a reasoning model."""
    return _OPENAI_REASONING.fullmatch(model) is not None


def body(
    dialect: str,
    model: str,
    temperature: float | None,
    max_tokens: int | None,
    reasoning_effort: str | None,
    reasoning: bool | None,
) -> dict[str, Any]:
    """The body fields of a request to `model` in the dialect named `dialect` (`OPENAI`'s or
    `MAX_TOKENS`'s), before per-model arguments."""
    if dialect == MAX_TOKENS.name:
        return {"temperature": temperature, "max_tokens": max_tokens, "n": 1}
    thinks = is_openai_reasoning_model(model) if reasoning is None else reasoning
    fields: dict[str, Any] = {} if thinks else {"temperature": temperature}
    fields["max_completion_tokens"] = max_tokens
    fields["n"] = 1
    if thinks and reasoning_effort is not None:
        fields["reasoning_effort"] = reasoning_effort
    return fields


def sent_settings(fields: Mapping[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    """The temperature and the output-token limits a body carries."""
    return fields.get("temperature"), (fields.get("max_tokens"), fields.get("max_completion_tokens"))


# max_completion_tokens; reasoning models: no temperature, but reasoning_effort (OpenAI, Azure)
OPENAI = Dialect("openai", partial(body, "openai"), sent_settings)
# max_tokens and the temperature (every other OpenAI-compatible provider, and bare names)
MAX_TOKENS = Dialect("max_tokens", partial(body, "max_tokens"), sent_settings)
