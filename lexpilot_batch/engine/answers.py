"""What one result line means for its request (SPEC §6), pure: an answer with its text and parsed
value, or a failure of one kind, and the tokens it used. This is the one place that decides it.

Failure kinds (`state.states`; the kind decides which attempt budget a retry uses: `due.exhausted`):

| kind | what | examples |
| --- | --- | --- |
| `transport` | the provider or the network failed; the same request may pass | error-file lines, HTTP 5xx, 408, 409 |
| `invalid` | the answer is there but unusable | truncated (`finish_reason=length`), filtered (`finish_reason=content_filter`, even with partial text), cut off for another reason (`finish_reason` outside `COMPLETE`: DeepSeek's `insufficient_system_resource`, Gemini's `OTHER`, `CONTINUATION`, ...), empty, longer than `MAX_ANSWER_CHARS`, malformed for its parser; a result line over the bounds of `result_lines` or not UTF-8 |
| `refusal` | the model declined to answer (`message.refusal`) | "I can't help with that" |
| `permanent` | the provider refused the request itself: sending it again cannot pass | HTTP 400 `context_length_exceeded`, 404 unknown model, any 4xx but 408, 409 and 429 (also in an error line that carries its status, as vLLM's `run_batch` writes them) |
| `unexecuted` | nobody ran it: not the request's fault | the batch expired, was cancelled, or was lost by the provider; HTTP 429 |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lexpilot_batch.benchmark import judges
from lexpilot_batch.benchmark.judges import MalformedOutput
from lexpilot_batch.errors import transient_status
from lexpilot_batch.state.states import INVALID, PERMANENT, REFUSAL, TRANSPORT, UNEXECUTED
from lexpilot_batch.util.redaction import redact, redact_cut

# Error codes of requests a batch never ran: not the request's fault, so they do not use up its
# --retries (they have a budget of their own, see threads.UNEXECUTED_ATTEMPTS). `batch_lost` is
# ours: a batch the provider no longer knows (`batches`).
UNEXECUTED_CODES = frozenset({"batch_expired", "batch_cancelled", "batch_lost", "rate_limit_exceeded", "rate_limited"})
# Error codes (in an error-file line's `error`) no retry can fix.
PERMANENT_CODES = frozenset({"context_length_exceeded", "invalid_prompt", "model_not_found"})

# The finish reasons of a whole answer: OpenAI's (`stop`, and the tool calls a chat never asks
# for), a missing one (some compatible servers send none, or DashScope's "null"), and those of
# servers that copy the API with their own words (TGI's `eos_token`, `stop_sequence`). Any other
# reason says the answer was cut short: DeepSeek's `insufficient_system_resource` (DeepSeek API
# docs, "finish_reason"), Gemini's `OTHER`, `LANGUAGE`, `CONTINUATION`, `MALFORMED_RESPONSE`, ...
# (google-genai `types.FinishReason`, passed through by `providers.google.results`), vLLM's
# `abort`. `length` and `content_filter` have their own messages below.
COMPLETE = frozenset({"stop", "tool_calls", "function_call", None, "null", "eos_token", "stop_sequence"})

# The longest answer (its content, thinking in it included) a request may have: longer is no
# answer. The benchmark's answers are a few thousand Chinese characters, and max_tokens (8192 by
# default) bounds a whole one at about 12,000 Chinese characters (1-1.5 a token), or 33,000 of
# English at 4 a token: 100,000 leaves three times that, and keeps a runaway or hostile answer
# from being stored, scored, or pasted into the judge's next prompt. Retried like a truncation.
MAX_ANSWER_CHARS = 100_000


def status_kind(status: object) -> str:
    """The kind of failure an HTTP status other than 200 means for its request."""
    if status == 429:
        return UNEXECUTED  # refused before running, for the rate: not the request's fault
    if isinstance(status, int) and 400 <= status < 500 and not transient_status(status):
        return PERMANENT  # the request's own fault; 408 and 409 may pass when sent again
    return TRANSPORT


_NO_USAGE = (None, None, None, None, None, None)


def _error_text(error: Any) -> str:
    """A result line's error as stored and shown: the provider's words, without any secret they echo."""
    if isinstance(error, dict) and isinstance(error.get("error"), dict) and "message" not in error:
        error = error["error"]  # `{"error": {...}}`: OpenAI's error body, vLLM's newer ErrorResponse
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        return redact(f"{code}: {message}" if code else str(message or error))
    return redact(str(error))


USD_TICKS = 10**10  # xAI's `cost_in_usd_ticks` a US dollar


def _usage(body: dict) -> tuple[int, int, int, int, int, float | None]:
    """(prompt, completion, cached, reasoning, cache-written) tokens, and the cost the provider
    reported for the request in US dollars (None where it reports none). Cached:
    `prompt_tokens_details.cached_tokens`, or DeepSeek's `prompt_cache_hit_tokens`
    (https://api-docs.deepseek.com/guides/kv_cache) where a body has only that. The cost: `usage.cost`,
    OpenRouter's "cost in credits" (https://openrouter.ai/docs/use-cases/usage-accounting, taken
    2026-12-06), a credit a US dollar; or `usage.cost_in_usd_ticks`, xAI's "exact cost you were
    charged", discounts applied, 10^10 ticks a US dollar (https://docs.x.ai/developers/cost-tracking,
    taken 2026-12-06; xai-sdk 1.21's `cost.USD_PER_TICK`), a number or, as protobuf's JSON writes
    an int64, a string of digits; what the cost report uses where every request reports one
    (`providers.charges`)."""
    usage = body.get("usage") or {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    cost = usage.get("cost")
    reported = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
    ticks = usage.get("cost_in_usd_ticks")
    if reported is None and isinstance(ticks, str) and ticks.isascii() and ticks.isdigit():
        ticks = int(ticks)
    if reported is None and isinstance(ticks, int) and not isinstance(ticks, bool):
        reported = ticks / USD_TICKS
    return (
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        int(prompt_details.get("cached_tokens") or usage.get("prompt_cache_hit_tokens") or 0),
        int(completion_details.get("reasoning_tokens") or 0),
        int(prompt_details.get("cache_write_tokens") or 0),  # Anthropic's writes (`results.usage`)
        reported if reported is not None and 0 <= reported < float("inf") else None,  # (NaN fails both)
    )


def answered_at(line: dict, now: float) -> float:
    """When a result line's request was answered: the `created` of its chat completion (Unix
    seconds, the provider's own clock, which is what a provider pricing by the hour bills by:
    `providers.schedules`), else `now` (this machine's clock at ingest)."""
    response = line.get("response")
    body = response.get("body") if isinstance(response, dict) else None
    created = body.get("created") if isinstance(body, dict) else None
    if isinstance(created, (int, float)) and not isinstance(created, bool) and 1e9 < created < 1e11:
        return float(created)
    return now


def parse_answer(content: str, parser: str, n_claims: int) -> tuple[str, Any]:
    """The usable text and value of a response, or `MalformedOutput`."""
    text = judges.parse_text(content)
    if parser == "text":
        return text, text
    if parser == "lca_label":
        return text, judges.parse_lca_label(content)
    if parser == "dcg_decision":
        return text, judges.parse_dcg_decision(content)
    if parser == "verdicts":
        return text, judges.parse_verdicts(content, n_claims)
    raise ValueError(f"unknown parser {parser!r}")


def read_content(content: str, parser: str, n_claims: int) -> tuple[bool, str | None, Any, str | None]:
    """(ok, text, value, error) of a response's content."""
    try:
        text, value = parse_answer(content, parser, n_claims)
    except MalformedOutput as exc:
        return False, None, None, f"malformed: {exc}"
    return True, text, value, None


def judge_line(
    line: dict, parser: str, n_claims: int, answer: Callable[[str, str, int], tuple] = read_content
) -> tuple[bool, str | None, Any, str | None, str | None, tuple]:
    """Apply SPEC §6's validation to one result line: (ok, text, value, error, error_kind, usage as
    `_usage` gives it, or four Nones), a plain tuple, as ingest judges every line of every file.
    `answer` reads the content (`read_content`, or ingest's memo of it)."""
    error = line.get("error")
    response = line.get("response")
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        # vLLM's `run_batch` writes a refused request as an error line with its status (400, the
        # body null, the error a string or an `ErrorResponse`: vllm/entrypoints/openai/run_batch.py,
        # `make_error_request_output`): a 4xx there is the request's own fault, like a 4xx answer.
        status = response.get("status_code") if isinstance(response, dict) else None
        if code in UNEXECUTED_CODES:
            kind = UNEXECUTED
        elif code in PERMANENT_CODES:
            kind = PERMANENT
        elif isinstance(status, int) and not isinstance(status, bool) and status != 200:
            kind = status_kind(status)
        else:
            kind = TRANSPORT
        return False, None, None, _error_text(error), kind, _NO_USAGE
    if not isinstance(response, dict):
        return False, None, None, "no response and no error in the result line", TRANSPORT, _NO_USAGE
    status = response.get("status_code")
    body = response.get("body")
    if status != 200:
        detail = body.get("error") if isinstance(body, dict) else body
        return False, None, None, f"HTTP {status}: {_error_text(detail)}", status_kind(status), _NO_USAGE
    if not isinstance(body, dict) or not body.get("choices"):
        return False, None, None, "response body has no choices", TRANSPORT, _NO_USAGE
    usage = _usage(body)
    choice = body["choices"][0] or {}
    message = choice.get("message") or {}
    content = message.get("content")
    finish = choice.get("finish_reason")
    if finish == "length":
        return False, None, None, "truncated (finish_reason=length)", INVALID, usage
    if finish == "content_filter":
        # The provider's filter cut or withheld the answer: partial text is never scored.
        return False, None, None, "filtered by the provider (finish_reason=content_filter)", INVALID, usage
    if finish not in COMPLETE:
        return False, None, None, f"cut off (finish_reason={redact_cut(str(finish), 60)})", INVALID, usage
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal.strip():
        return False, None, None, f"refusal: {redact_cut(refusal.strip(), 500)}", REFUSAL, usage
    if not isinstance(content, str) or not content.strip():
        return False, None, None, "empty content", INVALID, usage
    if len(content) > MAX_ANSWER_CHARS:
        error = f"too long: {len(content):,} characters, over the {MAX_ANSWER_CHARS:,} an answer may hold"
        return False, None, None, error, INVALID, usage
    ok, text, value, error = answer(content, parser, n_claims)
    if not ok:
        return False, None, None, error, INVALID, usage
    return True, text, value, None, None, usage


def own_words(line: dict) -> tuple[str | None, str | None]:
    """(content, reasoning) of a result line as the model returned them, whole: what a judge said,
    kept beside what was decided (`state.judge_words`) whether its answer was usable or not. Nones
    where the line holds no message (an error line, a failed status), and secrets it echoes redacted."""
    response = line.get("response")
    body = response.get("body") if isinstance(response, dict) else None
    choices = body.get("choices") if isinstance(body, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return None, None
    content, reasoning = message.get("content"), message.get("reasoning_content")
    return (
        redact(content[:MAX_ANSWER_CHARS]) if isinstance(content, str) and content else None,
        redact(reasoning[:MAX_ANSWER_CHARS]) if isinstance(reasoning, str) and reasoning else None,
    )
