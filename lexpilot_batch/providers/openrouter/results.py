"""OpenRouter batch results read as OpenAI batch output lines (`providers.results`).

A finished batch's results (`GET /batches/{id}/results`, saved one per line by `openrouter.batch`)
are `{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error": {"message",
"param", "type"}}`, one of `response` and `error` null (the SDKs' `BatchResult`,
https://openrouter.ai/docs/client-sdks/python/components/batchresult, taken 2026-12-06): OpenAI's
output line but for the error's fields, read here as OpenAI's `{"code", "message"}`. A chat
completion's message carries a reasoning model's thinking in `reasoning`
(https://openrouter.ai/docs/use-cases/reasoning-tokens), read as `reasoning_content` so that thinking
is never taken for the answer; its `usage` is OpenAI's (`prompt_tokens_details.cached_tokens`,
`completion_tokens_details.reasoning_tokens`), with OpenRouter's `cost` beside it (the request's own
cost, kept and believed by the cost report: `engine.answers._usage`, `report.build`).
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers import results as outputs


def result(line: dict) -> dict:
    """One OpenRouter result line as an OpenAI batch output line."""
    error = line.get("error")
    if isinstance(error, dict) and "code" not in error:
        line = {**line, "error": {"code": error.get("type"), "message": error.get("message")}}
    return outputs.map_choices(line, _choice)


def _choice(choice: dict[str, Any]) -> dict[str, Any]:
    message = outputs.as_dict(choice.get("message"))
    reasoning = message.get("reasoning")
    if not isinstance(reasoning, str) or message.get("reasoning_content"):
        return choice
    flat = {k: v for k, v in message.items() if k != "reasoning"}
    return {**choice, "message": {**flat, "reasoning_content": reasoning}}
