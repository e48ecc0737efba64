"""xAI batch results read as OpenAI batch output lines (`providers.results`).

An xAI batch's results are read page by page (`GET /v1/batches/{batch_id}/results`) and saved as
they came, one result per line (`xai.batch`): `{"batch_request_id", "batch_result": {"response":
{"chat_get_completion": <a chat completion>}}}` for an answer, the chat completion as
`/v1/chat/completions` answers it (its message's `reasoning_content`, its `usage` with
`prompt_tokens_details.cached_tokens` and `completion_tokens_details.reasoning_tokens`), or an
`error` `{"code", "message"}` (google.rpc's `Status`, the `error` of the official SDK's
`batch_pb2.BatchResult`, 1.21.0) for a request that failed. The REST guide
(https://docs.x.ai/developers/advanced-api-usage/batch-api, taken 2026-12-06) shows the request's
shape, not the result's: the wrapping `batch_result` is what xAI's answers and every client of them
read (the REST names mirror the request's, `batch_request.chat_get_completion`); an `error` (or an
`error_message`) beside it rather than inside is read as well. The `sync` backend's answers, saved
as OpenAI's output lines, are read as they are.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers import results as outputs


def result(line: dict) -> dict:
    """One xAI result as an OpenAI batch output line; a line that is one already (the `sync`
    backend's answers to chat completions: `openai.chat`) as it is."""
    if "batch_request_id" not in line and "custom_id" in line:
        return line
    cid = line.get("batch_request_id")
    wrapped = outputs.as_dict(line.get("batch_result"))
    answer = outputs.as_dict(wrapped.get("response")).get("chat_get_completion")
    if isinstance(answer, dict):
        return {"custom_id": cid, "response": {"status_code": 200, "body": answer}, "error": None}
    error: Any = wrapped.get("error", line.get("error"))
    if not isinstance(error, dict):
        error = {"message": error or line.get("error_message") or "the request failed without a message"}
    code = error.get("code")
    return {
        "custom_id": cid,
        "response": None,
        "error": {"code": None if code is None else str(code), "message": error.get("message")},
    }
