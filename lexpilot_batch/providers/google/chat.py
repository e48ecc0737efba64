"""Gemini's synchronous call, `models/{model}:generateContent` with a batch line's request (the
genai client's low-level request: its `generate_content` re-encodes a request on the way,
`thinkingConfig` included, and would not send it as compiled), for the `sync` backend
(`providers.sync.call`): what `--tail-sync N` sends a wave's small group of a `google/` model through.

Its answer is saved as the line the batch's results would hold for it: `{"key", "response": <the
GenerateContentResponse as sent>}`, or `{"key", "error": {code, message, status}}` with the HTTP
status as the code.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.google import client
from lexpilot_batch.providers.google.errors import failure_of
from lexpilot_batch.providers.google.spec import EXTRA
from lexpilot_batch.providers.sync.call import CLIENT_REQUEST_ID, Answer, ChatCall, damaged_line


class GeminiChat(ChatCall):
    """`models/{model}:generateContent` with a Gemini batch line's request."""

    id_key = "key"

    def new_client(self) -> Any:
        sdk_client = self._sdk_client()
        # The low-level request sends a request as compiled; `models.generate_content` re-encodes it.
        self._request: Any = _low_level(sdk_client, "request")
        return sdk_client

    def new_async_client(self) -> Any:
        """A genai client whose `aio` side's low-level `async_request` `apost` awaits (the client is
        kept whole: collecting it closes its `aio` side too)."""
        sdk_client = self._sdk_client()
        _low_level(sdk_client.aio, "async_request")
        return sdk_client

    async def close_async_client(self, client: Any) -> None:
        await client.aio.aclose()
        client.close()

    def _sdk_client(self) -> Any:
        genai = EXTRA.require()
        self.errors = EXTRA.require("google.genai.errors")
        types = EXTRA.require("google.genai.types")
        return genai.Client(
            vertexai=False,
            api_key=self.endpoint.require_key(),
            http_options=client.http_options(types, self.endpoint, self.timeout, self.max_retries),
        )

    def models(self) -> list[str] | None:
        """`GET models` (the SDK's `models.list`, every page), each name without `models/`."""
        return [str(m.name or "").removeprefix("models/") for m in self.client.models.list()]

    def payload(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        request = line.get("request")
        if not isinstance(request, dict):
            raise damaged_line(where, "a key and a request object")
        return request

    def path(self) -> str:
        """The call's path under the client's base URL (Vertex AI's differs, `vertex.chat`)."""
        return f"models/{self.model}:generateContent"

    def post(self, line_id: str, payload: dict[str, Any]) -> Answer:
        response = self._request("post", self.path(), payload, {"headers": {CLIENT_REQUEST_ID: line_id}})
        return Answer(200, response.body or "", headers=getattr(response, "headers", None))

    async def apost(self, client: Any, line_id: str, payload: dict[str, Any]) -> Answer:
        request = _low_level(client.aio, "async_request")
        response = await request("post", self.path(), payload, {"headers": {CLIENT_REQUEST_ID: line_id}})
        return Answer(200, response.body or "", headers=getattr(response, "headers", None))

    def model_of(self, payload: dict[str, Any]) -> str:
        return self.model  # named by the call, not the line

    def answer_line(self, line_id: str, answer: Answer, data: dict[str, Any]) -> dict[str, Any]:
        return {"key": line_id, "response": data}

    def refusal_line(self, line_id: str, status: int, exc: BaseException) -> dict[str, Any]:
        details = getattr(exc, "details", None)
        error = details.get("error") if isinstance(details, dict) else None
        if not isinstance(error, dict):
            error = {
                "code": status,
                "message": getattr(exc, "message", str(exc)),
                "status": getattr(exc, "status", None),
            }
        return {"key": line_id, "error": error}

    def failure_line(self, line_id: str, status: int | None, message: str, exc: BaseException | None) -> dict[str, Any]:
        if status is None:  # no answer: the service was unavailable
            status, message = 503, f"no answer from {self.endpoint.base_url} ({message})"
        elif exc is None:  # an answer that is none: a bad gateway
            status = 502
        kind = getattr(exc, "status", None) if exc is not None else None
        return {"key": line_id, "error": {"code": status, "message": message, "status": kind or "UNAVAILABLE"}}

    def answered(self, line: dict[str, Any]) -> bool:
        return isinstance(line.get("response"), dict)

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(self.errors, exc)


def _low_level(sdk_client: Any, name: str) -> Any:
    """The genai client's low-level call `name` (`request`, `async_request`), which sends a request as
    compiled; a `ConfigError` for a version of google-genai without it."""
    call = getattr(getattr(sdk_client, "_api_client", None), name, None)
    if call is None:
        raise ConfigError(
            "this version of google-genai has no low-level request call for generateContent; "
            'install the version the extra names: python -m pip install "lexpilot-batch[google]"'
        )
    return call
