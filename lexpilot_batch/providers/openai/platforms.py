"""The rules of an OpenAI-compatible platform that keeps a dialect of its own: what its chat
completions take beyond, or instead of, OpenAI's. Each platform declares its `Platform` in its own
file (`providers/platforms/<name>.py`), each rule from the platform's documentation or official SDK.

A body is first held to an OpenAI-compatible endpoint's contract (`contract.problems`: OpenAI's
types and ranges for the fields OpenAI knows, misspellings of them refused), but for the fields a
platform defines itself, which keep the platform's rules instead: a closed field list (`fields`),
temperature, `top_p` and `n` ranges, a `thinking` object's types, booleans, integers, numbers and
fields of a few values, and sampling fields it fixes for some of its models (`Fixed`).

None of the platforms' SDKs is a dependency: the rules are written in the platforms' files, and
tests check compiled lines against the SDKs where they are installed
(`tests/providers/platforms/test_lines.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lexpilot_batch.providers.bodies.schema import (
    RANGE,
    TYPE,
    UNKNOWN,
    UNSUPPORTED,
    Problem,
    integer_in,
    near_miss,
    number_in,
)
from lexpilot_batch.providers.openai import contract


@dataclass(frozen=True)
class Fixed:
    """Sampling fields a platform fixes for some of its models: refused when set (`n` but 1)."""

    pattern: str  # over the model's name (`fullmatch`, any case)
    name: str
    fields: tuple[str, ...]


@dataclass(frozen=True)
class Platform:
    """What one platform's chat completions take beyond OpenAI's (module docstring)."""

    title: str
    source: str
    fields: frozenset[str] | None = None  # the only body fields it takes; None: OpenAI's and its own
    temperature: tuple[float, float] = (0, 2)
    top_p: tuple[float, float] = (0, 1)
    n: tuple[int, int] | None = None
    thinking_types: tuple[str, ...] = ()  # `thinking: {"type": ...}` values; () : no such object
    booleans: tuple[str, ...] = ()  # fields that must be true or false (`enable_thinking`)
    integers: dict[str, tuple[int, int]] = field(default_factory=dict)  # integer fields and their range
    numbers: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # fields of a few values
    fixed: tuple[Fixed, ...] = ()

    def check(self, model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Problem]:
        """Its contract (`spec.Provider.contract`): `problems`."""
        return problems(self, model, body)

    def own(self) -> frozenset[str]:
        """The fields whose rules are the platform's, not OpenAI's."""
        names = {"temperature", "top_p", "n", *self.booleans, *self.integers, *self.numbers, *self.choices}
        return frozenset(names | ({"thinking"} if self.thinking_types else set()))


def problems(platform: Platform, model: str, body: Mapping[str, Any]) -> list[Problem]:
    """What a platform's contract refuses in a chat-completions body (module docstring)."""
    cite = f" ({platform.source})"
    own = platform.own()
    out = [
        p
        for p in contract.problems({k: v for k, v in body.items() if k not in own}, first_party=False)
        if not (platform.fields is not None and p.kind == UNKNOWN)
    ]
    if platform.fields is not None:
        for key in body:
            if key not in platform.fields:
                guess = near_miss(key, platform.fields)
                hint = f"; did you mean {guess}?" if guess else ""
                out.append(Problem(key, f"not a field of {platform.title}'s chat completions{hint}{cite}", UNKNOWN))
    for name, (low, high) in (("temperature", platform.temperature), ("top_p", platform.top_p)):
        value = body.get(name)
        if value is not None and not number_in(value, low, high):
            out.append(Problem(name, f"{platform.title} takes {low} to {high}, not {value!r}{cite}", RANGE))
    n = body.get("n")
    if n is not None and not integer_in(n, *(platform.n or (1, 128))):
        low, high = platform.n or (1, 128)
        span = f"only {low}" if low == high else f"{low} to {high}"
        out.append(Problem("n", f"{platform.title} takes {span}, not {n!r}{cite}", RANGE))
    out += _own_fields(platform, body, cite)
    for fixed in platform.fixed:
        if re.fullmatch(fixed.pattern, model, flags=re.IGNORECASE):
            for name in fixed.fields:
                if name in body and not (name == "n" and body[name] == 1):
                    reason = f"{fixed.name} take no {name}: {platform.title} fixes it; remove it with =null{cite}"
                    out.append(Problem(name, reason, UNSUPPORTED))
    return out


def _own_fields(platform: Platform, body: Mapping[str, Any], cite: str) -> list[Problem]:
    out: list[Problem] = []
    for name in platform.booleans:
        if name in body and not isinstance(body[name], bool):
            out.append(Problem(name, f"must be true or false, not {body[name]!r}{cite}", TYPE))
    for name, (low, high) in platform.integers.items():
        if name in body and not integer_in(body[name], low, high):
            out.append(Problem(name, f"must be an integer from {low:,} to {high:,}, not {body[name]!r}{cite}", RANGE))
    for name, (lo, hi) in platform.numbers.items():
        if name in body and not number_in(body[name], lo, hi):
            out.append(Problem(name, f"must be a number of at most {hi}, not {body[name]!r}{cite}", RANGE))
    for name, values in platform.choices.items():
        if name in body and body[name] is not None and body[name] not in values:
            out.append(Problem(name, f"must be one of {', '.join(values)}, not {body[name]!r}{cite}", RANGE))
    if platform.thinking_types and "thinking" in body:
        thinking = body["thinking"]
        kinds = " or ".join(repr(t) for t in platform.thinking_types)
        if not isinstance(thinking, Mapping) or thinking.get("type") not in platform.thinking_types:
            out.append(Problem("thinking", f'must be {{"type": {kinds}}}, not {thinking!r}{cite}', TYPE))
    return out
