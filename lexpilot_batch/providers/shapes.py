"""What each API shape's result lines say, as the OpenAI batch output lines `answers` judges.

The raw provider files are saved under `responses/` untouched; this module is the one place that
reads an Anthropic or a Gemini result line into `{"custom_id", "response": {"status_code", "body":
chat.completion}, "error"}`, so that every rule of `answers` (truncation, filters, refusals, empty
answers, malformed judges, what a failure costs) holds for every provider alike. Pure: no SDK.

| Anthropic `result.type` / Gemini line | read as |
| --- | --- |
| `succeeded` / `response` | status 200; text blocks (parts) joined as the content, thinking blocks (`thought` parts) as `reasoning_content`, never the answer; `stop_reason` / `finishReason` as `finish_reason` |
| `errored` / `error` or `status` | the HTTP status the error type (gRPC code) stands for: `invalid_request_error` 400 fails its thread at once, `rate_limit_error` 429 was never run, `overloaded_error` 529 and `api_error` 500 are transport failures |
| `canceled`, `expired` / a CANCELLED status | never run: `batch_cancelled`, `batch_expired` (they use up no `--retries`) |

Usage: Anthropic's `input_tokens` plus its cache reads and writes are the prompt tokens
(`cache_read_input_tokens` the cached ones), `output_tokens` (which include thinking) the
completion tokens, `output_tokens_details.thinking_tokens` the reasoning ones; Gemini's
`promptTokenCount` the prompt tokens (`cachedContentTokenCount` of them cached),
`candidatesTokenCount` plus `thoughtsTokenCount` the completion tokens, the latter the reasoning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lexpilot_batch.providers.apis import ANTHROPIC, GOOGLE, OPENAI, SIMULATED
from lexpilot_batch.providers.lines import our_id
from lexpilot_batch.providers.registry import provider_of

Normalise = Callable[[dict], dict]


def file_api(row: Mapping[str, Any]) -> str:
    """The API shape of a compiled file's lines and results: its provider's on the `batch` backend
    and on `sync` (a provider's chat-completions-only models, and the groups of a batch route that
    `--tail-sync` sends through its API's synchronous call: `providers.chat`); OpenAI's on every
    other (manual, and the simulated provider in-process, whose files name the endpoint `simulated`)."""
    if row["backend"] not in ("batch", "sync") or not row["provider"] or row["endpoint"] == SIMULATED:
        return OPENAI
    return provider_of(row["provider"])[0].api


def normaliser(api: str, tag: str) -> Normalise | None:
    """How a result line of `api` reads as an OpenAI batch output line (None: it is one already).
    `tag` is the workspace's (`request_lines.id_tag`): an Anthropic id of another is not ours."""
    if api == ANTHROPIC:
        return lambda line: anthropic_result(line, tag)
    if api == GOOGLE:
        return google_result
    return None


def _usage(prompt: int, completion: int, cached: int, reasoning: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _chat(content: str | None, reasoning: list[str], finish: str, usage: dict, refusal: str | None = None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def _never_run(custom_id: Any, code: str, message: str) -> dict:
    return {"custom_id": custom_id, "response": None, "error": {"code": code, "message": message}}


def _failed(custom_id: Any, status: int, kind: Any, message: Any) -> dict:
    error = {"message": message, "type": kind, "code": kind}
    return {"custom_id": custom_id, "response": {"status_code": status, "body": {"error": error}}, "error": None}


# --- Anthropic Message Batches --------------------------------------------------------------------

# The HTTP status each error type of the Messages API stands for.
_ANTHROPIC_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "gateway_timeout_error": 504,
    "overloaded_error": 529,
}
# `stop_reason` as `finish_reason`: a paused turn or a full context is an answer cut short.
_ANTHROPIC_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "pause_turn": "length",
    "tool_use": "tool_calls",
}


def anthropic_result(line: dict, tag: str) -> dict:
    """One Message Batches result line as an OpenAI batch output line; its custom_id mapped back
    (`request_lines.our_id`), or left as it is when it is not this workspace's."""
    raw_id = line.get("custom_id")
    ours = our_id(raw_id, ANTHROPIC, tag) if isinstance(raw_id, str) else None
    custom_id = ours if ours is not None else raw_id
    result = _dict(line.get("result"))
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        return {
            "custom_id": custom_id,
            "response": {"status_code": 200, "body": _anthropic_chat(result["message"])},
            "error": None,
        }
    if kind == "errored":
        outer = _dict(result.get("error"))
        inner = _dict(outer.get("error")) or outer
        error_type = inner.get("type")
        status = _ANTHROPIC_STATUS.get(error_type, 500) if isinstance(error_type, str) else 500
        return _failed(custom_id, status, error_type, inner.get("message"))
    if kind == "canceled":
        return _never_run(custom_id, "batch_cancelled", "canceled: the batch was canceled before this request ran")
    if kind == "expired":
        return _never_run(custom_id, "batch_expired", "expired: the batch's 24 hours ran out before this request ran")
    return _never_run(custom_id, "unreadable_result", f"a Message Batches result of unknown type {kind!r}")


def _anthropic_chat(message: dict) -> dict:
    blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
    text = "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    thinking = [b["thinking"] for b in blocks if b.get("type") == "thinking" and isinstance(b.get("thinking"), str)]
    usage = _dict(message.get("usage"))
    cache_read = _int(usage.get("cache_read_input_tokens"))
    prompt = _int(usage.get("input_tokens")) + cache_read + _int(usage.get("cache_creation_input_tokens"))
    details = _dict(usage.get("output_tokens_details"))
    counted = _usage(prompt, _int(usage.get("output_tokens")), cache_read, _int(details.get("thinking_tokens")))
    stop = message.get("stop_reason")
    if stop == "refusal":  # the model declined: what it wrote before is no answer
        return _chat(None, thinking, "stop", counted, text.strip() or "the model refused (stop_reason=refusal)")
    return _chat(text, thinking, _ANTHROPIC_FINISH.get(str(stop), "stop"), counted)


# --- Gemini Batch Mode ----------------------------------------------------------------------------

# gRPC status codes (a Gemini result line's `status` / `error`) as HTTP statuses.
_RPC_STATUS = {
    3: 400,
    4: 504,
    5: 404,
    6: 409,
    7: 403,
    8: 429,
    9: 400,
    10: 409,
    11: 400,
    12: 501,
    13: 500,
    14: 503,
    16: 401,
}
_RPC_CANCELLED = 1
# Finish reasons of a candidate its provider's filters cut or withheld.
_GEMINI_FILTERED = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT"}
)


