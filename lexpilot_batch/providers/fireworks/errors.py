"""The errors of Fireworks' API read as `providers.errors.Failure`s (the policy is there).

Its calls go through the `openai` SDK's HTTP client, but for the downloads of a dataset's files from
the signed URLs `:getDownloadEndpoint` answers with, which go through the HTTP library under it
(refused: `DownloadRefused`; broken off: the library's transport errors). Fireworks' API reference
documents no error body. Two shapes are read: the gateway's `{"code", "message", "details"}` (a
gRPC status, `code` a number: 5 NOT_FOUND, 6 ALREADY_EXISTS) and an OpenAI-shaped
`{"error": {"message", "code"}}`, whichever came, else the status line.
"""

from __future__ import annotations

from typing import Any

import openai

from lexpilot_batch.providers.errors import Failure, body_message
from lexpilot_batch.providers.sync.call import http


class DownloadRefused(Exception):
    """A signed download URL, or the listing of a dataset's files, that answered no file."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class Unreadable(Exception):
    """An answer that is not what was asked for (a gateway's page, a cut body): an answer lost on the
    way, so a create is uncertain and a poll is tried again."""


def _code(body: Any) -> str | None:
    inner = body.get("error") if isinstance(body, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else (body.get("code") if isinstance(body, dict) else None)
    return str(code) if code not in (None, "") else None


def failure_of(exc: BaseException) -> Failure | None:
    """What an exception of a Fireworks call says; None for any other."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        try:  # the openai SDK keeps only an answer's `error` member where it has one
            raw = exc.response.json()
        except ValueError:
            raw = body
        return Failure(exc.status_code, body_message(raw, str(exc.message)), code=_code(raw))
    if isinstance(exc, Unreadable):
        return Failure(None, str(exc))
    if isinstance(exc, DownloadRefused):
        return Failure(exc.status, exc.message)
    if isinstance(exc, (openai.APITimeoutError, http.TimeoutException)):
        return Failure(None, "no answer within the timeout", timed_out=True)
    if isinstance(exc, (openai.APIConnectionError, http.TransportError)):
        return Failure(None, f"could not connect: {exc.__cause__ or exc}")
    return None
