"""What both of Gemini's calls (Batch Mode and generateContent) build their `google-genai` client with."""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.routing.endpoints import Endpoint

API_VERSION = "v1beta"  # where Batch Mode lives
# The SDK's own retries of a call answered 408, 429 or 5xx: the first wait and its jitter, in seconds
# (the SDK's defaults; tests make them zero).
RETRY_DELAY = 1.0
MAX_DELAY = 30.0  # the longest of those waits; a download's own retries (`batch`) keep the same


def http_options(types: Any, endpoint: Endpoint, timeout: float, max_retries: int) -> Any:
    """The genai client's options: the endpoint, the API version, the timeout and the SDK's retries."""
    retry = types.HttpRetryOptions(
        attempts=max_retries + 1, initial_delay=RETRY_DELAY, jitter=RETRY_DELAY, max_delay=MAX_DELAY
    )
    return types.HttpOptions(
        base_url=endpoint.base_url, api_version=API_VERSION, timeout=int(timeout * 1000), retry_options=retry
    )
