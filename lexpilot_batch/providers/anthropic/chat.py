"""Anthropic's synchronous call, `POST /v1/messages` with a Message Batches request's params (the
SDK's low-level post, as the OpenAI call does), for the `sync` backend (`providers.sync.call`): what
`--tail-sync N` sends a wave's small group of an `anthropic/` model through.

Its answer is saved as the line the batch's results would hold for it, so records are the same
whichever way a request travels: `{"custom_id", "result": {"type": "succeeded", "message": <the
Message as sent>}}`; a refusal on the request's merits as `errored` with the error answer; a failure
that outlasted the SDK's retries as `errored` with an `api_error` (`timeout_error` for a timeout,
the provider's own type for a 5xx), which the engine retries.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.anthropic.errors import error_text, failure_of
from lexpilot_batch.providers.anthropic.spec import EXTRA
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.sync.call import CLIENT_REQUEST_ID, Answer, ChatCall, Response, damaged_line


class AnthropicChat(ChatCall):
    """`POST /v1/messages` with a Message Batches request's params."""

    route = "/v1/messages"

    def new_client(self) -> Any:
        self.sdk = EXTRA.require()
        return self.sdk.Anthropic(
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.require_key(),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def new_async_client(self) -> Any:
        return self.sdk.AsyncAnthropic(
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.require_key(),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def models(self) -> list[str] | None:
        """`GET /v1/models`, every page (the SDK's iterator)."""
        return [m.id for m in self.client.models.list(limit=1000)]

    def payload(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        params = line.get("params")
        if not isinstance(params, dict):
            raise damaged_line(where, "a custom_id and a params object")
        return params

    def post(self, line_id: str, payload: dict[str, Any]) -> Answer:
        response = self.client.post(
            self.route, cast_to=Response, body=payload, options={"headers": {CLIENT_REQUEST_ID: line_id}}
        )
        return Answer(response.status_code, response.content, headers=response.headers)

    async def apost(self, client: Any, line_id: str, payload: dict[str, Any]) -> Answer:
        response = await client.post(
            self.route, cast_to=Response, body=payload, options={"headers": {CLIENT_REQUEST_ID: line_id}}
        )
        return Answer(response.status_code, response.content, headers=response.headers)

    def answer_line(self, line_id: str, answer: Answer, data: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": line_id, "result": {"type": "succeeded", "message": data}}

    def refusal_line(self, line_id: str, status: int, exc: BaseException) -> dict[str, Any]:
        body = getattr(exc, "body", None)
        error = body if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
        error = error or {"type": "error", "error": {"type": "invalid_request_error", "message": error_text(exc)}}
        return {"custom_id": line_id, "result": {"type": "errored", "error": error}}

    def failure_line(self, line_id: str, status: int | None, message: str, exc: BaseException | None) -> dict[str, Any]:
        failure = failure_of(self.sdk, exc) if exc is not None else None
        if status == 408 or (failure is not None and failure.timed_out):
            kind = "timeout_error"
        else:
            kind = (_error_type(exc) if exc is not None and status is not None else None) or "api_error"
        error = {"type": "error", "error": {"type": kind, "message": message}}
        return {"custom_id": line_id, "result": {"type": "errored", "error": error}}

    def answered(self, line: dict[str, Any]) -> bool:
        result = line.get("result")
        return isinstance(result, dict) and result.get("type") == "succeeded"

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(self.sdk, exc)


def _error_type(exc: Any) -> str | None:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    return kind if isinstance(kind, str) else None
