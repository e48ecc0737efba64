"""Fireworks batch result lines read as OpenAI batch output lines (`providers.results`).

A job's output dataset holds "a results file (successful responses in JSONL format) and an error
file (failed requests with debugging info)", each line carrying the request's `custom_id`
(https://docs.fireworks.ai/guides/batch-inference, "Reference", taken 2026-12-06). The guide shows
no line of either. A results line is read in the shape published captures of live jobs show,
`{"custom_id", "response": <chat.completion>}` (the completion itself under `response`, without
OpenAI's `status_code` and `body`), and in OpenAI's, should a line come wrapped; an error line as
`{"custom_id", "error": {"message", "code"}}` or with a bare `error` string. An error line carries no
HTTP status, so its request is retried as a transport failure (`engine.answers`), as Together's is.
"""

from __future__ import annotations

from typing import Any


def result(line: dict) -> dict:
    """One Fireworks result line as an OpenAI batch output line."""
    cid = line.get("custom_id")
    response = line.get("response")
    if isinstance(response, dict) and "status_code" not in response and isinstance(response.get("choices"), list):
        return {"custom_id": cid, "response": {"status_code": 200, "body": response}, "error": None}
    if isinstance(response, dict):
        return line
    error: Any = line.get("error")
    if isinstance(error, str):
        error = {"code": None, "message": error}
    if isinstance(error, dict):
        message = error.get("message") or error.get("error") or "the request failed"
        return {"custom_id": cid, "response": None, "error": {"code": error.get("code"), "message": str(message)}}
    return line  # neither: left as it came, for `engine.answers` to find it unreadable
