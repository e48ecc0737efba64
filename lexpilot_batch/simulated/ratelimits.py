"""Rate limits of the simulated provider's synchronous calls: requests and tokens per minute per
(API, model), answered as OpenAI documents them.

Off by default; the fault keys `rpm` and `tpm` (`faults.Faults`) switch them on, either alone.
`MID_TIER` is a documented mid-tier pair to switch on: OpenAI's usage tier 3 for `gpt-4o-mini`,
5,000 requests and 4,000,000 tokens a minute (OpenAI's model page's tier table, as reproduced at
https://www.ai-buzz.com/ai-openai-rate-limits; the page itself, platform.openai.com/docs/models,
could not be read from here, and OpenAI changes these figures over time).

Each (API, model) has two token buckets, one of requests and one of tokens, each holding at most a
minute's allowance and refilled continuously at a minute's allowance per 60 seconds (OpenAI's guide
says a minute's limit may be enforced over shorter periods, e.g. 60,000 RPM as 1,000 a second; a
bucket is that, smoothly). A call the buckets cannot take is refused before its route runs, so a
refused call never changes state: HTTP 429 `rate_limit_exceeded`, of type `requests` or `tokens`,
with `retry-after` and `retry-after-ms` (the seconds until the buckets could take it; what the
`openai` SDK's `_calculate_retry_timeout` honours, milliseconds first). Every answer of a
synchronous call, a 429 or not, carries OpenAI's six headers (the "Rate limits in headers" table of
https://platform.openai.com/docs/guides/rate-limits): `x-ratelimit-limit-requests`,
`x-ratelimit-limit-tokens`, `x-ratelimit-remaining-requests`, `x-ratelimit-remaining-tokens`,
`x-ratelimit-reset-requests` and `x-ratelimit-reset-tokens`, the resets "the time until the rate
limit resets to its initial state" in OpenAI's spelling of a duration (`12ms`, `1s`, `6m0s`).

A call counts its request's tokens as the simulator counts a prompt (`completions.tokens`, of the
body's text) plus the most output tokens it asks for (`max_tokens`, `max_completion_tokens`,
generateContent's `maxOutputTokens`): OpenAI's guide counts a request's `max_tokens` against its
limit; how it estimates the prompt is not published, and this is the simulator's own estimate.
A call asking for more tokens than a minute allows is refused 429 every time, as OpenAI refuses a
request too large for the limit. The buckets live in memory, on the server's monotonic clock:
a restarted server starts with full buckets, as a minute later a real one would.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.simulated.completions import tokens
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.faults import Faults

# OpenAI's usage tier 3 for gpt-4o-mini (module docstring): a mid-tier account's limits.
MID_TIER_RPM = 5_000
MID_TIER_TPM = 4_000_000
MID_TIER = f"rpm={MID_TIER_RPM},tpm={MID_TIER_TPM}"
# Fields a request asks for its most output tokens in (OpenAI's, Anthropic's, generateContent's).
_OUTPUT_FIELDS = ("max_completion_tokens", "max_tokens", "maxOutputTokens")


def duration(seconds: float) -> str:
    """A duration as OpenAI's rate-limit headers spell it (Go's style): `12ms`, `1s`, `1.5s`, `6m0s`."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours >= 1:
        return f"{int(hours)}h{int(minutes)}m{text}"
    if minutes >= 1:
        return f"{int(minutes)}m{text}"
    return text


def request_tokens(body: Any) -> int:
    """What a request counts against the tokens a minute: its text's tokens and its output ceiling."""
    text = json.dumps(body, ensure_ascii=False) if body is not None else ""
    out = 0
    if isinstance(body, dict):
        config = body.get("generationConfig")
        for where in (body, config if isinstance(config, dict) else {}):
            for name in _OUTPUT_FIELDS:
                value = where.get(name)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    out = max(out, value)
    return tokens(text) + out


@dataclass
class _Bucket:
    level: float
    at: float

    def refill(self, capacity: float, now: float) -> None:
        self.level = min(capacity, self.level + (now - self.at) * capacity / 60.0)
        self.at = now


class RateLimits:
    """The buckets of one server (module docstring), on `clock` (the server's monotonic one)."""

    def __init__(self, clock: Callable[..., float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str, str], _Bucket] = {}

    def _bucket(self, api: str, model: str, kind: str, capacity: float, now: float) -> _Bucket:
        bucket = self._buckets.get((api, model, kind))
        if bucket is None:
            bucket = self._buckets[(api, model, kind)] = _Bucket(capacity, now)
        bucket.refill(capacity, now)
        return bucket

    def admit(self, faults: Faults, api: str, model: str, cost: int) -> dict[str, str]:
        """Take one call of `cost` tokens for `model` on `api` and return the headers its answer
        carries; raises the 429 `ApiError` (with those headers and `retry-after`) when the buckets
        cannot take it. Nothing is taken while `rpm` and `tpm` are both 0 (no headers either)."""
        limits = {"requests": (float(faults.rpm), 1.0), "tokens": (float(faults.tpm), float(cost))}
        limits = {kind: pair for kind, pair in limits.items() if pair[0] > 0}
        if not limits:
            return {}
        with self._lock:
            now = self._clock()
            buckets = {kind: self._bucket(api, model, kind, cap, now) for kind, (cap, _) in limits.items()}
            short = {
                kind: (need - buckets[kind].level) * 60.0 / cap
                for kind, (cap, need) in limits.items()
                if buckets[kind].level < need
            }
            if not short:
                for kind, (_, need) in limits.items():
                    buckets[kind].level -= need
            headers = self._headers(limits, buckets)
        if not short:
            return headers
        kind = max(short, key=lambda k: short[k])
        cap, need = limits[kind]
        wait = short[kind] if need <= cap else 60.0
        headers["retry-after"] = str(max(1, math.ceil(wait)))
        headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
        unit = "requests per min (RPM)" if kind == "requests" else "tokens per min (TPM)"
        if need > cap:
            message = f"Request too large for {model} on {unit}: Limit {cap:.0f}, Requested {need:.0f}."
        else:
            used = cap - buckets[kind].level
            message = (
                f"Rate limit reached for {model} (simulated) on {unit}: Limit {cap:.0f}, Used {used:.0f}, "
                f"Requested {need:.0f}. Please try again in {duration(wait)}."
            )
        raise ApiError(429, message, type=kind, param=None, code="rate_limit_exceeded", headers=headers)

    @staticmethod
    def _headers(limits: dict[str, tuple[float, float]], buckets: dict[str, _Bucket]) -> dict[str, str]:
        headers: dict[str, str] = {}
        for kind, (cap, _) in limits.items():
            level = max(0.0, buckets[kind].level)
            headers[f"x-ratelimit-limit-{kind}"] = str(int(cap))
            headers[f"x-ratelimit-remaining-{kind}"] = str(int(level))
            headers[f"x-ratelimit-reset-{kind}"] = duration((cap - level) * 60.0 / cap)
        return headers
