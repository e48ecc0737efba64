"""Vertex's failures read as `providers.errors.Failure`s (the policy is there): the `google-genai`
SDK's (`google.errors.failure_of`), Cloud Storage's answers (`gcs.GcsError`), their HTTP clients'
timeouts and dropped connections (httpx's for the SDK, `requests`' and urllib3's for Cloud
Storage), and google-auth's refused refresh (credentials that no longer work: 401).
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.google.errors import failure_of as genai_failure
from lexpilot_batch.providers.vertex.gcs import GcsError


def _transport(exc: BaseException) -> bool:
    return any(cls.__module__.split(".")[0] in ("requests", "urllib3") for cls in type(exc).__mro__)


def failure_of(errors: Any, exc: BaseException) -> Failure | None:
    """What an exception of a Vertex call says; None for any other exception."""
    if isinstance(exc, GcsError):
        status = exc.status
        return Failure(status, f"Cloud Storage: {exc.message}")
    found = genai_failure(errors, exc)
    if found is not None:
        return found
    if type(exc).__name__ == "RefreshError" and type(exc).__module__.startswith("google.auth"):
        return Failure(401, f"the Application Default Credentials could not be refreshed: {exc}")
    if _transport(exc):
        return Failure(None, type(exc).__name__, timed_out="Timeout" in type(exc).__name__)
    return None
