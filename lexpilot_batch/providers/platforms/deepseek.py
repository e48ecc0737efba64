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
    # The `model` its chat completions take: `deepseek-chat` or `deepseek-reasoner` in its API
    # reference (https://api-docs.deepseek.com/api/create-chat-completion); `deepseek-flash` and
    # `deepseek-v4-pro` on its pricing page, which still accepts the retired `deepseek-v4-flash` and
    # `deepseek-v4-flash-vision-exp` (https://api-docs.deepseek.com/quick_start/pricing).
    catalogue=Catalogue(
        "api-docs.deepseek.com/api/create-chat-completion and /quick_start/pricing",
        "2026-12-06",
        frozenset(
            {
                "deepseek-chat",
                "deepseek-reasoner",
                "deepseek-flash",
                "deepseek-v4-pro",
                "deepseek-v4-flash",
                "deepseek-v4-flash-vision-exp",
            }
        ),
    ),
)
