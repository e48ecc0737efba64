"""The synchronous calls of the native APIs, for the `sync` backend (`providers.chat`): Anthropic's
Messages and Gemini's generateContent, through the same optional SDKs as their batches.

`--tail-sync N` sends a wave's small group of an `anthropic/` or `google/` model through these
instead of a batch. A group's file holds its API's batch input lines (`request_lines`); each line's
request is sent as compiled, and its answer saved as the line the API's batch results would hold
for it (`shapes` reads both alike), so records are the same whichever way a request travels:

- Anthropic: `POST /v1/messages` with the line's `params` (the SDK's low-level post, as the OpenAI
  call does), saved as `{"custom_id", "result": {"type": "succeeded", "message": <the Message as
  sent>}}`; a refusal on the request's merits as `errored` with the error answer; a failure that
  outlasted the SDK's retries as `errored` with an `api_error` (`timeout_error` for a timeout,
  the provider's own type for a 5xx), which the engine retries.
- Gemini: `models/{model}:generateContent` with the line's `request` (the genai client's low-level
  request: its `generate_content` re-encodes a request on the way, `thinkingConfig` included, and
  would not send it as compiled), saved as `{"key", "response": <the GenerateContentResponse as
  sent>}`, or `{"key", "error": {code, message, status}}` with the HTTP status as the code.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.engine.result_lines import BeyondBounds, loads_bounded
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.providers.anthropic.batch import anthropic_error, error_text
from lexpilot_batch.providers.base import require_sdk
from lexpilot_batch.providers.chat import (
    CLIENT_REQUEST_ID,
    FATAL,
    OK,
    RATE,
    REFUSED,
    SUSPECT,
    CallResult,
    ChatCall,
    http,
)
from lexpilot_batch.providers.google.batch import google_error, http_options, transport_failure


def _damaged(where: str, fields: str) -> LexpilotError:
    return LexpilotError(
        f"{where} is not a batch request line (it needs {fields}); this request file is damaged, compile it again"
    )


class AnthropicChat(ChatCall):
    """`POST /v1/messages` with a Message Batches request's params."""

    route = "/v1/messages"

    def new_client(self) -> Any:
        self.sdk = require_sdk("anthropic", "anthropic", "Anthropic")
        return self.sdk.Anthropic(
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.require_key(),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def payload(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        params = line.get("params")
        if not isinstance(params, dict):
            raise _damaged(where, "a custom_id and a params object")
        return params

    def send(self, line_id: str, payload: dict[str, Any]) -> CallResult:
        sdk, model = self.sdk, str(payload.get("model", ""))
        try:
            response = self.client.post(
                self.route, cast_to=http.Response, body=payload, options={"headers": {CLIENT_REQUEST_ID: line_id}}
            )
        except sdk.AuthenticationError as exc:
            return CallResult(line_id, FATAL, None, model, exc)
        except sdk.APIStatusError as exc:
            status = exc.status_code
            if status == 429:
                return CallResult(line_id, RATE, None, model, exc, payload)
            if status in (408, 409) or status >= 500:
                kind = "timeout_error" if status == 408 else _error_type(exc) or "api_error"
                message = f"HTTP {status} {self.after_retries()}: {error_text(exc)}"
                return CallResult(line_id, SUSPECT, _errored(line_id, kind, message), model, exc)
            body = exc.body if isinstance(exc.body, dict) and isinstance(exc.body.get("error"), dict) else None
            error = body or {"type": "error", "error": {"type": "invalid_request_error", "message": error_text(exc)}}
            line = {"custom_id": line_id, "result": {"type": "errored", "error": error}}
            return CallResult(line_id, SUSPECT if status in (403, 404) else REFUSED, line, model, exc)
        except sdk.APITimeoutError as exc:
            message = f"no answer within {self.timeout:g} s, {self.after_retries()}"
            return CallResult(line_id, SUSPECT, _errored(line_id, "timeout_error", message), model, exc)
        except sdk.APIConnectionError as exc:
            message = f"could not connect to {self.endpoint.base_url}, {self.after_retries()}: {exc.__cause__ or exc}"
            return CallResult(line_id, SUSPECT, _errored(line_id, "api_error", message), model, exc)
        try:
            data = loads_bounded(response.content)  # the line it becomes is read within these bounds
        except BeyondBounds as exc:  # this request's answer, not the endpoint: written at once
            message = f"HTTP {response.status_code} with an answer no result line may hold: {exc}"
            return CallResult(line_id, REFUSED, _errored(line_id, "api_error", message), model)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            message = f"HTTP {response.status_code} with a body that is not a JSON object"
            return CallResult(line_id, SUSPECT, _errored(line_id, "api_error", message), model)
        return CallResult(line_id, OK, {"custom_id": line_id, "result": {"type": "succeeded", "message": data}})

    def answered(self, line: dict[str, Any]) -> bool:
        result = line.get("result")
        return isinstance(result, dict) and result.get("type") == "succeeded"

    def error(self, result: CallResult, what: str) -> LexpilotError | None:
        if not isinstance(result.exc, self.sdk.APIError):
            return None
        return anthropic_error(self.sdk, self.endpoint, what, result.exc)


def _error_type(exc: Any) -> str | None:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else None


def _errored(line_id: str, kind: str, message: str) -> dict[str, Any]:
    error = {"type": "error", "error": {"type": kind, "message": message}}
    return {"custom_id": line_id, "result": {"type": "errored", "error": error}}


class GeminiChat(ChatCall):
    """`models/{model}:generateContent` with a Gemini batch line's request."""

    id_key = "key"

    def new_client(self) -> Any:
        genai = require_sdk("google.genai", "google", "Gemini")
        self.errors = require_sdk("google.genai.errors", "google", "Gemini")
        types = require_sdk("google.genai.types", "google", "Gemini")
        client = genai.Client(
            vertexai=False,
            api_key=self.endpoint.require_key(),
            http_options=http_options(types, self.endpoint, self.timeout, self.max_retries),
        )
        # The low-level request sends a request as compiled; `models.generate_content` re-encodes it.
        request = getattr(getattr(client, "_api_client", None), "request", None)
        if request is None:
            raise ConfigError(
                "this version of google-genai has no low-level request call for generateContent; "
                'install the version the extra names: python -m pip install "lexpilot-batch[google]"'
            )
        self._request: Any = request
        return client

    def payload(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        request = line.get("request")
        if not isinstance(request, dict):
            raise _damaged(where, "a key and a request object")
        return request

    def send(self, line_id: str, payload: dict[str, Any]) -> CallResult:
        path = f"models/{self.model}:generateContent"
        try:
            response = self._request("post", path, payload, {"headers": {CLIENT_REQUEST_ID: line_id}})
        except self.errors.APIError as exc:
            code = exc.code or 500
            if code == 401 or exc.status == "UNAUTHENTICATED":
                return CallResult(line_id, FATAL, None, self.model, exc)
            if code == 429:
                return CallResult(line_id, RATE, None, self.model, exc, payload)
            if code in (408, 409) or code >= 500:
                message = f"HTTP {code} {self.after_retries()}: {exc.message}"
                return CallResult(line_id, SUSPECT, _failed(line_id, code, exc.status, message), self.model, exc)
            details = exc.details.get("error") if isinstance(exc.details, dict) else None
            error = (
                details if isinstance(details, dict) else {"code": code, "message": exc.message, "status": exc.status}
            )
            kind = SUSPECT if code in (403, 404) else REFUSED
            return CallResult(line_id, kind, {"key": line_id, "error": error}, self.model, exc)
        except Exception as exc:
            if not transport_failure(exc):
                raise
            message = f"no answer from {self.endpoint.base_url} ({type(exc).__name__}), {self.after_retries()}"
            return CallResult(line_id, SUSPECT, _failed(line_id, 503, "UNAVAILABLE", message), self.model, exc)
        try:
            data = loads_bounded(response.body or "")  # the line it becomes is read within these bounds
        except BeyondBounds as exc:  # this request's answer, not the endpoint: written at once
            message = f"an answer no result line may hold: {exc}"
            return CallResult(line_id, REFUSED, _failed(line_id, 502, "UNAVAILABLE", message), self.model)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            message = "an answer whose body is not a JSON object"
            return CallResult(line_id, SUSPECT, _failed(line_id, 502, "UNAVAILABLE", message), self.model)
        return CallResult(line_id, OK, {"key": line_id, "response": data})

    def answered(self, line: dict[str, Any]) -> bool:
        return isinstance(line.get("response"), dict)

    def error(self, result: CallResult, what: str) -> LexpilotError | None:
        exc = result.exc
        if exc is None or not (isinstance(exc, self.errors.APIError) or transport_failure(exc)):
            return None
        return google_error(self.errors, self.endpoint, what, exc)


def _failed(key: str, code: int, status: str | None, message: str) -> dict[str, Any]:
    """A Gemini result line of a failure that outlasted the retries (its HTTP status as the code)."""
    return {"key": key, "error": {"code": code, "message": message, "status": status or "UNAVAILABLE"}}
