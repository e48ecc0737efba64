"""Groq's Batch API, OpenAI's shape: the `groq` SDK's `batches.create` (`/v1/chat/completions`, a
window of `24h` to `7d`, metadata) and `files.create` (purpose `batch`, at most 100 MB; no request
count documented). Its chat completions take only Groq's own fields (an unknown one is refused:
Groq answers 400 "property ... is unsupported"), `n` 1, and its own `reasoning_effort`,
`service_tier` and `reasoning_format` values: the `groq` SDK's
`chat.completion_create_params.CompletionCreateParams` (1.7.0).
"""

from __future__ import annotations

from lexpilot_batch.providers.openai.platforms import Platform
from lexpilot_batch.providers.spec import MB, Catalogue, Limits, Provider

SOURCE = "the groq SDK's CompletionCreateParams"
# The fields of the `groq` SDK's `CompletionCreateParams` (1.7.0), the only ones Groq takes.
FIELDS = frozenset(
    {
        "messages",
        "model",
        "citation_options",
        "compound_custom",
        "disable_tool_validation",
        "documents",
        "exclude_domains",
        "frequency_penalty",
        "function_call",
        "functions",
        "include_domains",
        "include_reasoning",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "n",
        "parallel_tool_calls",
        "presence_penalty",
        "reasoning_effort",
        "reasoning_format",
        "response_format",
        "search_settings",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
    }
)

RULES = Platform(
    "Groq",
    SOURCE,
    fields=FIELDS,
    n=(1, 1),
    choices={
        "reasoning_effort": ("none", "default", "low", "medium", "high"),
        "service_tier": ("auto", "on_demand", "flex", "performance"),
        "reasoning_format": ("hidden", "raw", "parsed"),
    },
)

PROVIDER = Provider(
    "groq",
    "Groq Batch API",
    "openai",
    "https://api.groq.com/openai/v1",
    "GROQ_BASE_URL",
    "GROQ_API_KEY",
    limits=Limits(50_000, 100 * MB, "24h", "/v1/chat/completions"),
    hosts=("api.groq.com",),
    contract=RULES.check,
    # Its chat completions' model ids: the `groq` SDK's `CompletionCreateParams.model` literal.
    catalogue=Catalogue(
        "the groq SDK's CompletionCreateParams.model literal",
        "installed",
        sdk=("groq.types.chat.completion_create_params", "CompletionCreateParams", "model"),
    ),
)
