"""The contract of Gemini's generateContent (and of a Batch Mode line's `request`): what a body
(`{"contents", "generationConfig", ...}`) may hold, checked before a line is written and by the
simulated provider.

- **Top-level fields**: those the `google-genai` SDK writes into a generateContent request
  (`models._GenerateContentParameters_to_mldev` and `_GenerateContentConfig_to_mldev`: `contents`,
  `systemInstruction`, `generationConfig`, `safetySettings`, `tools`, `toolConfig`,
  `cachedContent`, `labels`, `serviceTier`, `store`); any other is refused, as the API answers 400
  `INVALID_ARGUMENT` "Unknown name".
- **`generationConfig`** and each of **`contents`**: the installed SDK's pydantic models
  (`types.GenerationConfig`, `types.Content`: closed, camelCase names, strict JSON types), so
  `generationConfig.max_tokens` or a temperature given as text is refused. Without the optional
  extra, only the fields above and the family's rules are checked.
- **The model family's rules** (`families`): temperature and topP ranges, the output limit
  (`maxOutputTokens`), whether it thinks, the range of `thinkingBudget` (-1: dynamic; 0: off, where
  the family can turn thinking off), and its `thinkingLevel` values (Gemini 3).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from lexpilot_batch.providers.bodies.families import Family
from lexpilot_batch.providers.bodies.schema import (
    RANGE,
    TYPE,
    UNKNOWN,
    UNSUPPORTED,
    Problem,
    integer_in,
    near_miss,
    number_in,
    problems_of,
)
from lexpilot_batch.providers.google.families import GOOGLE, family_of

_FIELDS = frozenset(
    {
        "contents",
        "systemInstruction",
        "generationConfig",
        "safetySettings",
        "tools",
        "toolConfig",
        "cachedContent",
        "labels",
        "serviceTier",
        "store",
    }
)
_SERVICE_TIERS = ("unspecified", "flex", "standard", "priority")  # google-genai `types.ServiceTier`
_FALLBACK = Family(GOOGLE, "a Gemini model", r".*", "Gemini API reference", temperature=(0, 2), top_p=(0, 1))


@lru_cache(maxsize=1)
def _types() -> Any:
    try:
        from google.genai import types
    except ImportError:
        return None
    return types


def _model_problems(model: Any, value: Any, where: str) -> list[Problem]:
    """A value checked against a pydantic model of the SDK, read as JSON is (strict types)."""
    from pydantic import ValidationError

    try:
        model.model_validate_json(json.dumps(value, ensure_ascii=False), strict=True)
    except ValidationError as exc:
        return [
            Problem(f"{where}.{p.field}" if p.field != "body" else where, p.reason, p.kind)
            for p in problems_of(exc.errors(include_url=False))
        ]
    except (TypeError, ValueError):
        return [Problem(where, "must be JSON", TYPE)]
    return []


def problems(body: Mapping[str, Any], model: str) -> list[Problem]:
    """What Gemini's contract refuses in a generateContent body for `model` (module docstring)."""
    out: list[Problem] = []
    for key in body:
        if key not in _FIELDS:
            guess = near_miss(key, _FIELDS)
            hint = f"; did you mean {guess}?" if guess else ""
            out.append(Problem(key, f"not a field of Gemini's generateContent{hint}", UNKNOWN))
    types = _types()
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        out.append(Problem("contents", "must be a non-empty list of contents", TYPE))
    elif types is not None:
        for i, content in enumerate(contents):
            out.extend(_model_problems(types.Content, content, f"contents.{i}"))
    config = body.get("generationConfig")
    tier = body.get("serviceTier")
    if tier is not None and str(tier).lower() not in _SERVICE_TIERS:
        out.append(Problem("serviceTier", f"must be one of {', '.join(_SERVICE_TIERS)}, not {tier!r}", RANGE))
    if config is None:
        return out
    if not isinstance(config, Mapping):
        return [*out, Problem("generationConfig", "must be a JSON object", TYPE)]
    if types is not None:
        found = _model_problems(types.GenerationConfig, config, "generationConfig")
        if found:
            return [*out, *found]
    family = family_of(model) or _FALLBACK
    return [*out, *family_problems(config, family)]


def family_problems(config: Mapping[str, Any], family: Family) -> list[Problem]:
    """What a Gemini family's rules refuse in a `generationConfig` whose fields have the right types."""
    out: list[Problem] = []
    cite = f" ({family.cited()})"
    for name, allowed in (("temperature", family.temperature), ("topP", family.top_p)):
        value = config.get(name)
        if allowed is not None and value is not None and not number_in(value, *allowed):
            out.append(
                Problem(
                    f"generationConfig.{name}",
                    f"must be between {allowed[0]} and {allowed[1]}, not {value!r}{cite}",
                    RANGE,
                )
            )
    limit = config.get("maxOutputTokens")
    if limit is not None and not integer_in(limit, 1, family.max_output):
        top = f"between 1 and {family.max_output:,}" if family.max_output else "at least 1"
        out.append(
            Problem("generationConfig.maxOutputTokens", f"{family.name} takes {top}, not {limit!r}{cite}", RANGE)
        )
    thinking = config.get("thinkingConfig")
    if not isinstance(thinking, Mapping) or not thinking:
        return out
    if not family.thinks:
        return [*out, Problem("generationConfig.thinkingConfig", f"{family.name} does not think{cite}", UNSUPPORTED)]
    budget = thinking.get("thinkingBudget")
    if budget is not None and budget != -1:
        low, high = family.thinking_budget or (0, None)
        if budget == 0 and not family.thinking_off:
            out.append(
                Problem(
                    "generationConfig.thinkingConfig.thinkingBudget",
                    f"{family.name} cannot turn thinking off (0); it takes {low:,} to {high or 0:,} or -1{cite}",
                    UNSUPPORTED,
                )
            )
        elif budget != 0 and not integer_in(budget, low, high):
            span = f"between {low:,} and {high:,}" if high is not None else f"at least {low:,}"
            out.append(
                Problem(
                    "generationConfig.thinkingConfig.thinkingBudget",
                    f"{family.name} takes a budget {span} (or -1: dynamic), not {budget!r}{cite}",
                    RANGE,
                )
            )
    level = thinking.get("thinkingLevel")
    if level is not None and family.efforts is not None:
        if not family.efforts:
            out.append(
                Problem(
                    "generationConfig.thinkingConfig.thinkingLevel",
                    f"{family.name} takes thinkingBudget, not thinkingLevel{cite}",
                    UNSUPPORTED,
                )
            )
        elif str(level).lower() not in family.efforts:
            takes = ", ".join(family.efforts)
            out.append(
                Problem(
                    "generationConfig.thinkingConfig.thinkingLevel",
                    f"{family.name} takes {takes}; not {level!r}{cite}",
                    RANGE,
                )
            )
    return out
