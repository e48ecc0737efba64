"""Validation of model outputs: the judges' small JSON answers and the generated texts.

A judge's thinking (`reasoning_content`, or a leading `<think>...</think>` block) is never parsed
as its answer. Anything that does not validate raises `MalformedOutput`, which the engine turns
into a retry and, after the last attempt, a failed thread; nothing malformed is ever scored.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from lexpilot_batch.data import Verdict

LcaLabel = Literal["judgment", "clarification"]
DcgDecision = Literal["是", "否"]

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class MalformedOutput(ValueError):
    """The output cannot be used; the message says why (it is stored as the failure reason)."""


class _LcaAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    label: LcaLabel


class _DcgAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    decision: DcgDecision


class _VerdictsAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    verdicts: list[Verdict]


def strip_reasoning(text: str) -> str:
    """The answer without a `<think>...</think>` block (closed or left open at the start).

    A closing tag without its opening one is also a thought: chat templates that force thinking
    put `<think>` in the prompt, so the output begins mid-thought and only what follows the last
    `</think>` is the answer.
    """
    text = _THINK.sub("", text)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    if text.lstrip().startswith("<think>"):
        # An unclosed block means the model never got to its answer.
        return ""
    return text.strip()


def _json_object(text: str) -> dict:
    answer = strip_reasoning(text)
    candidates = [m.group(1) for m in _FENCE.finditer(answer)] + [answer]
    start, end = answer.find("{"), answer.rfind("}")
    if 0 <= start < end:
        candidates.append(answer[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate.strip())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise MalformedOutput(f"no JSON object in judge output: {answer[:120]!r}")


def _validate(model: type[BaseModel], text: str) -> BaseModel:
    data = _json_object(text)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MalformedOutput(f"judge JSON invalid at {where or 'root'}: {first['msg']}") from None


def parse_lca_label(text: str) -> LcaLabel:
    return _validate(_LcaAnswer, text).label  # type: ignore[attr-defined]


def parse_dcg_decision(text: str) -> DcgDecision:
    return _validate(_DcgAnswer, text).decision  # type: ignore[attr-defined]


def parse_verdicts(text: str, n_claims: int) -> list[Verdict]:
    """Exactly one of 支持/部分支持/驳回 per claim, in claim order."""
    verdicts = _validate(_VerdictsAnswer, text).verdicts  # type: ignore[attr-defined]
    if len(verdicts) != n_claims:
        raise MalformedOutput(f"expected {n_claims} verdicts (one per claim), got {len(verdicts)}")
    return list(verdicts)


def parse_text(text: str) -> str:
    """A generated response or User Model reply: its answer part, which must not be empty."""
    answer = strip_reasoning(text)
    if not answer:
        raise MalformedOutput("empty content")
    return answer
