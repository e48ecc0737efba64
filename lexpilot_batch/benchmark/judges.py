"""Validation of model outputs: the judges' small JSON answers and the generated texts.

A judge's thinking (`reasoning_content`, or a leading `<think>...</think>` block) is never parsed
as its answer. A judge that reasons in plain text may show JSON objects before its answer (the
format it was asked for, an example, a first opinion): its answer is the *final* object. When the
objects disagree, the final one counts only if it clearly ends the output (nothing but a closing
fence or a full stop after it); otherwise which one is the answer is a guess, and the output is
malformed. Anything that does not validate raises `MalformedOutput`, which the engine turns into a
retry and, after the last attempt, a failed thread; nothing malformed is ever scored.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from lexpilot_batch.data import Verdict
from lexpilot_batch.util.redaction import redact_cut

LcaLabel = Literal["judgment", "clarification"]
DcgDecision = Literal["是", "否"]

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
# What may follow the final object for it to end the output: a closing fence, a full stop.
_ENDS_OUTPUT = re.compile(r"\s*(?:```)?\s*[.。]?\s*")
# Each `{` is a place a JSON object may start; an output with more is not a judge's answer, and
# trying each would cost quadratic time on a long, broken one.
_MAX_OPENINGS = 200
_DECODER = json.JSONDecoder()


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


def _json_objects(answer: str) -> list[tuple[dict, int]]:
    """Every top-level JSON object in `answer`, in order, each with the offset just past it."""
    found: list[tuple[dict, int]] = []
    start = answer.find("{")
    openings = 0
    while start >= 0:
        openings += 1
        if openings > _MAX_OPENINGS:
            raise MalformedOutput(f"judge output has more than {_MAX_OPENINGS} '{{' to read an answer from")
        try:
            value, end = _DECODER.raw_decode(answer, start)
        except (json.JSONDecodeError, RecursionError):
            start = answer.find("{", start + 1)
            continue
        if isinstance(value, dict):
            found.append((value, end))
        start = answer.find("{", end)
    return found


def _validate(model: type[BaseModel], text: str) -> BaseModel:
    answer = strip_reasoning(text)
    objects = _json_objects(answer)
    if not objects:
        raise MalformedOutput(f"no JSON object in judge output: {redact_cut(answer, 120)!r}")
    final, end = objects[-1]
    if len(objects) > 1 and not _ENDS_OUTPUT.fullmatch(answer, end):
        readings = {reading for obj, _ in objects if (reading := _reading(model, obj)) is not None}
        if len(readings) > 1:
            raise MalformedOutput(
                f"judge output holds {len(objects)} JSON objects that disagree ({', '.join(sorted(readings))}) "
                "and none is clearly the final answer"
            )
    try:
        return model.model_validate(final)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MalformedOutput(f"judge JSON invalid at {where or 'root'}: {first['msg']}") from None


def _reading(model: type[BaseModel], obj: dict) -> str | None:
    """What an object answers, as text to compare and show; None when it is no answer at all."""
    try:
        return model.model_validate(obj).model_dump_json()
    except ValidationError:
        return None


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
