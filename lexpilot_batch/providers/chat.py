"""One request line sent as its API's synchronous call, for the `sync` backend (`providers.sync`).

A request file holds lines in its API's batch input shape (`request_lines`). The sync backend sends
each as that API's synchronous call and saves the answer as a line of the same API's batch *output*
shape, holding what the provider answered untouched (but for the secrets `sync` redacts from
failure lines), so that a sync file is read by ingest and by `doctor` exactly as a downloaded
batch's results are (`providers.results`):

| api | a line's call | its result line |
| --- | --- | --- |
| `openai` | `POST /chat/completions`, the body as compiled | `{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}` |
| `anthropic` | `POST /v1/messages`, the params as compiled (`native_chat`) | `{"custom_id", "result": {"type": "succeeded", "message"}}`, or `errored` with the error answer |
| `google` | `POST models/{model}:generateContent`, the request as compiled (`native_chat`) | `{"key", "response"}`, or `{"key", "error"}` |

Each call is sent exactly as compiled, through the SDK's low-level call, and carries the line's id
as `X-Client-Request-Id` (OpenAI logs it for support, the other APIs ignore it, and the simulated
provider answers by it exactly as it answers a batch line with that id). A failure that outlasted
the SDK's retries (timeout, connection, 5xx) is written as the API's own transport failure, which
the engine retries as a new attempt; a refusal on the request's merits (a 400) as the API's error
answer. What each outcome means for the run (`OK` ... `RATE`) is `sync`'s to act on.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import openai

from lexpilot_batch.engine.result_lines import BeyondBounds, loads_bounded
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.apis import ANTHROPIC, GOOGLE, OPENAI
from lexpilot_batch.providers.endpoints import Endpoint
from lexpilot_batch.providers.errors import error_message, translate

try:  # the HTTP library under the SDKs: httpx2 from openai 3, httpx before
    import httpx2 as http
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx as http  # type: ignore[no-redef]

CLIENT_REQUEST_ID = "X-Client-Request-Id"  # at most 512 ASCII characters; a line's id has at most 64

# What a finished call means for the run.
OK = "ok"  # answered: the route works
REFUSED = "refused"  # a request-specific 4xx, or an answer beyond bounds: written, and the route works
SUSPECT = "suspect"  # may mean the whole endpoint is wrong or down: held while in a streak
FATAL = "fatal"  # the key was rejected: stop now
RATE = "rate_limited"  # refused for the rate: sent again later, never written


@dataclass(frozen=True)
class CallResult:
    custom_id: str  # the line's id
    kind: str
    line: dict[str, Any] | None  # the result line to write (None: nothing to write)
    model: str = ""
    exc: Exception | None = None
    body: dict[str, Any] | None = None  # what was sent, kept for a request sent again (rate-limited)


class ChatCall(ABC):
    """One API's synchronous call at one endpoint: a request line's payload, sending it, its result line."""

    id_key = "custom_id"  # the field holding a line's id, in request and result lines alike

    def __init__(self, endpoint: Endpoint, timeout: float, max_retries: int, model: str = "") -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.max_retries = max_retries
        self.model = model  # the model as sent, for an API whose lines do not name it (Gemini's)
        self.client = self.new_client()

    @abstractmethod
    def new_client(self) -> Any:
        """The SDK client (its key checked now: a missing one names its variable)."""

    def reset(self) -> None:
        """Cut the calls in flight (closing the client ends its connections) and start afresh."""
        close = getattr(self.client, "close", None)
        if close is not None:
            close()
        self.client = self.new_client()

    @abstractmethod
    def payload(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        """What is sent for a request line; `LexpilotError` naming `where` for a line that is none."""

    @abstractmethod
    def send(self, line_id: str, payload: dict[str, Any]) -> CallResult:
        """One request, through the SDK's retries; never raises for an HTTP or network failure."""

    @abstractmethod
    def answered(self, line: dict[str, Any]) -> bool:
        """Whether a result line written by `send` holds an answer."""

    @abstractmethod
    def error(self, result: CallResult, what: str) -> LexpilotError | None:
        """The user-facing error of a call that stops the run, or None for one this does not map."""

    def after_retries(self) -> str:
        return f"after {self.max_retries} retries"


def chat_call(api: str, endpoint: Endpoint, timeout: float, max_retries: int, model: str = "") -> ChatCall:
    """The synchronous call of `api`'s shape (`registry.Provider.api`) at `endpoint`."""
    if api == OPENAI:
        return OpenAIChat(endpoint, timeout, max_retries, model)
    from lexpilot_batch.providers.native_chat import AnthropicChat, GeminiChat

    calls: dict[str, type[ChatCall]] = {ANTHROPIC: AnthropicChat, GOOGLE: GeminiChat}
    return calls[api](endpoint, timeout, max_retries, model)


