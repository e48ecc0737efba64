"""Fireworks AI's batch inference (datasets and batch inference jobs) and chat completions, declared
once (`providers.spec`): the `fireworks/` prefix, `fireworks/accounts/fireworks/models/<id>` (the
model as Fireworks names it, `accounts/fireworks/models/qwen3-235b-a22b`). Reached through the
`openai` SDK's HTTP client: no extra (the official `fireworks-ai` SDK drives the simulated routes in
the tests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.bodies.schema import chat_sample
from lexpilot_batch.providers.fireworks import lines, results
from lexpilot_batch.providers.openai import contract
from lexpilot_batch.providers.openai.dialect import MAX_TOKENS
from lexpilot_batch.providers.spec import MB, ApiSpec, Limits, Provider

NAME = "fireworks"
# https://docs.fireworks.ai/guides/batch-inference (taken 2026-12-06): an input dataset "Under 1GB"
# (500 MB on earlier versions of the page), "Job timeout: 24 hours maximum", an expired job's
# finished requests kept. A dataset is uploaded here in one `:upload` call, which "can handle file
# sizes up to 150Mb" (the `fireworks-ai` SDK's `datasets.upload`, 1.2.30): the bytes per file. No
# limit of lines is documented: 50,000 is ours, OpenAI's and Together's.
LIMITS = Limits(50_000, 150 * MB, "24h", "/v1/chat/completions")


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.fireworks.batch import FireworksBatchBackend
    from lexpilot_batch.providers.fireworks.chat import FireworksChat

    return FireworksBatchBackend, FireworksChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    # Its chat completions take OpenAI's body and extensions of their own (an OpenAI-compatible
    # endpoint); a line's body names no model, which is the job's (`fireworks.lines`).
    named = body if "model" in body else {"model": model, **body}
    return contract.problems(named, first_party=first_party, reasoning=reasoning)


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=chat_sample,
    load=_load,
    dialect=MAX_TOKENS,
    read_results=lambda tag: results.result,
    simulated_native=True,
    chat_names_model=True,  # its lines name no model: the job does
)

PROVIDERS = (
    # Batch inference at 50% of serverless prices, with automatic prompt caching ("placing static
    # content first": every prompt's shared part leads already, `providers.cache_layout`).
    Provider(
        "fireworks",
        "Fireworks AI batch inference",
        NAME,
        "https://api.fireworks.ai",  # the SDK's default; FIREWORKS_BASE_URL is the host, as the SDK reads it
        "FIREWORKS_BASE_URL",
        "FIREWORKS_API_KEY",
        limits=LIMITS,
        hosts=("fireworks.ai",),
    ),
)
