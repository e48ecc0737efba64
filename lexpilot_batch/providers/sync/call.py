"""One request line sent as its API's synchronous call, for the `sync` backend (`providers.sync.runner`).

A request file holds lines in its API's batch input shape (`providers.lines`). The sync backend sends
each as that API's synchronous call and saves the answer as a line of the same API's batch *output*
shape, holding what the provider answered untouched (but for the secrets `sync` replaces in
failure lines), so that a sync file is read by ingest and by `doctor` exactly as a downloaded
batch's results are (`providers.results`):

| api | a line's call | its result line |
| --- | --- | --- |
| `openai` | `POST /chat/completions`, the body as compiled | `{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}` |
| `anthropic` | `POST /v1/messages`, the params as compiled (`anthropic.chat`) | `{"custom_id", "result": {"type": "succeeded", "message"}}`, or `errored` with the error answer |
| `google` | `POST models/{model}:generateContent`, the request as compiled (`google.chat`) | `{"key", "response"}`, or `{"key", "error"}` |

Each call is sent exactly as compiled, through the SDK's low-level call, and carries the line's id
as `X-Client-Request-Id` (OpenAI logs it for support, the other APIs ignore it, and the simulated
provider answers by it exactly as it answers a batch line with that id). A failure that outlasted
the SDK's retries (timeout, connection, 5xx) is written as the API's own transport failure, which
the engine retries as a new attempt; a refusal on the request's merits (a 400) as the API's error
answer. What each outcome means for the run (`OK` ... `RATE`) is `sync`'s to act on.

Each call has two spellings: `post` / `send` through the SDK's client, for a caller on a thread
(`preflight`'s listing, an API without an asynchronous client), and `apost` / `asend` through its
asynchronous client (`new_async_client`, one per run of the runner's event loop), awaited as one
task among many. Both give the same `CallResult` for the same answer (`_failed`, `_answered`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.errors import LexpilotError, transient_status
from lexpilot_batch.providers.errors import Failure, provider_error
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.util.jsonbounds import BeyondBounds, loads_bounded

try:  # the HTTP library under the SDKs: httpx2 from openai 3, httpx before
    import httpx2 as http
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx as http  # type: ignore[no-redef]

# The raw response each API's low-level call is cast to: its JSON keeps every field the provider sent.
Response = http.Response

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
    headers: Mapping[str, str] | None = None  # the answer's headers (its rate limits: `sync.window`)


@dataclass(frozen=True)
class Answer:
    """What a synchronous call answered: its status, raw body and the provider's request id."""

    status: int
    content: bytes | str
    request_id: str | None = None
    headers: Mapping[str, str] | None = None  # the answer's headers, where the SDK gives them


