"""Together AI's Batch API (signed-URL uploads, jobs without metadata) and chat completions, declared
once (`providers.spec`): the `together/` prefix. Reached through the `openai` SDK's HTTP client: no extra."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.bodies.schema import chat_sample
from lexpilot_batch.providers.openai import contract
from lexpilot_batch.providers.openai.dialect import MAX_TOKENS
from lexpilot_batch.providers.spec import MB, ApiSpec, Limits, Provider
from lexpilot_batch.providers.together import lines, results

NAME = "together"
# https://docs.together.ai/docs/inference/batch/overview, "Rate limits": up to 50,000 requests per
# batch and 100 MB per input file; the window "defaults to 24h and cannot be changed". (Up to 30B
# tokens enqueued per model: far above any study, so no budget is set.)
LIMITS = Limits(50_000, 100 * MB, "24h", "/v1/chat/completions")


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.openai.chat import OpenAIChat  # Together's chat completions are OpenAI's shape
    from lexpilot_batch.providers.together.batch import TogetherBatchBackend

    return TogetherBatchBackend, OpenAIChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    # Its chat completions take OpenAI's body, and extensions of their own (an OpenAI-compatible endpoint).
    return contract.problems(body, first_party=first_party, reasoning=reasoning)


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=chat_sample,
    load=_load,
    dialect=MAX_TOKENS,
    read_results=lambda tag: results.result,
    simulated_native=True,
)

PROVIDERS = (
    # Files uploaded with purpose `batch-api`, `{custom_id, body}` lines, jobs without metadata
    # (https://docs.together.ai/docs/inference/batch/overview; the `together` SDK's
    # `resources/batches.py`). Its default host is the SDK's, api.together.ai.
    Provider(
        "together",
        "Together AI Batch API",
        NAME,
        "https://api.together.ai/v1",
        "TOGETHER_BASE_URL",  # ends in /v1 here; the SDK's own variable of that name does not
        "TOGETHER_API_KEY",
        limits=LIMITS,
    ),
)
