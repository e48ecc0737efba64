"""Message Batches result lines, read as OpenAI batch output lines (`providers.results`).

| `result.type` | read as |
| --- | --- |
| `succeeded` | status 200; text blocks joined as the content, thinking blocks as `reasoning_content`, never the answer; `stop_reason` as `finish_reason` (a refusal is no answer) |
| `errored` | the HTTP status its error type stands for: `invalid_request_error` 400 fails its thread at once, `rate_limit_error` 429 was never run, `overloaded_error` 529 and `api_error` 500 are transport failures |
| `canceled`, `expired` | never run: `batch_cancelled`, `batch_expired` (they use up no `--retries`) |

Usage: `input_tokens` plus the cache reads and writes are the prompt tokens
(`cache_read_input_tokens` the cached ones), `output_tokens` (which include thinking) the
completion tokens, `output_tokens_details.thinking_tokens` the reasoning ones.
"""

from __future__ import annotations

from lexpilot_batch.providers import results as outputs
from lexpilot_batch.providers.anthropic.ids import our_id

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


def result(line: dict, tag: str) -> dict:
    """One Message Batches result line as an OpenAI batch output line; its custom_id mapped back
    (`ids.our_id`), or left as it is when it is not this workspace's."""
    raw_id = line.get("custom_id")
    ours = our_id(raw_id, tag) if isinstance(raw_id, str) else None
    custom_id = ours if ours is not None else raw_id
    result = outputs.as_dict(line.get("result"))
    kind = result.get("type")
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        return {
            "custom_id": custom_id,
            "response": {"status_code": 200, "body": _anthropic_chat(result["message"])},
            "error": None,
        }
    if kind == "errored":
        outer = outputs.as_dict(result.get("error"))
        inner = outputs.as_dict(outer.get("error")) or outer
        error_type = inner.get("type")
        status = _ANTHROPIC_STATUS.get(error_type, 500) if isinstance(error_type, str) else 500
        return outputs.failed(custom_id, status, error_type, inner.get("message"))
    if kind == "canceled":
        return outputs.never_run(
            custom_id, "batch_cancelled", "canceled: the batch was canceled before this request ran"
        )
    if kind == "expired":
        return outputs.never_run(
            custom_id, "batch_expired", "expired: the batch's 24 hours ran out before this request ran"
        )
    return outputs.never_run(custom_id, "unreadable_result", f"a Message Batches result of unknown type {kind!r}")


def _anthropic_chat(message: dict) -> dict:
    blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
    text = "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    thinking = [b["thinking"] for b in blocks if b.get("type") == "thinking" and isinstance(b.get("thinking"), str)]
    usage = outputs.as_dict(message.get("usage"))
    cache_read = outputs.as_int(usage.get("cache_read_input_tokens"))
    cache_write = outputs.as_int(usage.get("cache_creation_input_tokens"))
    prompt = outputs.as_int(usage.get("input_tokens")) + cache_read + cache_write
    details = outputs.as_dict(usage.get("output_tokens_details"))
    thought = outputs.as_int(details.get("thinking_tokens"))
    counted = outputs.usage(prompt, outputs.as_int(usage.get("output_tokens")), cache_read, thought, cache_write)
    stop = message.get("stop_reason")
    if stop == "refusal":  # the model declined: what it wrote before is no answer
        return outputs.chat_completion(
            None, thinking, "stop", counted, text.strip() or "the model refused (stop_reason=refusal)"
        )
    return outputs.chat_completion(text, thinking, _ANTHROPIC_FINISH.get(str(stop), "stop"), counted)
