"""Anthropic's Message Batches and Messages, declared once (`providers.spec`): the `anthropic/` prefix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.anthropic import cache, catalogue, contract, dialect, families, ids, lines, results
from lexpilot_batch.providers.bodies.schema import chat_sample
from lexpilot_batch.providers.spec import MB, OWN_ONLY, ApiSpec, Extra, Limits, ModelNames, Provider

NAME = "anthropic"
EXTRA = Extra("anthropic", "anthropic", "Anthropic")
# At most 100,000 requests or 256 MB per batch, requests inline (no line names a URL; the path is
# the batch route's). The window is fixed at 24 h.
LIMITS = Limits(100_000, 256 * MB, "24h", "/v1/messages/batches")


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.anthropic.batch import AnthropicBatchBackend
    from lexpilot_batch.providers.anthropic.chat import AnthropicChat

    return AnthropicBatchBackend, AnthropicChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    return contract.problems(body)


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=chat_sample,
    load=_load,
    dialect=dialect.ANTHROPIC,
    read_results=lambda tag: lambda line: results.result(line, tag),
    line_id=ids.line_id,
    our_id=ids.our_id,
    families=families.FAMILIES,
    names=ModelNames(
        "Anthropic's API",
        serves=OWN_ONLY,
        lab="Anthropic",
        own="Claude models only (claude-...)",
    ),
    extra=EXTRA,
    simulated_native=True,
)

PROVIDERS = (
    Provider(
        "anthropic",
        "Anthropic Message Batches",
        NAME,
        "https://api.anthropic.com",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_API_KEY",
        limits=LIMITS,
        names=NAME,
        cache=cache.layout,
        catalogue=catalogue.CATALOGUE,
    ),
)
