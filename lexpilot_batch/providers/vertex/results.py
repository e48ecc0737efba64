"""Vertex AI batch prediction result lines (`predictions.jsonl`), read as OpenAI batch output lines
(`providers.results`).

A line is `{"status", "processed_time", "request", "response"}` (Google's intro_batch_prediction
notebook's example output, GoogleCloudPlatform/generative-ai `gemini/batch-prediction/`): `status`
empty for a request answered, `response` its GenerateContentResponse, read as a Gemini batch
response is (`google.results`); `request` the request echoed, whose `labels` carry our id (`ids`).
A row that failed says why in `status`, a string whose wording the documentation does not fix: an
HTTP status it names (`"code": 400`, or the reason phrase it starts with) is that status, any other
a 500, a failure worth trying again.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lexpilot_batch.providers import results as outputs
from lexpilot_batch.providers.google import results as gemini
from lexpilot_batch.providers.vertex.ids import LABEL, our_id

_CODE = re.compile(r'"code"\s*:\s*(\d{3})')
_REASONS = {
    "bad request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not found": 404,
    "too many requests": 429,
    "resource exhausted": 429,
    "internal": 500,
    "service unavailable": 503,
    "deadline exceeded": 504,
}


def line_key(line: dict[str, Any]) -> str | None:
    """The id a result line carries: its request's label (`ids.LABEL`), or a `key` beside it."""
    labels = outputs.as_dict(outputs.as_dict(line.get("request")).get("labels"))
    key = labels.get(LABEL, line.get("key"))
    return key if isinstance(key, str) else None


def _status_code(status: str) -> int:
    found = _CODE.search(status)
    if found:
        return int(found.group(1))
    lowered = status.strip().lower()
    return next((code for phrase, code in _REASONS.items() if lowered.startswith(phrase)), 500)


def row_failed(custom_id: str | None, status: Any) -> dict | None:
    """The failed line a row's non-empty `status` stands for (module docstring); None for a row answered."""
    if not isinstance(status, str) or not status.strip():
        return None
    message = status.strip()
    try:  # a status holding a JSON error object: its message
        found = json.loads(message[message.index("{") :])
        inner = outputs.as_dict(found.get("error")) or found
        message = str(inner.get("message") or message)
    except (ValueError, AttributeError):
        pass
    return outputs.failed(custom_id, _status_code(status), "vertex_row_failed", message)


def result(line: dict, tag: str | None = None) -> dict:
    """One Vertex batch result line as an OpenAI batch output line, its id mapped back (`ids.our_id`)."""
    raw = line_key(line)
    ours = our_id(raw, tag) if raw is not None else None
    custom_id = ours if ours is not None else raw
    failed = row_failed(custom_id, line.get("status"))
    if failed is not None:
        return failed
    response = line.get("response")
    if not isinstance(response, dict):
        return {"custom_id": custom_id, "response": None, "error": None}
    return gemini.result({"key": custom_id, "response": response})
