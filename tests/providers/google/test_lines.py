"""Gemini's result lines (`providers.google.results`) read as the OpenAI ones `answers` judges:
the answer is the candidate's parts, never its thoughts, and every outcome is one of ours."""

from __future__ import annotations

import pytest

from lexpilot_batch.engine.answers import INVALID, PERMANENT, TRANSPORT, UNEXECUTED
from lexpilot_batch.providers.google.results import result as google_result
from tests.helpers.result_lines import ANSWER, CID
from tests.helpers.result_lines import judged as _judged


def _gemini(response: dict | None = None, **extra) -> dict:
    line = {"key": CID, **extra}
    if response is not None:
        line["response"] = response
    return google_result(line)


def _candidate(parts: list, reason: str = "STOP") -> dict:
    meta = {
        "promptTokenCount": 120,
        "candidatesTokenCount": 20,
        "thoughtsTokenCount": 70,
        "cachedContentTokenCount": 64,
    }
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": reason}],
        "usageMetadata": meta,
    }


def test_a_gemini_answer_is_its_parts_never_its_thoughts():
    line = _gemini(_candidate([{"text": '{"label": "judgment"}', "thought": True}, {"text": ANSWER}]))
    assert line["custom_id"] == CID
    assert _judged(line)[:4] == (True, "clarification", None, (120, 90, 64, 70, 0, None))
    assert _judged(_gemini(_candidate([{"text": ANSWER, "thought": True}])))[:3] == (False, None, INVALID)


@pytest.mark.parametrize(
    ("line", "kind", "needle"),
    [
        (_gemini(_candidate([{"text": '{"la'}], "MAX_TOKENS")), INVALID, "length"),
        (_gemini(_candidate([{"text": "部分"}], "SAFETY")), INVALID, "content_filter"),
        (_gemini(_candidate([{"text": "部分"}], "MODEL_ARMOR")), INVALID, "content_filter"),
        (_gemini(_candidate([{"text": "部分"}], "IMAGE_RECITATION")), INVALID, "content_filter"),
        (_gemini({"promptFeedback": {"blockReason": "SAFETY"}}), INVALID, "content_filter"),
        (_gemini(error={"code": 3, "message": "bad", "status": "INVALID_ARGUMENT"}), PERMANENT, "HTTP 400"),
        (_gemini(status={"code": 13, "message": "internal", "status": "INTERNAL"}), TRANSPORT, "HTTP 500"),
        (_gemini(status={"code": 8, "message": "quota", "status": "RESOURCE_EXHAUSTED"}), UNEXECUTED, "HTTP 429"),
        (_gemini(error={"code": 1, "message": "cancelled"}), UNEXECUTED, "batch_cancelled"),
        (_gemini(), TRANSPORT, "no response"),
    ],
)
def test_every_gemini_outcome_is_one_of_ours(line, kind, needle):
    ok, _value, got, _usage, error = _judged(line)
    assert (ok, got) == (False, kind) and needle in error
