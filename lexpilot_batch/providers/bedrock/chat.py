"""Bedrock's synchronous call, `InvokeModel` with a record's `modelInput` as its body (boto3's
`bedrock-runtime` client), for the `sync` backend (`providers.sync.call`): what a wave's group
below a job's minimum (`engine.tail.below_minimum`), or `--tail-sync N`, sends a `bedrock/` model's
requests through, at the on-demand price.

Its answer is saved as the line a job's output would hold for it, so records are the same whichever
way a request travels (`bedrock.results`): `{"recordId", "modelOutput": <the response body>}`; a
refusal, or a failure that outlasted boto3's retries, as `{"recordId", "error": {"errorCode",
"errorMessage"}}` (a failure without an answer as 503, or 504 for a timeout: the engine sends it
again).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from lexpilot_batch.providers.bedrock import aws
from lexpilot_batch.providers.bedrock.errors import failure_of
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.sync.call import Answer, ChatCall, damaged_line


class BedrockChat(ChatCall):
    """`InvokeModel` (`POST /model/{modelId}/invoke`) with a record's `modelInput`."""

    id_key = "recordId"
    route = "/model/{modelId}/invoke"

    def new_client(self) -> Any:
        made = aws.client(self.endpoint, "bedrock-runtime", self.timeout, self.max_retries + 1)
        # Each call carries its record's id as every API's synchronous call does (`sync.call`): AWS
        # ignores a header it does not know, the simulated provider draws the record's answer by it.
        self._calling = threading.local()  # the record each thread is sending (the sync runner's pool)
        aws.tag_call(made, "InvokeModel", aws.HEADER, lambda: getattr(self._calling, "id", None))
        return made

    def payload(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        body = line.get("modelInput")
        if not isinstance(body, dict):
            raise damaged_line(where, "a recordId and a modelInput object")
        return body

    def post(self, line_id: str, payload: dict[str, Any]) -> Answer:
        self._calling.id = line_id
        answer = self.client.invoke_model(
            modelId=self.model,
            body=json.dumps(payload, ensure_ascii=False).encode("utf-8"),
            contentType="application/json",
            accept="application/json",
        )
        meta = answer.get("ResponseMetadata") or {}
        return Answer(int(meta.get("HTTPStatusCode") or 200), answer["body"].read(), meta.get("RequestId"))

    def answer_line(self, line_id: str, answer: Answer, data: dict[str, Any]) -> dict[str, Any]:
        return {"recordId": line_id, "modelOutput": data}

    def refusal_line(self, line_id: str, status: int, exc: BaseException) -> dict[str, Any]:
        failure = failure_of(exc)
        return {
            "recordId": line_id,
            "error": {"errorCode": status, "errorMessage": failure.message if failure else str(exc)},
        }

    def failure_line(self, line_id: str, status: int | None, message: str, exc: BaseException | None) -> dict[str, Any]:
        failure = failure_of(exc) if exc is not None else None
        code = status if status is not None else 504 if failure is not None and failure.timed_out else 503
        return {"recordId": line_id, "error": {"errorCode": code, "errorMessage": message}}

    def answered(self, line: dict[str, Any]) -> bool:
        return isinstance(line.get("modelOutput"), dict)

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    def not_found_hint(self, result: Any) -> str:
        return "Check the model id (the Bedrock console's Model catalog) and that it is offered in your Region"
