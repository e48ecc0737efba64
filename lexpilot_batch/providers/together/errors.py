"""The errors of Together's API read as `providers.errors.Failure`s (the policy is there).

Its calls go through the `openai` SDK's HTTP client, but for the upload's second step, a `PUT` of
the file's bytes to the signed URL Together answers with, sent by the HTTP library under it: its
refusals are `UploadRefused` and its transport failures the library's own. Together's batch
documentation lists the statuses of its errors (https://docs.together.ai/docs/inference/batch/manage,
"Error codes": 400, 401, 404, 429, 500) but not their body; its message is read from an OpenAI-shaped
`{"error": {"message"}}` or a flat `{"message"}`, whichever came, else the status line.
"""

from __future__ import annotations

import openai

from lexpilot_batch.providers.errors import Failure, body_message
from lexpilot_batch.providers.sync.call import http


class UploadRefused(Exception):
    """The signed upload URL refused the file's bytes."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def failure_of(exc: BaseException) -> Failure | None:
    """What an exception of a Together call says; None for any other."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        inner = body.get("error") if isinstance(body, dict) else None
        code = inner.get("code") if isinstance(inner, dict) else None
        return Failure(exc.status_code, body_message(body, str(exc.message)), code=str(code) if code else None)
    if isinstance(exc, UploadRefused):
        return Failure(exc.status, exc.message)
    if isinstance(exc, (openai.APITimeoutError, http.TimeoutException)):
        return Failure(None, "no answer within the timeout", timed_out=True)
    if isinstance(exc, (openai.APIConnectionError, http.TransportError)):
        return Failure(None, f"could not connect: {exc.__cause__ or exc}")
    return None
