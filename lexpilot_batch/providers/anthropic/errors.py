"""The `anthropic` SDK's exceptions read as `providers.errors.Failure`s (the policy is there).

The SDK is an optional extra: its module is passed in, imported where a client is built
(`extras.require_sdk`).
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.errors import Failure


def error_text(exc: Any) -> str:
    """The provider's own message in an error answer."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", exc))


def failure_of(sdk: Any, exc: BaseException) -> Failure | None:
    """What an `anthropic` SDK exception says; None for any other exception."""
    if isinstance(exc, sdk.APIStatusError):
        return Failure(exc.status_code, error_text(exc))
    if isinstance(exc, sdk.APITimeoutError):
        return Failure(None, "no answer within the timeout", timed_out=True)
    if isinstance(exc, sdk.APIConnectionError):
        return Failure(None, f"could not connect: {exc.__cause__ or exc}")
    return None
