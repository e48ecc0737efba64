"""The error policy of every provider call, written once: what a failed call means for the user.

Each API's folder reads its SDK's exceptions into a `Failure` (`openai.errors`, `anthropic.errors`,
`google.errors`): the HTTP status, or None when no answer came at all (a timeout, a dropped
connection), and the provider's own message. From there one table decides, for every provider:

| status | the error | what the user does |
| --- | --- | --- |
| 401 | `ConfigError` naming the key's variable (never the key) | set the key |
| 403 | `ConfigError` | fix the permission |
| 404 | `ProviderError`, with the backend's hint (no Batch API; an unknown model) | fix the name or the route |
| 408, 409, 429, 5xx, none | `ProviderUnavailable` ("nothing was lost") | wait: `--wait` rides it out |
| any other 4xx | `ProviderError`: the request itself was refused | fix the request |

Only failures that outlasted the SDK's own retries come here. `file_batch.FileBatchBackend` and
`sync.call.ChatCall` raise them; creates, whose answers may be lost, have their own policy there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from lexpilot_batch.errors import ConfigError, LexpilotError, ProviderError, ProviderUnavailable, transient_status
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.util.redaction import redact_url


@dataclass(frozen=True)
class Failure:
    """What an SDK's exception says: the HTTP status (None: no answer at all) and the provider's message."""

    status: int | None
    message: str
    timed_out: bool = False  # no answer within the timeout (rather than no connection)
    code: str | None = None  # the provider's error code, where its error body has one (`token_limit_exceeded`)


_VERSION = re.compile(r"/v\d+[a-z0-9.]*(/|$)")  # /v1, /v4, /v1beta, /api/v3: an API's version


def body_message(body: Any, fallback: str) -> str:
    """The message of an error body as OpenAI-shaped APIs give it: `error.message`, an `error` that is
    the message itself, or a top-level `message` (Together's, Fireworks'); `fallback` where none."""
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str) and inner:
            return inner
        if body.get("message"):
            return str(body["message"])
    return fallback


def unversioned_base_url(base_url: str | None) -> str:
    """The likely cause of a 404 at a base URL whose path has no version (`http://host:8000` for
    `http://host:8000/v1`): the routes were asked under the wrong prefix. '' otherwise."""
    if not base_url:
        return ""
    path = urlsplit(base_url).path
    if _VERSION.search(path):
        return ""
    fixed = base_url.rstrip("/") + "/v1"
    return (
        f"The base URL {redact_url(base_url)} has no version: OpenAI-compatible servers serve their routes under "
        f"/v1, so it is most likely {redact_url(fixed)} (set the base URL so)"
    )


def provider_error(failure: Failure, what: str, endpoint: Endpoint, not_found_hint: str = "") -> LexpilotError:
    """The user-facing error of a call that failed so while doing `what` (the module's table)."""
    where, status, message = endpoint.where, failure.status, failure.message
    if status is None:
        return ProviderUnavailable(
            f"{what}: could not reach the {where} ({message}), even after retries; nothing was lost, run the same "
            "command again (with a larger --timeout if the model is slow)"
        )
    if status == 401:
        return ConfigError(
            f"{what}: the provider rejected the API key for the {where} (HTTP 401); check {endpoint.key_var}"
        )
    if status == 403:
        return ConfigError(f"{what}: permission denied for the {where} (HTTP 403): {message}")
    if status == 404:
        hint = f". {not_found_hint}" if not_found_hint else ""
        return ProviderError(f"{what}: not found at the {where} (HTTP 404): {message}{hint}")
    if transient_status(status):
        return ProviderUnavailable(
            f"{what}: the {where} answered HTTP {status} after retries: {message}; nothing was lost, run the same "
            "command again later"
        )
    return ProviderError(f"{what}: the {where} refused the request (HTTP {status}): {message}")
