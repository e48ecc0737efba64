"""Mistral's Batch API (batch jobs over OpenAI-shaped files) and chat completions, declared once
(`providers.spec`): the `mistral/` prefix. Reached through the `openai` SDK's HTTP client: no extra."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.bodies.schema import chat_sample
from lexpilot_batch.providers.mistral import catalogue, contract, lines, results
from lexpilot_batch.providers.openai.dialect import MAX_TOKENS
from lexpilot_batch.providers.spec import MB, ApiSpec, Limits, ModelNames, Provider

NAME = "mistral"
# Mistral batch jobs (https://docs.mistral.ai/capabilities/batch): "up to 1M requests" per batch;
# cut at 100,000, as Anthropic's, to keep one file's results a manageable size, and at OpenAI's
# 200 MB (no byte limit is documented for batch files). The window is the job's `timeout_hours`
# (default 24).
LIMITS = Limits(100_000, 200 * MB, "24h", "/v1/chat/completions")


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.mistral.batch import MistralBatchBackend
    from lexpilot_batch.providers.openai.chat import OpenAIChat  # Mistral's chat completions are OpenAI's shape

    return MistralBatchBackend, OpenAIChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    return contract.problems(model, body)


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=chat_sample,
    load=_load,
    dialect=MAX_TOKENS,
    read_results=lambda tag: results.result,
    names=ModelNames("Mistral's API"),
    simulated_native=True,
)

PROVIDERS = (
    Provider(
        "mistral",
        "Mistral Batch API",
        NAME,
        "https://api.mistral.ai/v1",
        "MISTRAL_BASE_URL",
        "MISTRAL_API_KEY",
        limits=LIMITS,
        hosts=("api.mistral.ai",),
        names=NAME,
        catalogue=catalogue.CATALOGUE,
    ),
)
