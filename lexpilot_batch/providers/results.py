"""The one shape every result line is read as: an OpenAI batch output line, `{"custom_id",
"response": {"status_code", "body": chat.completion}, "error"}`, so that every rule of
`engine.answers` (truncation, filters, refusals, empty answers, malformed judges, what a failure
costs) holds for every provider alike. Each API's own result lines are read into it by its folder
(`anthropic.results`, `google.results`); pure, no SDK.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# How a result line of an API reads as an OpenAI batch output line.
Normalise = Callable[[dict], dict]


def usage(prompt: int, completion: int, cached: int, reasoning: int, written: int = 0) -> dict[str, Any]:
    """OpenAI's usage; `written`, the prompt tokens written to a cache (Anthropic's
    `cache_creation_input_tokens`), kept beside `cached_tokens` as `cache_write_tokens` (no OpenAI
    field: read by `engine.answers`, priced at the model's `cache_write`)."""
    details: dict[str, Any] = {"cached_tokens": cached}
    if written:
        details["cache_write_tokens"] = written
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": details,
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def as_dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def chat_completion(
    content: str | None, reasoning: list[str], finish: str, usage: dict, refusal: str | None = None
) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def never_run(custom_id: Any, code: str, message: str) -> dict:
    return {"custom_id": custom_id, "response": None, "error": {"code": code, "message": message}}


def failed(custom_id: Any, status: int, kind: Any, message: Any) -> dict:
    error = {"message": message, "type": kind, "code": kind}
    return {"custom_id": custom_id, "response": {"status_code": status, "body": {"error": error}}, "error": None}


def map_choices(line: dict, choice: Callable[[dict[str, Any]], dict[str, Any]]) -> dict:
    """A batch output line with each choice of its response body read by `choice` (a native API's
    message shape into OpenAI's); the line as it is when its body holds no list of choices."""
    response = line.get("response")
    body = response.get("body") if isinstance(response, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        return line
    choices = [choice(c) if isinstance(c, dict) else c for c in body["choices"]]
    return {**line, "response": {**response, "body": {**body, "choices": choices}}}  # type: ignore[dict-item]
