"""The `openai` SDK's exceptions read as `providers.errors.Failure`s (the policy is there)."""

from __future__ import annotations

import openai

from lexpilot_batch.providers.errors import Failure


def error_message(exc: openai.APIStatusError) -> str:
    """The provider's own message from an error answer (the SDK keeps the `error` object)."""
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(exc.message)


def error_code(exc: openai.APIStatusError) -> str | None:
    """The provider's error code from an error answer (`{"error": {"code": ...}}`), if any."""
    body = exc.body
    err = body.get("error", body) if isinstance(body, dict) else None
    code = err.get("code") if isinstance(err, dict) else None
    return str(code) if code is not None else None


def failure_of(exc: BaseException) -> Failure | None:
    """What an `openai` SDK exception says; None for any other exception."""
    if isinstance(exc, openai.APIStatusError):
        return Failure(exc.status_code, error_message(exc), code=error_code(exc))
    if isinstance(exc, openai.APITimeoutError):
        return Failure(None, "no answer within the timeout", timed_out=True)
    if isinstance(exc, openai.APIConnectionError):
        return Failure(None, f"could not connect: {exc.__cause__ or exc}")
    return None