def google_result(line: dict) -> dict:
    """One Gemini batch result line (`key`, then `response` or an `error`/`status`) as an OpenAI
    batch output line."""
    custom_id = line.get("key")
    error = line.get("error") if isinstance(line.get("error"), dict) else line.get("status")
    if isinstance(error, dict) and error.get("code") not in (None, 0):
        code = error.get("code")
        if code == _RPC_CANCELLED:
            return _never_run(custom_id, "batch_cancelled", f"cancelled: {error.get('message')}")
        status = (code if code >= 100 else _RPC_STATUS.get(code, 500)) if isinstance(code, int) else 500
        return _failed(custom_id, status, error.get("status"), error.get("message"))
    response = line.get("response")
    if not isinstance(response, dict):
        return {"custom_id": custom_id, "response": None, "error": None}
    return {"custom_id": custom_id, "response": {"status_code": 200, "body": _gemini_chat(response)}, "error": None}


def _gemini_chat(response: dict) -> dict:
    meta = _dict(response.get("usageMetadata"))
    thoughts = _int(meta.get("thoughtsTokenCount"))
    usage = _usage(
        _int(meta.get("promptTokenCount")),
        _int(meta.get("candidatesTokenCount")) + thoughts,
        _int(meta.get("cachedContentTokenCount")),
        thoughts,
    )
    candidates = [c for c in response.get("candidates") or [] if isinstance(c, dict)]
    if not candidates:
        feedback = _dict(response.get("promptFeedback"))
        if feedback.get("blockReason"):  # the prompt itself was blocked
            return _chat("", [], "content_filter", usage)
        return {"object": "chat.completion", "choices": [], "usage": usage}
    candidate = candidates[0]
    content = _dict(candidate.get("content"))
    parts = [p for p in content.get("parts") or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    text = "".join(p["text"] for p in parts if not p.get("thought"))
    thinking = [p["text"] for p in parts if p.get("thought")]
    reason = candidate.get("finishReason")
    finish = "length" if reason == "MAX_TOKENS" else "content_filter" if str(reason) in _GEMINI_FILTERED else "stop"
    return _chat(text, thinking, finish, usage)
