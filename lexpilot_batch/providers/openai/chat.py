"""OpenAI's synchronous call, `POST /chat/completions` with a batch line's body, for the `sync`
backend (`providers.sync.call`): its answer saved as the batch output line the batch API would hold for it,
`{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`.
"""

from __future__ import annotations

import uuid
from typing import Any

import openai

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.errors import Failure, unversioned_base_url
from lexpilot_batch.providers.openai.errors import failure_of
from lexpilot_batch.providers.sync.call import CLIENT_REQUEST_ID, Answer, CallResult, ChatCall, Response
from lexpilot_batch.util.jsonbounds import loads_bounded
from lexpilot_batch.util.redaction import redact_cut


class OpenAIChat(ChatCall):
    """`POST /chat/completions` with a batch line's body."""

    route = "/chat/completions"

    def base_url(self) -> str:
        """Where the SDK's clients, the one and the asynchronous one alike, send the calls: the
        endpoint's base URL, unless a platform's chat completions live elsewhere (Fireworks')."""
        return self.endpoint.base_url

    def new_client(self) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=self.base_url(),
            api_key=self.endpoint.require_key(),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def new_async_client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=self.base_url(),
            api_key=self.endpoint.require_key(),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def models(self) -> list[str] | None:
        """`GET /models`: OpenAI's, and every OpenAI-compatible server's that has one."""
        return [m.id for m in self.client.models.list()]

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

    def post(self, line_id: str, payload: dict[str, Any]) -> Answer:
        # The low-level post sends the body exactly as compiled (the batch API's contract) and
        # returns the raw response, whose JSON keeps every field the provider sent.
        response = self.client.post(
            self.route, cast_to=Response, body=payload, options={"headers": {CLIENT_REQUEST_ID: line_id}}
        )
        return _answer(response)

    async def apost(self, client: openai.AsyncOpenAI, line_id: str, payload: dict[str, Any]) -> Answer:
        response = await client.post(
            self.route, cast_to=Response, body=payload, options={"headers": {CLIENT_REQUEST_ID: line_id}}
        )
        return _answer(response)

    def answer_line(self, line_id: str, answer: Answer, data: dict[str, Any]) -> dict[str, Any]:
        return _line(line_id, answer.status, answer.request_id, data)

    def refusal_line(self, line_id: str, status: int, exc: BaseException) -> dict[str, Any]:
        assert isinstance(exc, openai.APIStatusError)
        return _line(line_id, status, exc.request_id, _error_body(exc))

    def failure_line(self, line_id: str, status: int | None, message: str, exc: BaseException | None) -> dict[str, Any]:
        failure = failure_of(exc) if exc is not None else None
        if status == 408 or (failure is not None and failure.timed_out):
            code = "request_timeout"
        elif status is None:
            code = "connection_error"
        else:
            code = "server_error"
        if status is None and failure is not None and not failure.timed_out:
            message = f"could not connect to {self.endpoint.base_url}: {message}"
        return _error_line(line_id, code, message)

    def answered(self, line: dict[str, Any]) -> bool:
        response = line.get("response")
        return isinstance(response, dict) and response.get("status_code") == 200

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    def not_found_hint(self, result: CallResult) -> str:
        cause = unversioned_base_url(self.endpoint.base_url)
        if cause:
            return cause
        return (
            f"Check the model name ({result.model!r}) and that {self.endpoint.base_url}{self.route} is the "
            "provider's chat completions route"
        )


def _answer(response: Response) -> Answer:
    return Answer(response.status_code, response.content, response.headers.get("x-request-id"), response.headers)


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
    text = message or redact_cut(exc.response.text, 1000) or exc.message
    return {"error": {"message": str(text), "type": None, "param": None, "code": None}}
