"""The rows of `openai`'s model families (`bodies.families`), each with its source: what each family of
its models takes beyond the API's request types. The first row whose pattern matches a model's
name (as sent, dated snapshots included) is the model's.
"""

from __future__ import annotations

from functools import lru_cache

from lexpilot_batch.providers.bodies.families import DATED, Family, first_family

OPENAI = "openai"

# Sources, cited by the rows (and quoted by the contract's refusals); docs/providers.md tells more.
OPENAI_EFFORT = "OpenAI API reference, Chat Completions `reasoning_effort`"
OPENAI_REASONING = "OpenAI reasoning guide: max_completion_tokens, no temperature or top_p but 1"
OPENAI_O_SERIES = "openai-openapi `ReasoningEffort` (o-series: low, medium, high)"
OPENAI_GPT5 = "OpenAI GPT-5 model page"
OPENAI_MODELS = "OpenAI model pages, 'Max output tokens'"
OPENAI_SAMPLING = "openai-openapi `CreateChatCompletionRequest` (temperature 0-2, top_p 0-1)"
OPENAI_NOT_CHAT = "OpenAI API: not a chat model (404 on /v1/chat/completions)"

_O_EFFORTS = ("low", "medium", "high")
_GPT5_EFFORTS = ("minimal", "low", "medium", "high")
_GPT51_EFFORTS = ("none", "low", "medium", "high")
# After gpt-5.1-codex-max: xhigh too; `max` is in the installed SDK's values, for the models that take it.
_LATER_EFFORTS = ("none", "low", "medium", "high", "xhigh", "max")

FAMILIES: tuple[Family, ...] = (
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
        rf"gpt-5-pro{DATED}",
        OPENAI_EFFORT,
        reasoning=True,
        efforts=("high",),
        max_output=272_000,
        sources=(OPENAI_REASONING, OPENAI_MODELS),
    ),
    Family(
        OPENAI,
        "gpt-5.1-codex-max",
        rf"gpt-5\.1-codex-max{DATED}",
        OPENAI_EFFORT,
        reasoning=True,
        efforts=("none", "low", "medium", "high", "xhigh"),
        max_output=128_000,
        sources=(OPENAI_REASONING,),
    ),
    Family(
        OPENAI,
        "gpt-5.1",
        rf"gpt-5\.1(?!-chat)(?:-[a-z]+)*{DATED}",
        OPENAI_EFFORT,
        reasoning=True,
        efforts=_GPT51_EFFORTS,
        max_output=128_000,
        sources=(OPENAI_REASONING, OPENAI_MODELS),
    ),
    Family(
        OPENAI,
        "gpt-5.2 and later",
        rf"gpt-(?:5\.(?:[2-9]|\d\d+)|[6-9](?:\.\d+)?)(?!-chat)(?:-[a-z]+)*{DATED}",
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
        rf"gpt-5(?:-mini|-nano|-codex)?{DATED}",
        OPENAI_EFFORT,
        reasoning=True,
        efforts=_GPT5_EFFORTS,
        max_output=128_000,
        sources=(OPENAI_GPT5, OPENAI_REASONING),
    ),
    Family(
        OPENAI,
        "o1-mini and o1-preview",
        rf"o1-(?:mini|preview){DATED}",
        OPENAI_O_SERIES,
        reasoning=True,
        efforts=(),
        max_output=65_536,
        sources=(OPENAI_REASONING, OPENAI_MODELS),
    ),
    Family(
        OPENAI,
        "o-series",
        rf"o[1-9](?:-mini|-pro|-deep-research)?{DATED}|o4-mini-deep-research{DATED}|codex-mini(?:-latest)?",
        OPENAI_O_SERIES,
        reasoning=True,
        efforts=_O_EFFORTS,
        max_output=100_000,
        sources=(OPENAI_EFFORT, OPENAI_REASONING, OPENAI_MODELS),
    ),
    Family(
        OPENAI,
        "gpt-4.1",
        rf"gpt-4\.1(?:-mini|-nano)?{DATED}",
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
        rf"(?:chatgpt-)?gpt-4o(?:-mini)?(?:-latest)?{DATED}",
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
def family_of(model: str) -> Family | None:
    """The first row of `FAMILIES` whose pattern matches `model`, or None."""
    return first_family(FAMILIES, model)
