"""The errors of xAI's REST API (reached through the `openai` SDK's HTTP client) read as
`providers.errors.Failure`s (the policy is there).

xAI's debugging page (https://docs.x.ai/developers/debugging, taken 2026-12-06) lists the statuses
(400 for an invalid argument or an incorrect key, 401, 403, 404, 405, 415, 422, 429) and says each
"will typically return an error code with error message", without a body's shape. Its answers carry
`{"code": <the gRPC status in words>, "error": <the message>}`; an OpenAI-shaped `{"error":
{"message"}}` is read too, whichever came, else the status line (`providers.errors.body_message`).
"""

from __future__ import annotations

import json

import openai

from lexpilot_batch.providers.errors import Failure, body_message


class Unreadable(Exception):
    """An answer that is not the JSON object its call answers (a gateway's page, JSON cut short,
    nothing): read as an answer lost on the way, so a create is uncertain (looked for before it is
    sent again) and a poll is tried again later."""


def failure_of(exc: BaseException) -> Failure | None:
    """What an exception of the `openai` SDK's client says of an xAI call; None for any other."""
    if isinstance(exc, openai.APIStatusError):
        try:  # the openai SDK keeps only an answer's `error` member where it has one
            raw = exc.response.json()
        except ValueError:
            raw = exc.body
        return Failure(exc.status_code, body_message(raw, str(exc.message)))
    if isinstance(exc, openai.APITimeoutError):
        return Failure(None, "no answer within the timeout", timed_out=True)
    if isinstance(exc, openai.APIConnectionError):
        return Failure(None, f"could not connect: {exc.__cause__ or exc}")
    if isinstance(exc, (Unreadable, json.JSONDecodeError)):  # the SDK's client parses a JSON answer cut short
        return Failure(None, "its answer was not the JSON object it answers (cut short, or a gateway's page)")
    return None
