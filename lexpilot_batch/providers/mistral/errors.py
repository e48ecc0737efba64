"""The errors of Mistral's API (reached through the `openai` SDK's HTTP client) read as
`providers.errors.Failure`s (the policy is there).

Mistral answers a refused call with a flat body, `{"object": "error", "message", "type", "param",
"code"}`, and a request its schema rejects with FastAPI's 422 `{"detail": [{"loc", "msg", "type"}]}`
(https://docs.mistral.ai/api, "Errors"): the message is the first's `message`, or the second's
`loc: msg` pairs.
"""

from __future__ import annotations

from typing import Any

import openai

from lexpilot_batch.providers.errors import Failure


def error_message(body: Any, fallback: str) -> str:
    """Mistral's own message from an error body."""
    if isinstance(body, dict):
        if isinstance(body.get("error"), dict) and body["error"].get("message"):  # an OpenAI-shaped one
            return str(body["error"]["message"])
        if body.get("message"):
            return str(body["message"])
        detail = body.get("detail")
        if isinstance(detail, list):
            parts = [f"{'.'.join(map(str, d.get('loc') or []))}: {d.get('msg')}" for d in detail if isinstance(d, dict)]
            if parts:
                return "; ".join(parts)
        if isinstance(detail, str):
            return detail
    return fallback


def failure_of(exc: BaseException) -> Failure | None:
    """What an exception of the `openai` SDK's client says of a Mistral call; None for any other."""
    if isinstance(exc, openai.APIStatusError):
        return Failure(exc.status_code, error_message(exc.body, str(exc.message)))
    if isinstance(exc, openai.APITimeoutError):
        return Failure(None, "no answer within the timeout", timed_out=True)
    if isinstance(exc, openai.APIConnectionError):
        return Failure(None, f"could not connect: {exc.__cause__ or exc}")
    return None
