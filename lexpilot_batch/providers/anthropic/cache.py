"""How Claude requests are laid out for Anthropic's prompt cache (`cache_layout`): a `cache_control`
breakpoint after the prompt's shared part, set only where that part can reach the model's minimum
cacheable length (a marker on a shorter prefix is ignored by Anthropic, without error or charge).
"""

from __future__ import annotations

import re

from lexpilot_batch.providers.cache_layout import breakpoint_layout

# Anthropic's "Minimum cacheable prompt length" per model (https://docs.claude.com/en/docs/build-with-claude/prompt-caching,
# as mirrored 2026 by https://docs.orq.ai/docs/proxy/prompt-caching), most specific first.
ANTHROPIC_MINIMUM: tuple[tuple[str, int], ...] = (
    (r"claude-(opus-4-[5-9]|haiku-4-5)", 4096),
    (r"claude-sonnet-4-6", 2048),
    (r"claude-(3-5-haiku|3-haiku|haiku-3)", 2048),
    (r".*", 1024),
)


def layout(model: str) -> str:
    """The breakpoint layout of a Claude model's requests (`model` as sent)."""
    return breakpoint_layout(next(n for pattern, n in ANTHROPIC_MINIMUM if re.match(pattern, model)))
