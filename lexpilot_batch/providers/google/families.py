"""The rows of `google`'s model families (`bodies.families`), each with its source: what each family of
its models takes beyond the API's request types. The first row whose pattern matches a model's
name (as sent, dated snapshots included) is the model's.
"""

from __future__ import annotations

from functools import lru_cache

from lexpilot_batch.providers.bodies.families import Family, first_family

GOOGLE = "google"

# Sources, cited by the rows (and quoted by the contract's refusals); docs/providers.md tells more.
GEMINI_THINKING = "Gemini API thinking guide (thinkingBudget ranges, thinkingLevel)"
GEMINI_MODELS = "Gemini model pages (output token limit; temperature 0-2, topP 0-1)"

FAMILIES: tuple[Family, ...] = (
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
        catch_all=True,
    ),
)


@lru_cache(maxsize=1024)
def family_of(model: str) -> Family | None:
    """The first row of `FAMILIES` whose pattern matches `model`, or None."""
    return first_family(FAMILIES, model)
