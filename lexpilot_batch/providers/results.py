"""Which API a compiled file's results are in, and how each is read as an OpenAI batch output line
(`providers.outputs`): the raw provider files are saved under `responses/` untouched, and read
through here by ingest, `doctor` and the lost-create recovery.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.anthropic import results as anthropic_results
from lexpilot_batch.providers.apis import (
    ANTHROPIC,
    BATCH,
    FLEX,
    GOOGLE,
    MISTRAL,
    OPENAI,
    SIMULATED_NATIVE,
    SYNC,
    TOGETHER,
)
from lexpilot_batch.providers.endpoints import simulated_target
from lexpilot_batch.providers.google import results as google_results
from lexpilot_batch.providers.mistral import results as mistral_results
from lexpilot_batch.providers.outputs import Normalise
from lexpilot_batch.providers.registry import provider_of
from lexpilot_batch.providers.together import results as together_results

__all__ = ["Normalise", "file_api", "normaliser"]


def file_api(row: Mapping[str, Any]) -> str:
    """The API shape of a compiled file's lines and results: its provider's on the `batch` backend,
    on `sync` (a provider's chat-completions-only models, and the groups of a batch route that
    `--tail-sync` sends through its API's synchronous call: `providers.chat`) and on `flex` (the
    groups `--tail auto` sends through that call on the flex tier, a Gemini model's in Gemini's
    shape); OpenAI's on every other (manual). A file of the simulated provider names its endpoint
    `simulated/<api>` when it is rehearsed on a native API's routes, else `simulated[/<platform>]`."""
    target = simulated_target(row["endpoint"] or "")
    if target is not None:
        # `simulated/<api>`: rehearsed on that API's own routes (`routes`); any other, OpenAI's.
        return target if target in SIMULATED_NATIVE else OPENAI
    if row["backend"] not in (BATCH, SYNC, FLEX) or not row["provider"]:
        return OPENAI
    return provider_of(row["provider"])[0].api


def normaliser(api: str, tag: str) -> Normalise | None:
    """How a result line of `api` reads as an OpenAI batch output line (None: it is one already).
    `tag` is the workspace's (`ids.id_tag`): an Anthropic id of another is not ours."""
    if api == ANTHROPIC:
        return lambda line: anthropic_results.result(line, tag)
    if api == GOOGLE:
        return google_results.result
    if api == MISTRAL:
        return mistral_results.result
    if api == TOGETHER:
        return together_results.result
    return None
