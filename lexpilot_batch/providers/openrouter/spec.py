"""OpenRouter's Batch API (inline requests, batches without metadata) and chat completions, declared
once (`providers.spec`): the `openrouter/` prefix, `openrouter/<author>/<model>` (the model as
OpenRouter names it, `openrouter/meta-llama/llama-3.3-70b-instruct`). Reached through the `openai`
SDK's HTTP client: no extra."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.bodies.schema import TYPE, UNSUPPORTED, Problem, chat_sample
from lexpilot_batch.providers.openai import contract
from lexpilot_batch.providers.openai.dialect import MAX_TOKENS, sent_settings
from lexpilot_batch.providers.openrouter import lines, results
from lexpilot_batch.providers.spec import MB, ApiSpec, Dialect, Limits, Provider

NAME = "openrouter"
# https://openrouter.ai/docs/guides/features/batch-api (taken 2026-12-06): "The Batch API takes up to
# 5,000 requests in one call"; the window is 24 hours (https://openrouter.ai/docs/batch-quickstart).
# No byte limit is documented: the body is cut at 50 MB, ours, so that one create call stays small.
LIMITS = Limits(5_000, 50 * MB, "24h", "/v1/chat/completions")


def _body(
    model: str, temperature: float | None, max_tokens: int | None, effort: str | None, reasoning: bool | None
) -> dict[str, Any]:
    """`max_tokens` and the temperature, without OpenAI's `n`: OpenRouter's chat request has no such
    field (its official SDK's `ChatRequest`, 1.3.84, generated from its API reference; the
    simulated routes check each body against it)."""
    fields = MAX_TOKENS.body(model, temperature, max_tokens, effort, reasoning)
    fields.pop("n", None)
    return fields


DIALECT = Dialect("openrouter", _body, sent_settings)


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.openai.chat import OpenAIChat  # OpenRouter's chat completions are OpenAI's shape
    from lexpilot_batch.providers.openrouter.batch import OpenRouterBatchBackend

    return OpenRouterBatchBackend, OpenAIChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    # Its chat completions take OpenAI's body and extensions of their own (an OpenAI-compatible endpoint).
    return contract.problems(body, first_party=first_party, reasoning=reasoning) + pin_problems(body)


def pin_problems(body: Mapping[str, Any]) -> list[Problem]:
    """The model's underlying provider, pinned by a model argument (`--model-arg
    'openrouter/AUTHOR/MODEL:provider={"only": ["deepinfra"]}'`): OpenRouter's provider routing
    object (https://openrouter.ai/docs/guides/routing/provider-selection), of which a batch takes
    only `only` ("Only `provider.only` is supported", https://openrouter.ai/docs/batch-quickstart,
    taken 2026-12-06). A batch runs on one provider; `openrouter.batch` sends the pin as the batch's."""
    if "provider" not in body:
        return []
    pin = body["provider"]
    if not isinstance(pin, dict) or set(pin) != {"only"}:
        why = 'a batch takes only {"only": [provider slugs]} of OpenRouter\'s provider routing (its batch quickstart)'
        return [Problem("provider", why, UNSUPPORTED)]
    only = pin["only"]
    if not isinstance(only, list) or not only or not all(isinstance(p, str) and p.strip() for p in only):
        return [Problem("provider.only", 'must be a non-empty list of provider slugs, e.g. ["deepinfra"]', TYPE)]
    return []


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=chat_sample,
    load=_load,
    dialect=DIALECT,
    read_results=lambda tag: results.result,
    simulated_native=True,
)

PROVIDERS = (
    Provider(
        "openrouter",
        "OpenRouter Batch API",
        NAME,
        "https://openrouter.ai/api/v1",  # the API reference's server (its OpenAPI `servers`)
        "OPENROUTER_BASE_URL",
        "OPENROUTER_API_KEY",
        limits=LIMITS,
        hosts=("openrouter.ai",),
    ),
)
