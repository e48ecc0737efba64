"""The `google-genai` SDK's exceptions read as `providers.errors.Failure`s (the policy is there).

The SDK is an optional extra: its modules are passed in, imported where a client is built
(`extras.require_sdk`). It raises its HTTP client's (httpx) timeouts and dropped connections as they
are, which read as no answer.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.errors import Failure


def transport_failure(exc: BaseException) -> bool:
    """A timeout or a dropped connection of the SDK's HTTP client (httpx), which it raises as is."""
    return any(
        cls.__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2") for cls in type(exc).__mro__
    )


def failure_of(errors: Any, exc: BaseException) -> Failure | None:
    """What a `google-genai` exception says; None for any other exception. An unauthenticated or
    forbidden answer reads as 401 or 403 whatever code it came with."""
    if isinstance(exc, errors.APIError):
        status = {"UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403}.get(exc.status, exc.code)
        return Failure(status, f"{exc.message} ({exc.status})" if exc.status else str(exc.message))
    if transport_failure(exc):
        return Failure(None, type(exc).__name__, timed_out="Timeout" in type(exc).__name__)
    return None
