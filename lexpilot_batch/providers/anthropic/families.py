"""The rows of `anthropic`'s model families (`bodies.families`), each with its source: what each family of
its models takes beyond the API's request types. The first row whose pattern matches a model's
name (as sent, dated snapshots included) is the model's.
"""

from __future__ import annotations

from functools import lru_cache

from lexpilot_batch.providers.bodies.families import DATED, Family, first_family

ANTHROPIC = "anthropic"

# Sources, cited by the rows (and quoted by the contract's refusals); docs/providers.md tells more.
ANTHROPIC_MODELS = "Anthropic models overview, 'Max output'"
ANTHROPIC_THINKING = "anthropic SDK `ThinkingConfigEnabledParam` and the extended thinking guide"
ANTHROPIC_TEMPERATURE = (
    "installed anthropic SDK (no temperature, top_p, top_k: not sent by default) against the public Messages API "
    "reference (temperature 0-1: checked when asked for)"
)

FAMILIES: tuple[Family, ...] = (
    Family(
        ANTHROPIC,
        "Claude 3 Haiku",
        rf"claude-3-haiku{DATED}",
        ANTHROPIC_MODELS,
        max_output=4_096,
        thinks=False,
        temperature=(0, 1),
        disputed=("temperature", "top_p", "top_k"),
        sources=(ANTHROPIC_TEMPERATURE, ANTHROPIC_THINKING),
    ),
    Family(
        ANTHROPIC,
        "Claude 3 Opus and 3.5",
        rf"claude-3-opus{DATED}|claude-3-5-(?:haiku|sonnet)(?:-latest)?{DATED}",
        ANTHROPIC_MODELS,
        max_output=8_192,
        thinks=False,
        temperature=(0, 1),
        disputed=("temperature", "top_p", "top_k"),
        sources=(ANTHROPIC_TEMPERATURE, ANTHROPIC_THINKING),
    ),
    Family(
        ANTHROPIC,
        "Claude Opus 4 and 4.1",
        rf"claude-opus-4(?:-[01])?{DATED}|claude-4-opus{DATED}",
        ANTHROPIC_MODELS,
        max_output=32_000,
        thinking_budget=(1_024, 32_000),
        temperature=(0, 1),
        disputed=("temperature", "top_p", "top_k"),
        sources=(ANTHROPIC_TEMPERATURE, ANTHROPIC_THINKING),
    ),
    Family(
        ANTHROPIC,
        "Claude 3.7 Sonnet, Sonnet 4 and 4.5, Haiku 4.5, Opus 4.5",
        rf"claude-3-7-sonnet(?:-latest)?{DATED}|claude-(?:sonnet-4(?:-5)?|haiku-4-5|opus-4-5){DATED}"
        rf"|claude-4-sonnet{DATED}",
        ANTHROPIC_MODELS,
        max_output=64_000,
        thinking_budget=(1_024, 64_000),
        temperature=(0, 1),
        disputed=("temperature", "top_p", "top_k"),
        sources=(ANTHROPIC_TEMPERATURE, ANTHROPIC_THINKING),
    ),
    Family(
        ANTHROPIC,
        "other Claude models",
        r"claude-.*",
        ANTHROPIC_MODELS,
        # The largest output any Claude model documents (Opus 4.6 and later, Sonnet 4.6): 128,000.
        max_output=128_000,
        thinking_budget=(1_024, 128_000),
        temperature=(0, 1),
        disputed=("temperature", "top_p", "top_k"),
        sources=(ANTHROPIC_TEMPERATURE, ANTHROPIC_THINKING),
        catch_all=True,
    ),
)


@lru_cache(maxsize=1024)
def family_of(model: str) -> Family | None:
    """The first row of `FAMILIES` whose pattern matches `model`, or None."""
    return first_family(FAMILIES, model)
