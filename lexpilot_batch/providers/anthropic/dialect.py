"""The request bodies of Anthropic's Messages (and Message Batches' params): `max_tokens` (required),
and no temperature. Extended thinking is a per-model argument (`thinking={"type": "enabled",
"budget_tokens": N}`).

Why no temperature: the sources disagree (issue 25, item 7). The installed `anthropic` SDK's
request types (`MessageCreateParamsNonStreaming`) have no `temperature`, `top_p` or `top_k`; the
public Messages API reference documents `temperature` between 0 and 1. A body the SDK's types do
not describe could be refused on every line of the first wave, so the installed SDK is followed
(`families`, docs/providers.md): `--temperature` is recorded as not applied to Claude, and a user
who wants one sends it with `--model-arg MODEL:temperature=0.7` (checked against the reference's
range by `anthropic.contract`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.spec import Dialect


def body(temperature: float | None, max_tokens: int | None) -> dict[str, Any]:
    """The body fields of a request, before per-model arguments."""
    return {"max_tokens": max_tokens}


def sent_settings(fields: Mapping[str, Any]) -> tuple[Any, tuple[Any, ...]]:
    """The temperature and the output-token limits a body carries."""
    return fields.get("temperature"), (fields.get("max_tokens"),)


ANTHROPIC = Dialect(
    "anthropic", lambda model, temperature, max_tokens, effort, reasoning: body(temperature, max_tokens), sent_settings
)
