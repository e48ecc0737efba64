"""The `openai` SDK's exceptions as the project's errors, shared by every backend that uses the SDK.

Only failures that retrying will not fix, or that outlasted the SDK's own retries, come here. The
messages name the role and the endpoint, and for a rejected key the variable it came from; never
the key itself.
"""

from __future__ import annotations

import openai

from lexpilot_batch.errors import ConfigError, LexpilotError, ProviderError, ProviderUnavailable
from lexpilot_batch.providers.endpoints import Endpoint


def error_message(exc: openai.APIStatusError) -> str:
    """The provider's own message from an error answer (the SDK keeps the `error` object)."""
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(exc.message)


def translate(exc: openai.APIError, what: str, endpoint: Endpoint, not_found_hint: str = "") -> LexpilotError | None:
    """The user-facing error for `exc` while doing `what`, or None for one this does not map.

    `not_found_hint` is the advice added to an HTTP 404, which means different things to
    different backends (no Batch API; an unknown model or a wrong base URL).
    """
    where = endpoint.where
    if isinstance(exc, openai.AuthenticationError):
        return ConfigError(
            f"{what}: the provider rejected the API key for the {where} (HTTP 401); check {endpoint.key_var}"
        )
    if isinstance(exc, openai.PermissionDeniedError):
        return ConfigError(f"{what}: permission denied for the {where} (HTTP 403): {error_message(exc)}")
    if isinstance(exc, openai.NotFoundError):
        hint = f". {not_found_hint}" if not_found_hint else ""
        return ProviderError(f"{what}: not found at the {where} (HTTP 404): {error_message(exc)}{hint}")
    if isinstance(exc, openai.BadRequestError):
        return ProviderError(f"{what}: the {where} refused the request (HTTP 400): {error_message(exc)}")
    if isinstance(exc, openai.APIStatusError):
        return ProviderUnavailable(
            f"{what}: the {where} answered HTTP {exc.status_code} after retries: {error_message(exc)}; "
            "nothing was lost, run the same command again later"
        )
    if isinstance(exc, openai.APITimeoutError):
        return ProviderUnavailable(
            f"{what}: no answer from the {where} within the timeout, even after retries; nothing was lost, "
            "run the same command again (with a larger --timeout if the model is slow)"
        )
    if isinstance(exc, openai.APIConnectionError):
        return ProviderUnavailable(f"{what}: could not reach the {where}; nothing was lost, run the same command again")
    return None