class ChatCall(ABC):
    """One API's synchronous call at one endpoint: a request line's payload, sending it, its result
    line. A provider's folder supplies the call (`post`) and the shapes of its result lines; the
    template (`send`) decides what every outcome means, for every API alike."""

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
    def post(self, line_id: str, payload: dict[str, Any]) -> Answer:
        """Send one request as compiled, through the SDK's retries, carrying `line_id` as
        `CLIENT_REQUEST_ID`; raises its SDK's exceptions."""

    @abstractmethod
    def answer_line(self, line_id: str, answer: Answer, data: dict[str, Any]) -> dict[str, Any]:
        """The result line of an answer whose body is `data`."""

    @abstractmethod
    def refusal_line(self, line_id: str, status: int, exc: BaseException) -> dict[str, Any]:
        """The result line of a request refused on its merits: the provider's error answer as it sent it."""

    @abstractmethod
    def failure_line(self, line_id: str, status: int | None, message: str, exc: BaseException | None) -> dict[str, Any]:
        """The result line of a failure that outlasted the retries, or of an answer that is none (its
        status when it has one, None for no answer), in the API's own transport-failure shape:
        ingest fails it as a transport failure, and the engine sends it again."""

    def models(self) -> list[str] | None:
        """The model names the endpoint lists now (its live catalogue, as `preflight` reads it), or
        None for an API with no listing; raises its SDK's exceptions."""
        return None

    def model_of(self, payload: dict[str, Any]) -> str:
        """The model a request names, for messages."""
        return str(payload.get("model", "")) or self.model

    def new_async_client(self) -> Any | None:
        """The SDK's asynchronous client, for one run's event loop (its connections belong to the loop
        they were opened on, so each run makes its own and closes it, `close_async_client`); None for
        an API whose SDK has none, whose calls the runner then sends from threads (`send`)."""
        return None

    async def close_async_client(self, client: Any) -> None:
        """Close what `new_async_client` made, ending its connections."""
        await client.close()

    async def apost(self, client: Any, line_id: str, payload: dict[str, Any]) -> Answer:
        """`post` through `client` (`new_async_client`), awaited on its event loop."""
        raise NotImplementedError(f"{type(self).__name__} has no asynchronous client")

    def send(self, line_id: str, payload: dict[str, Any]) -> CallResult:
        """One request, through the SDK's retries; never raises for an HTTP or network failure: what
        came back is a result line, and what it means for the run a `kind_of`."""
        try:
            answer = self.post(line_id, payload)
        except Exception as exc:
            return self._failed(line_id, payload, exc)
        return self._answered(line_id, payload, answer)

    async def asend(self, client: Any, line_id: str, payload: dict[str, Any]) -> CallResult:
        """`send` through the asynchronous client (`apost`): the same outcomes, the same lines."""
        try:
            answer = await self.apost(client, line_id, payload)
        except Exception as exc:
            return self._failed(line_id, payload, exc)
        return self._answered(line_id, payload, answer)

    def _failed(self, line_id: str, payload: dict[str, Any], exc: Exception) -> CallResult:
        """What a call that raised `exc` means; `exc` itself when its SDK did not raise it."""
        model = self.model_of(payload)
        failure = self.failure(exc)
        if failure is None:
            raise exc
        headers = getattr(getattr(exc, "response", None), "headers", None)
        if failure.status is None:
            line = self.failure_line(line_id, None, f"{failure.message}, {self.after_retries()}", exc)
            return CallResult(line_id, SUSPECT, line, model, exc)
        kind = kind_of(failure.status)
        if kind in (FATAL, RATE):
            return CallResult(line_id, kind, None, model, exc, payload, headers)
        if transient_status(failure.status):
            message = f"HTTP {failure.status} {self.after_retries()}: {failure.message}"
            return CallResult(line_id, SUSPECT, self.failure_line(line_id, failure.status, message, exc), model, exc)
        return CallResult(line_id, kind, self.refusal_line(line_id, failure.status, exc), model, exc, headers=headers)

    def _answered(self, line_id: str, payload: dict[str, Any], answer: Answer) -> CallResult:
        model = self.model_of(payload)
        try:
            data = loads_bounded(answer.content)  # the line it becomes is read within these bounds
        except BeyondBounds as exc:  # this request's answer, not the endpoint: written at once
            message = f"HTTP {answer.status} with an answer no result line may hold: {exc}"
            return CallResult(line_id, REFUSED, self.failure_line(line_id, answer.status, message, None), model)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            message = f"HTTP {answer.status} with a body that is not a JSON object"
            return CallResult(line_id, SUSPECT, self.failure_line(line_id, answer.status, message, None), model)
        return CallResult(line_id, OK, self.answer_line(line_id, answer, data), headers=answer.headers)

    @abstractmethod
    def answered(self, line: dict[str, Any]) -> bool:
        """Whether a result line written by `send` holds an answer."""

    @abstractmethod
    def failure(self, exc: BaseException) -> Failure | None:
        """What an exception of its SDK says (`providers.errors`); None for any other exception."""

    def not_found_hint(self, result: CallResult) -> str:
        """The advice a 404 adds: a wrong model or route."""
        return ""

    def error(self, result: CallResult, what: str) -> LexpilotError | None:
        """The user-facing error of a call that stops the run, or None for one its SDK did not raise."""
        failure = None if result.exc is None else self.failure(result.exc)
        if failure is None:
            return None
        return provider_error(failure, what, self.endpoint, self.not_found_hint(result))

    def after_retries(self) -> str:
        return f"after {self.max_retries} retries"


def kind_of(status: int) -> str:
    """What an HTTP status of a synchronous call means for the run: one table for every API. A 403
    or a 404 may mean the whole endpoint is wrong (held while in a streak, `sync`), as a failure
    that is "not now" (`errors.transient_status`) may mean it is down."""
    if status == 401:
        return FATAL
    if status == 429:
        return RATE
    if status in (403, 404) or transient_status(status):
        return SUSPECT
    return REFUSED


def damaged_line(where: str, fields: str) -> LexpilotError:
    return LexpilotError(
        f"{where} is not a batch request line (it needs {fields}); this request file is damaged, compile it again"
    )