class OpenAIChat(ChatCall):
    """`POST /chat/completions` with a batch line's body."""

    route = "/chat/completions"

    def new_client(self) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.require_key(),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def payload(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        body = line.get("body")
        if not isinstance(body, dict):
            raise LexpilotError(
                f"{where} is not a batch request line (it needs a custom_id and a body object); "
                "this request file is damaged, compile it again"
            )
        url = line.get("url", self.route)
        if not (isinstance(url, str) and url.rstrip("/").endswith(self.route)) or line.get("method", "POST") != "POST":
            raise LexpilotError(
                f"{where} is a {line.get('method')} {url} request; the sync backend runs only POST /v1{self.route}"
            )
        return body

    def send(self, line_id: str, payload: dict[str, Any]) -> CallResult:
        model = str(payload.get("model", ""))
        try:
            # The low-level post sends the body exactly as compiled (the batch API's contract) and
            # returns the raw response, whose JSON keeps every field the provider sent.
            response = self.client.post(
                self.route, cast_to=http.Response, body=payload, options={"headers": {CLIENT_REQUEST_ID: line_id}}
            )
        except openai.AuthenticationError as exc:
            return CallResult(line_id, FATAL, None, model, exc)
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status == 429:
                return CallResult(line_id, RATE, None, model, exc, payload)
            if status == 408:
                return CallResult(line_id, SUSPECT, self._failure(line_id, "request_timeout", exc), model, exc)
            if status == 409 or status >= 500:
                return CallResult(line_id, SUSPECT, self._failure(line_id, "server_error", exc), model, exc)
            line = _line(line_id, status, exc.request_id, _error_body(exc))
            return CallResult(line_id, SUSPECT if status in (403, 404) else REFUSED, line, model, exc)
        except openai.APITimeoutError as exc:
            return CallResult(line_id, SUSPECT, self._failure(line_id, "request_timeout", exc), model, exc)
        except openai.APIConnectionError as exc:
            return CallResult(line_id, SUSPECT, self._failure(line_id, "connection_error", exc), model, exc)
        try:
            data = loads_bounded(response.content)  # the line it becomes is read within these bounds
        except BeyondBounds as exc:  # this request's answer, not the endpoint: written at once
            message = f"HTTP {response.status_code} with an answer no result line may hold: {exc}"
            return CallResult(line_id, REFUSED, _error_line(line_id, "server_error", message), model)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            message = f"HTTP {response.status_code} with a body that is not a JSON object"
            return CallResult(line_id, SUSPECT, _error_line(line_id, "server_error", message), model)
        return CallResult(line_id, OK, _line(line_id, response.status_code, response.headers.get("x-request-id"), data))

    def _failure(self, line_id: str, code: str, exc: openai.APIError) -> dict[str, Any]:
        if isinstance(exc, openai.APIStatusError):
            message = f"HTTP {exc.status_code} {self.after_retries()}: {error_message(exc)}"
        elif isinstance(exc, openai.APITimeoutError):
            message = f"no answer within {self.timeout:g} s, {self.after_retries()}"
        else:
            message = f"could not connect to {self.endpoint.base_url}, {self.after_retries()}: {exc.__cause__ or exc}"
        return _error_line(line_id, code, message)

    def answered(self, line: dict[str, Any]) -> bool:
        response = line.get("response")
        return isinstance(response, dict) and response.get("status_code") == 200

    def error(self, result: CallResult, what: str) -> LexpilotError | None:
        if not isinstance(result.exc, openai.APIError):
            return None
        hint = (
            f"Check the model name ({result.model!r}) and that {self.endpoint.base_url}{self.route} is the "
            "provider's chat completions route"
        )
        return translate(result.exc, what, self.endpoint, not_found_hint=hint)


def _line(custom_id: str, status: int, request_id: str | None, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": _line_id(),
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": request_id, "body": body},
        "error": None,
    }


def _error_line(custom_id: str, code: str, message: str) -> dict[str, Any]:
    return {"id": _line_id(), "custom_id": custom_id, "response": None, "error": {"code": code, "message": message}}


def _line_id() -> str:
    return "syncreq_" + uuid.uuid4().hex[:24]


def _error_body(exc: openai.APIStatusError) -> dict[str, Any]:
    """The provider's error answer as it sent it, in the `{"error": {...}}` shape ingest reads."""
    try:
        data = loads_bounded(exc.response.content)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return data
    message = None
    if isinstance(data, dict):
        message = data.get("error") if isinstance(data.get("error"), str) else data.get("message")
    text = message or exc.response.text[:1000] or exc.message
    return {"error": {"message": str(text), "type": None, "param": None, "code": None}}
