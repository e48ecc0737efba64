"""The errors of OpenRouter's API (reached through the `openai` SDK's HTTP client) read as
`providers.errors.Failure`s (the policy is there).

OpenRouter answers a refused call with `{"error": {"code", "message", "metadata"}}`, `code` the
HTTP status as a number (https://openrouter.ai/docs/api/reference/errors-and-debugging, taken 2026-12-06); the
`openai` SDK hands the `error` member as the exception's body. A batch that failed its validation
after the 202 is no refused call: it is a batch in status `failed` whose `error.message` says why
(`openrouter.batch`).
"""

from __future__ import annotations

import json
from typing import Any

import openai

from lexpilot_batch.providers.errors import Failure


class Unreadable(Exception):
    """An answer that is not the JSON object its call answers (a gateway's page, JSON cut short,
    nothing): read as an answer lost on the way, so a create is uncertain (looked for before it is
    sent again) and a poll is tried again later."""


def error_message(body: Any, fallback: str) -> str:
    """OpenRouter's own message from an error body (the whole answer or its `error` member)."""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return fallback


def failure_of(exc: BaseException) -> Failure | None:
    """What an exception of the `openai` SDK's client says of an OpenRouter call; None for any other."""
    if isinstance(exc, openai.APIStatusError):
        return Failure(exc.status_code, error_message(exc.body, str(exc.message)))
    if isinstance(exc, openai.APITimeoutError):
        return Failure(None, "no answer within the timeout", timed_out=True)
    if isinstance(exc, openai.APIConnectionError):
        return Failure(None, f"could not connect: {exc.__cause__ or exc}")
    if isinstance(exc, (Unreadable, json.JSONDecodeError)):  # the SDK's client parses a JSON answer cut short
        return Failure(None, "its answer was not the JSON object it answers (cut short, or a gateway's page)")
    return None
