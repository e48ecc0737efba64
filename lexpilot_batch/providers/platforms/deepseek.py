"""DeepSeek: OpenAI-compatible chat completions and no Batch API, so its requests go one at a time
(the `sync` backend); its limits are a generic endpoint's."""

from __future__ import annotations

from lexpilot_batch.providers.spec import Catalogue, Provider

PROVIDER = Provider(
    "deepseek",
    "DeepSeek",
    "openai",
    "https://api.deepseek.com/v1",
    "DEEPSEEK_BASE_URL",
    "DEEPSEEK_API_KEY",
    backend="sync",
    batch_api=False,
    # The `model` its chat completions take: `deepseek-chat` or `deepseek-reasoner`
    # (https://api-docs.deepseek.com/api/create-chat-completion).
    catalogue=Catalogue(
        "api-docs.deepseek.com/api/create-chat-completion",
        "2026-12-05",
        frozenset({"deepseek-chat", "deepseek-reasoner"}),
    ),
)
