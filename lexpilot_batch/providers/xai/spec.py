"""xAI's Batch API (batches created empty, requests added inline, results paged) and chat
completions, declared once (`providers.spec`): the `xai/` prefix, `xai/<model>` (the model as xAI
names it, `xai/grok-4-1-fast-reasoning`). Reached through the `openai` SDK's HTTP client: no extra
(the official `xai-sdk`, gRPC only, drives the simulated batches in the tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.bodies.schema import chat_sample
from lexpilot_batch.providers.openai import contract
from lexpilot_batch.providers.openai.dialect import MAX_TOKENS
from lexpilot_batch.providers.spec import MB, ApiSpec, Limits, Provider
from lexpilot_batch.providers.xai import lines, results

NAME = "xai"
# https://docs.x.ai/developers/advanced-api-usage/batch-api, "Limitations" (taken 2026-12-06): a
# batch holds "an unlimited number of requests in theory" (more than 1,000,000 "may be throttled"),
# an add call carried at most 25 MB (the guide's earlier wording, "Each request to add batch requests
# has a maximum payload size of 25MB"; its later one puts 25 MB on each request), 100 add calls per
# 30 s and one create a second per team; most batches finish "within 24 hours". A file is sent in one
# add call: 24 MB of lines here, and those lines as the add body wraps them within 25 MB (`xai.batch.WRAP`),
# and 50,000 requests, ours (OpenAI's), none being documented.
LIMITS = Limits(50_000, 24 * MB, "24h", "/v1/chat/completions")


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.openai.chat import OpenAIChat  # xAI's chat completions are OpenAI's shape
    from lexpilot_batch.providers.xai.batch import XaiBatchBackend

    return XaiBatchBackend, OpenAIChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    # Its chat completions take OpenAI's body (https://docs.x.ai/developers/rest-api-reference, "an
    # OpenAI-compatible" chat completions endpoint) with extensions of their own.
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
    # Batch requests at 50% of the standard price ("50% off standard pricing", the guide).
    Provider(
        "xai",
        "xAI Batch API",
        NAME,
        "https://api.x.ai/v1",
        "XAI_BASE_URL",
        "XAI_API_KEY",
        limits=LIMITS,
        hosts=("api.x.ai",),
    ),
)
