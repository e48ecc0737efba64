"""Per-model-family rules, in one table: what each family of models takes beyond its API's types.

An API's request types (`schema`, from its SDK) say which fields exist and of what type; they do
not say that `o4-mini` refuses `reasoning_effort: "none"`, that Claude Haiku 3 writes at most 4,096
tokens or that Gemini 2.5 Pro cannot turn its thinking off. Those rules are here, a row per
family, each with its source; the first row whose pattern matches the model's name (as sent, dated
snapshots included) is the model's. The contract checks (`contracts`, each API's `contract`) read
them at compile time and in the simulated provider alike.

A field's `None` means "no rule beyond the API's types"; an empty tuple means "not taken".

Where the sources disagree, the installed SDK's types win and the row says so (`disputed`): the
installed `anthropic` SDK's Messages types have no `temperature`, `top_p` or `top_k`, while the
public API reference documents `temperature` between 0 and 1. So a Claude request carries none of
them by default, and one a user asks for (`--model-arg MODEL:temperature=0.5`) is checked against
the public reference's range instead of being refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from lexpilot_batch.providers.apis import ANTHROPIC, GOOGLE, OPENAI

_DATED = r"(?:-\d{4}-\d{2}-\d{2}|-\d{8})?"

# Sources, cited by the rows (and quoted by the contract's refusals); docs/providers.md tells more.
OPENAI_EFFORT = "OpenAI API reference, Chat Completions `reasoning_effort`"
OPENAI_REASONING = "OpenAI reasoning guide: max_completion_tokens, no temperature or top_p but 1"
OPENAI_O_SERIES = "openai-openapi `ReasoningEffort` (o-series: low, medium, high)"
OPENAI_GPT5 = "OpenAI GPT-5 model page"
OPENAI_MODELS = "OpenAI model pages, 'Max output tokens'"
OPENAI_SAMPLING = "openai-openapi `CreateChatCompletionRequest` (temperature 0-2, top_p 0-1)"
OPENAI_NOT_CHAT = "OpenAI API: not a chat model (404 on /v1/chat/completions)"
ANTHROPIC_MODELS = "Anthropic models overview, 'Max output'"
ANTHROPIC_THINKING = "anthropic SDK `ThinkingConfigEnabledParam` and the extended thinking guide"
ANTHROPIC_TEMPERATURE = (
    "installed anthropic SDK (no temperature, top_p, top_k: not sent by default) against the public Messages API "
    "reference (temperature 0-1: checked when asked for)"
)
GEMINI_THINKING = "Gemini API thinking guide (thinkingBudget ranges, thinkingLevel)"
GEMINI_MODELS = "Gemini model pages (output token limit; temperature 0-2, topP 0-1)"


@dataclass(frozen=True)
class Family:
    """One family of models and the rules its requests keep (`None`: no rule; `()`: not taken)."""

    api: str  # the API shape whose requests the rules are about (`apis`)
    name: str  # what messages call the family
    pattern: str  # a regular expression over the model's name as sent (`fullmatch`)
    source: str  # where the rules come from
    chat: bool = True  # False: not a chat model at all
    reasoning: bool = False  # OpenAI: no max_tokens, no temperature or top_p but 1; takes reasoning_effort
    efforts: tuple[str, ...] | None = None  # OpenAI `reasoning_effort` / Gemini `thinkingLevel` values taken
    temperature: tuple[float, float] | None = None
    top_p: tuple[float, float] | None = None
    max_output: int | None = None  # output tokens: max_tokens, max_completion_tokens, maxOutputTokens
    thinks: bool = True  # False: no thinking configuration taken (Anthropic `thinking`, Gemini `thinkingConfig`)
    thinking_budget: tuple[int, int] | None = None  # Anthropic budget_tokens / Gemini thinkingBudget range
    thinking_off: bool = True  # Gemini: thinkingBudget 0 (thinking off) taken
    disputed: tuple[str, ...] = ()  # fields the installed SDK lacks that a public reference documents
    sources: tuple[str, ...] = field(default=())  # further sources of some of its rules

    def matches(self, model: str) -> bool:
        return re.fullmatch(self.pattern, model, flags=re.IGNORECASE) is not None

    def cited(self) -> str:
        return "; ".join((self.source, *self.sources))


_O_EFFORTS = ("low", "medium", "high")
_GPT5_EFFORTS = ("minimal", "low", "medium", "high")
_GPT51_EFFORTS = ("none", "low", "medium", "high")
# After gpt-5.1-codex-max: xhigh too; `max` is in the installed SDK's values, for the models that take it.
_LATER_EFFORTS = ("none", "low", "medium", "high", "xhigh", "max")

FAMILIES: tuple[Family, ...] = (
    # --- OpenAI ------------------------------------------------------------------------------------
    Family(
        OPENAI,
        "OpenAI non-chat models",
        r"(?:text-embedding|whisper|tts|dall-e|gpt-image|omni-moderation|text-moderation|davinci|babbage)(?:[-.].*)?",
        OPENAI_NOT_CHAT,
        chat=False,
    ),
    Family(
        OPENAI,
        "gpt-5-pro",
        rf"gpt-5-pro{_DATED}",
        OPENAI_EFFORT,
        reasoning=True,
        efforts=("high",),
        max_output=272_000,
        sources=(OPENAI_REASONING, OPENAI_MODELS),
    ),
    Family(
        OPENAI,
        "gpt-5.1-codex-max",
        rf"gpt-5\.1-codex-max{_DATED}",
        OPENAI_EFFORT,
        reasoning=True,
        efforts=("none", "low", "medium", "high", "xhigh"),
        max_output=128_000,
        sources=(OPENAI_REASONING,),
    ),
    Family(
        OPENAI,
        "gpt-5.1",
        rf"gpt-5\.1(?!-chat)(?:-[a-z]+)*{_DATED}",
        OPENAI_EFFORT,
        reasoning=True,
        efforts=_GPT51_EFFORTS,
        max_output=128_000,
        sources=(OPENAI_REASONING, OPENAI_MODELS),
    ),
    Family(
        OPENAI,
        "gpt-5.2 and later",
        rf"gpt-(?:5\.(?:[2-9]|\d\d+)|[6-9](?:\.\d+)?)(?!-chat)(?:-[a-z]+)*{_DATED}",
        OPENAI_EFFORT,
        reasoning=True,
        efforts=_LATER_EFFORTS,
        sources=(OPENAI_REASONING,),
    ),
    Family(
        OPENAI,
        "gpt-5 chat",
        r"gpt-5(?:\.\d+)?-chat(?:-latest)?",
        OPENAI_MODELS,
        efforts=(),
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=16_384,
        sources=(OPENAI_SAMPLING,),
    ),
    Family(
        OPENAI,
        "gpt-5",
        rf"gpt-5(?:-mini|-nano|-codex)?{_DATED}",
        OPENAI_EFFORT,
        reasoning=True,
        efforts=_GPT5_EFFORTS,
        max_output=128_000,
        sources=(OPENAI_GPT5, OPENAI_REASONING),
    ),
    Family(
        OPENAI,
        "o1-mini and o1-preview",
        rf"o1-(?:mini|preview){_DATED}",
        OPENAI_O_SERIES,
        reasoning=True,
        efforts=(),
        max_output=65_536,
        sources=(OPENAI_REASONING, OPENAI_MODELS),
    ),
    Family(
        OPENAI,
        "o-series",
        rf"o[1-9](?:-mini|-pro|-deep-research)?{_DATED}|o4-mini-deep-research{_DATED}|codex-mini(?:-latest)?",
        OPENAI_O_SERIES,
        reasoning=True,
        efforts=_O_EFFORTS,
        max_output=100_000,
        sources=(OPENAI_EFFORT, OPENAI_REASONING, OPENAI_MODELS),
    ),
    Family(
        OPENAI,
        "gpt-4.1",
        rf"gpt-4\.1(?:-mini|-nano)?{_DATED}",
        OPENAI_MODELS,
        efforts=(),
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=32_768,
        sources=(OPENAI_SAMPLING,),
    ),
    Family(
        OPENAI,
        "gpt-4o",
        rf"(?:chatgpt-)?gpt-4o(?:-mini)?(?:-latest)?{_DATED}",
        OPENAI_MODELS,
        efforts=(),
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=16_384,
        sources=(OPENAI_SAMPLING,),
    ),
    Family(
        OPENAI,
        "gpt-4 and gpt-3.5",
        r"gpt-(?:4|4-turbo|3\.5-turbo)(?:-\d{4})?(?:-preview)?(?:-\d{4}-\d{2}-\d{2})?(?:-16k)?",
        OPENAI_MODELS,
        efforts=(),
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=4_096,
        sources=(OPENAI_SAMPLING,),
    ),
    # --- Anthropic ---------------------------------------------------------------------------------
    Family(
        ANTHROPIC,
        "Claude 3 Haiku",
        rf"claude-3-haiku{_DATED}",
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
        rf"claude-3-opus{_DATED}|claude-3-5-(?:haiku|sonnet)(?:-latest)?{_DATED}",
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
        rf"claude-opus-4(?:-[01])?{_DATED}|claude-4-opus{_DATED}",
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
        rf"claude-3-7-sonnet(?:-latest)?{_DATED}|claude-(?:sonnet-4(?:-5)?|haiku-4-5|opus-4-5){_DATED}"
        rf"|claude-4-sonnet{_DATED}",
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
    ),
    # --- Google ------------------------------------------------------------------------------------
    Family(
        GOOGLE,
        "Gemini 2.5 Pro",
        r"gemini-2\.5-pro(?:-[a-z0-9-]+)?",
        GEMINI_THINKING,
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=65_536,
        thinking_budget=(128, 32_768),
        thinking_off=False,
        efforts=(),
        sources=(GEMINI_MODELS,),
    ),
    Family(
        GOOGLE,
        "Gemini 2.5 Flash-Lite",
        r"gemini-2\.5-flash-lite(?:-[a-z0-9-]+)?",
        GEMINI_THINKING,
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=65_536,
        thinking_budget=(512, 24_576),
        efforts=(),
        sources=(GEMINI_MODELS,),
    ),
    Family(
        GOOGLE,
        "Gemini 2.5 Flash",
        r"gemini-2\.5-flash(?:-[a-z0-9-]+)?",
        GEMINI_THINKING,
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=65_536,
        thinking_budget=(0, 24_576),
        efforts=(),
        sources=(GEMINI_MODELS,),
    ),
    Family(
        GOOGLE,
        "Gemini 2.0",
        r"gemini-2\.0-.*",
        GEMINI_MODELS,
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=8_192,
        thinks=False,
        sources=(GEMINI_THINKING,),
    ),
    Family(
        GOOGLE,
        "Gemini 3 Flash",
        r"gemini-3(?:\.\d+)?-flash(?:-[a-z0-9-]+)?",
        GEMINI_THINKING,
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=65_536,
        efforts=("minimal", "low", "medium", "high"),
        sources=(GEMINI_MODELS,),
    ),
    Family(
        GOOGLE,
        "Gemini 3",
        r"gemini-3(?:\.\d+)?-.*",
        GEMINI_THINKING,
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=65_536,
        efforts=("low", "high"),
        sources=(GEMINI_MODELS,),
    ),
    Family(
        GOOGLE,
        "other Gemini models",
        r"gemini-.*",
        GEMINI_MODELS,
        temperature=(0, 2),
        top_p=(0, 1),
        max_output=65_536,
        # The widest thinkingBudget any Gemini model documents (2.5 Pro's), and -1 (dynamic).
        thinking_budget=(0, 32_768),
        sources=(GEMINI_THINKING,),
    ),
)

# What an OpenAI-compatible endpoint of unknown make (a bare name, `openai-api/<service>/`, DashScope,
# DeepSeek) is held to: the OpenAI ranges of the fields it shares with OpenAI.
COMPATIBLE = Family(OPENAI, "an OpenAI-compatible model", r".*", OPENAI_SAMPLING, temperature=(0, 2), top_p=(0, 1))
# An OpenAI (or Azure) model no row names: a chat model, or a reasoning one when its model list says
# so (`reasoning = true`: an Azure deployment is named by its owner).
OPENAI_CHAT = Family(
    OPENAI, "an OpenAI chat model", r".*", OPENAI_SAMPLING, efforts=(), temperature=(0, 2), top_p=(0, 1)
)
OPENAI_THINKING = Family(OPENAI, "an OpenAI reasoning model", r".*", OPENAI_REASONING, reasoning=True)


@lru_cache(maxsize=1024)
def family_of(api: str, model: str) -> Family | None:
    """The first row of `FAMILIES` of `api` whose pattern matches `model`, or None."""
    return next((f for f in FAMILIES if f.api == api and f.matches(model)), None)


def api_of_name(model: str) -> str | None:
    """The API whose model families name `model` (`claude-...` is Anthropic's), or None: how the
    simulated provider knows which contract a request on its OpenAI routes stands for."""
    return next((f.api for f in FAMILIES if f.matches(model) and f.api != OPENAI), None) or (
        OPENAI if family_of(OPENAI, model) else None
    )
