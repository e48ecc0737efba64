"""Per-model-family rules, in one table: what each family of models takes beyond its API's types.

An API's request types (`bodies.schema`, from its SDK) say which fields exist and of what type; they do
not say that `o4-mini` refuses `reasoning_effort: "none"`, that Claude Haiku 3 writes at most 4,096
tokens or that Gemini 2.5 Pro cannot turn its thinking off. Those rules are in each API's
folder (`openai.families`, `anthropic.families`, `google.families`), a row per family, each with
its source; the first row whose pattern matches the model's name (as sent, dated
snapshots included) is the model's. The contract checks (`bodies.contract`, each API's `contract`) read
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
from collections.abc import Iterable
from dataclasses import dataclass, field

# A dated snapshot's suffix, which a row's pattern takes after the family's name.
DATED = r"(?:-\d{4}-\d{2}-\d{2}|-\d{8})?"


@dataclass(frozen=True)
class Family:
    """One family of models and the rules its requests keep (`None`: no rule; `()`: not taken)."""

    api: str  # the API shape whose requests the rules are about (`spec.ApiSpec.name`)
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

    catch_all: bool = False  # the row of every other model of its lab: no name is a slip of a known one

    def matches(self, model: str) -> bool:
        return re.fullmatch(self.pattern, model, flags=re.IGNORECASE) is not None

    def cited(self) -> str:
        return "; ".join((self.source, *self.sources))


def first_family(families: Iterable[Family], model: str) -> Family | None:
    """The first of `families` whose pattern matches `model`, or None."""
    return next((f for f in families if f.matches(model)), None)
