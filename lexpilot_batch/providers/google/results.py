"""Gemini Batch Mode result lines (`key`, then `response` or an `error`/`status`), read as OpenAI
batch output lines (`providers.results`).

A response's text parts are joined as the content, `thought` parts as `reasoning_content`, never the
answer; `finishReason` MAX_TOKENS is a truncation, the filters' reasons a `content_filter`, any
other but STOP an answer cut short (`_finish`). An
error's gRPC code stands for an HTTP status (CANCELLED: never run). Usage: `promptTokenCount` the
prompt tokens (`cachedContentTokenCount` of them cached), `candidatesTokenCount` plus
`thoughtsTokenCount` the completion tokens, the latter the reasoning.
"""

from __future__ import annotations

from lexpilot_batch.providers import results as outputs

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
# google-genai `types.FinishReason`'s reasons for a candidate a filter stopped: safety, recitation,
# the term blocklist, prohibited content, sensitive personal data, their image counterparts, and
# MODEL_ARMOR ("The model response was blocked by Model Armor", Vertex AI's screening; the SDK notes
# the Gemini API does not send it).
_GEMINI_FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)


def _finish(reason: object) -> str:
    """A candidate's `finishReason` as a `finish_reason`: STOP a whole answer, MAX_TOKENS a
    truncation, the filters' reasons a `content_filter`; any other (google-genai
    `types.FinishReason`: OTHER, LANGUAGE, CONTINUATION, ESCALATION, MALFORMED_RESPONSE,
    FINISH_REASON_UNSPECIFIED, ...) passes through as itself, which `engine.answers` reads as an
    answer cut short. A candidate without a reason yet is FINISH_REASON_UNSPECIFIED."""
    if reason == "STOP":
        return "stop"
    if reason == "MAX_TOKENS":
        return "length"
    if str(reason) in _GEMINI_FILTERED:
        return "content_filter"
    return str(reason or "FINISH_REASON_UNSPECIFIED")


def result(line: dict) -> dict:
    """One Gemini batch result line (`key`, then `response` or an `error`/`status`) as an OpenAI
    batch output line."""
    custom_id = line.get("key")
    error = line.get("error") if isinstance(line.get("error"), dict) else line.get("status")
    if isinstance(error, dict) and error.get("code") not in (None, 0):
        code = error.get("code")
        if code == _RPC_CANCELLED:
            return outputs.never_run(custom_id, "batch_cancelled", f"cancelled: {error.get('message')}")
        status = (code if code >= 100 else _RPC_STATUS.get(code, 500)) if isinstance(code, int) else 500
        return outputs.failed(custom_id, status, error.get("status"), error.get("message"))
    response = line.get("response")
    if not isinstance(response, dict):
        return {"custom_id": custom_id, "response": None, "error": None}
    return {"custom_id": custom_id, "response": {"status_code": 200, "body": _gemini_chat(response)}, "error": None}


def _gemini_chat(response: dict) -> dict:
    meta = outputs.as_dict(response.get("usageMetadata"))
    thoughts = outputs.as_int(meta.get("thoughtsTokenCount"))
    usage = outputs.usage(
        outputs.as_int(meta.get("promptTokenCount")),
        outputs.as_int(meta.get("candidatesTokenCount")) + thoughts,
        outputs.as_int(meta.get("cachedContentTokenCount")),
        thoughts,
    )
    candidates = [c for c in response.get("candidates") or [] if isinstance(c, dict)]
    if not candidates:
        feedback = outputs.as_dict(response.get("promptFeedback"))
        if feedback.get("blockReason"):  # the prompt itself was blocked
            return outputs.chat_completion("", [], "content_filter", usage)
        return {"object": "chat.completion", "choices": [], "usage": usage}
    candidate = candidates[0]
    content = outputs.as_dict(candidate.get("content"))
    parts = [p for p in content.get("parts") or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    text = "".join(p["text"] for p in parts if not p.get("thought"))
    thinking = [p["text"] for p in parts if p.get("thought")]
    reason = candidate.get("finishReason")
    finish = _finish(reason)
    return outputs.chat_completion(text, thinking, finish, usage)
