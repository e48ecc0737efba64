"""How many synchronous calls one run keeps in flight: a window that grows while the provider says
there is room and shrinks when it says stop (additive increase, multiplicative decrease, as TCP's
congestion control and curator's request pools do).

A `Window` starts at `START` calls (or the ceiling, `--concurrency`, when lower) and grows as
answers come back: by one call per answer until the first sign of the limit (TCP's slow start,
doubling each round trip), then by one call per window's worth of answers (additive increase),
never past the ceiling; but by one call per answer again while an answer's `x-ratelimit-remaining-*`
headers say at least `HIGH` of every limit is unused: at a round trip of a minute (a flex call),
one call a minute would leave a token limit a quarter unused for the rest of a study (the bench:
`bench/draws.py`), and the provider's own headers say the limit is still far. Two signs make it shrink by half (`DECREASE`), never below one call: a 429
refusal for the rate, and an answer whose `x-ratelimit-remaining-requests` or
`x-ratelimit-remaining-tokens` is below `LOW` of its `x-ratelimit-limit-*` (OpenAI's headers,
https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers; an API whose answers
name other headers, or none, gives only its 429s). It shrinks at most once per round trip: a sign
carried by a call sent before the last cut is one the cut already answered, as TCP halves once per
window of losses. The wait a 429 asks for is the runner's (`clock.Backoff`), not the window's.

Where the provider states its limits, the window need not climb to them: OpenAI's answers carry
`x-ratelimit-limit-requests` and `x-ratelimit-limit-tokens`, the requests and tokens a minute
allowed (the "Rate limits in headers" table of https://platform.openai.com/docs/guides/rate-limits).
With the seconds a call has taken and the tokens it counts (means over the answers so far), the
calls in flight those limits sustain are about `min(rpm, tpm / tokens_per_call) * seconds_per_call /
60` (Little's law: in flight = rate x time in flight). Until its first sign, a window is raised at
once to `STATED` of that width (`stated`), within the ceiling, instead of doubling toward it a round
trip at a time, and slow start ends there; past it, the window grows additively, or by the `HIGH`
rule while the headers say the limits are far (the width is an estimate: the headers are the
limits). `STATED` is 90%: a call's tokens and seconds are means of the answers so far, the first
answers to land being the quickest, so the width is an estimate; 90% of a limit spent leaves its
bucket's level rising, by a tenth of the limit a minute (what 429s remain come of the `HIGH` rule's
growth past the width: about 1 call in 800 in `tests/providers/sync/test_window.py`'s study at a
tier-3 limit); a 429 or a low remaining cuts as before, and from then on the window is AIMD's alone. The tokens a call counts
are the caller's (`ticket`): the runner's estimate of the request (`call_tokens`: its text at
`CHARS_PER_TOKEN`, plus the most output tokens it asks for, which OpenAI's guide counts against the
limit); without them, only the requests limit is stated.

A window serves one run (one request file, of one model); what it learned is kept for the next
run of the same (endpoint, model, tier) in this process (`learned`, `keep`), so the next wave's file
starts where the last one ended rather than at `START`: the window is per (provider, model), as the
limits are. A new process starts at `START` again. A window is not thread-safe on its own: the
runner's event loop calls it, from its one thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from lexpilot_batch.util import clock

# Calls in flight at first: the bench's old fixed width (the product's default ceiling, 8, is lower,
# so a run told nothing keeps 8 in flight as before).
START = 64
LOW = 0.1  # an answer with less than this share of a limit remaining is a sign to shrink
HIGH = 0.5  # an answer with at least this share of every limit remaining: grow as in slow start
DECREASE = 0.5  # the share of the window kept on a sign
STATED = 0.9  # the share of the width the stated limits sustain a window jumps to (module docstring)
# Characters a token, for a request's estimate: the estimate's default (`estimate.assumptions`),
# fewer than most tokenizers' 4 for English, so the estimate errs high and the width low.
CHARS_PER_TOKEN = 1.3
_OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "maxOutputTokens")


def remaining_share(headers: Mapping[str, str] | None) -> float | None:
    """The smallest share of a rate limit an answer's `x-ratelimit-*` headers say remains (requests
    or tokens), or None when they name none."""
    if not headers:
        return None
    shares: list[float] = []
    for kind in ("requests", "tokens"):
        try:
            limit = float(headers.get(f"x-ratelimit-limit-{kind}") or "")
            left = float(headers.get(f"x-ratelimit-remaining-{kind}") or "")
        except ValueError:
            continue
        if limit > 0:
            shares.append(max(0.0, left) / limit)
    return min(shares) if shares else None


def stated_limits(headers: Mapping[str, str] | None) -> tuple[float | None, float | None]:
    """(requests, tokens) a minute an answer's `x-ratelimit-limit-*` headers state, each None if not."""
    out: list[float | None] = []
    for kind in ("requests", "tokens"):
        try:
            value = float((headers or {}).get(f"x-ratelimit-limit-{kind}") or "")
        except ValueError:
            value = 0.0
        out.append(value if value > 0 else None)
    return out[0], out[1]


def call_tokens(body: Any) -> float:
    """A request's tokens as a limit counts them, estimated: its text at `CHARS_PER_TOKEN`, plus the
    most output tokens it asks for."""
    text = json.dumps(body, ensure_ascii=False) if body is not None else ""
    most = 0
    if isinstance(body, dict):
        config = body.get("generationConfig")
        for where in (body, config if isinstance(config, dict) else {}):
            for name in _OUTPUT_FIELDS:
                value = where.get(name)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    most = max(most, value)
    return len(text) / CHARS_PER_TOKEN + most


class Window:
    """The calls-in-flight window of one run (module docstring)."""

    def __init__(self, ceiling: int, start: int | None = None, now: Callable[[], float] = clock.monotonic) -> None:
        if ceiling < 1:
            raise ValueError(f"a window needs a ceiling of at least 1, not {ceiling}")
        self.ceiling = ceiling
        self.size = float(min(ceiling, max(1, START if start is None else start)))
        self.threshold = float(ceiling)  # slow start until the first sign
        self.peak = int(self.size)
        self.cuts = 0
        self._sent = 0  # calls handed out (`ticket`)
        self._cut_at = 0  # the first ticket sent after the last cut
        self.now = now  # the clock a call's seconds are measured on
        self._out: dict[int, tuple[float, float | None]] = {}  # ticket -> (sent at, its tokens)
        self._measured = [0, 0.0, 0, 0.0]  # answers timed, their seconds, answers with tokens, their tokens
        self.width: float | None = None  # the calls in flight the stated limits sustain (`stated`)
        self.signed = False  # a sign (429, low remaining) seen: AIMD's alone from then on

    def limit(self) -> int:
        """Calls that may be in flight now."""
        return max(1, int(self.size))

    def ticket(self, tokens: float | None = None) -> int:
        """The number of a call about to be sent (given back with its outcome); `tokens`: what it
        counts against a tokens limit, if the caller knows (`call_tokens`)."""
        self._sent += 1
        self._out[self._sent] = (self.now(), tokens)
        return self._sent

    def stated(self, headers: Mapping[str, str] | None) -> float | None:
        """The calls in flight the limits these headers state sustain at the calls measured so far
        (module docstring), or None when they state none or nothing is measured."""
        rpm, tpm = stated_limits(headers)
        timed, seconds, counted, tokens = self._measured
        if not timed or (rpm is None and tpm is None):
            return None
        per_minute = [rate for rate in (rpm, tpm / (tokens / counted) if tpm and counted and tokens else None) if rate]
        if not per_minute:
            return None
        return min(per_minute) * (seconds / timed) / 60.0

    def answered(self, ticket: int, headers: Mapping[str, str] | None = None) -> None:
        """A call answered (any answer but a 429): shrink if its headers say the limit is near, else
        grow; before any sign, to at least `STATED` of what the limits its headers state sustain."""
        sent_at, tokens = self._out.pop(ticket, (None, None))
        if sent_at is not None:
            self._measured[0] += 1
            self._measured[1] += max(0.0, self.now() - sent_at)
        if tokens is not None:
            self._measured[2] += 1
            self._measured[3] += tokens
        share = remaining_share(headers)
        if share is not None and share < LOW:
            self._cut(ticket)
            return
        width = self.stated(headers)
        self.width = width if width is not None else self.width
        if self.width is not None and not self.signed:
            # Slow start ends at the stated width: raised to it at once, or, above it, grown additively.
            self.size = min(float(self.ceiling), max(self.size, STATED * self.width))
            self.threshold = min(self.threshold, self.size)
        if self.size < self.threshold or (share is not None and share >= HIGH):
            self.size += 1.0
        else:
            self.size += 1.0 / self.size
        self.size = min(self.size, float(self.ceiling))
        self.peak = max(self.peak, self.limit())

    def refused(self, ticket: int) -> None:
        """A call refused 429 for the rate: shrink."""
        self._out.pop(ticket, None)
        self._cut(ticket)

    def _cut(self, ticket: int) -> None:
        self.signed = True
        if ticket <= self._cut_at:
            return  # sent before the last cut: that cut answered its sign
        self.size = max(1.0, self.size * DECREASE)
        self.threshold = self.size
        self._cut_at = self._sent
        self.cuts += 1


_LEARNED: dict[Hashable, tuple[float, float, bool]] = {}  # key -> (size, threshold, signed) a run ended with
_LOCK = threading.Lock()


def learned(key: Hashable, ceiling: int) -> Window:
    """A window for a run of `key` (endpoint, model, tier): where the last run of it in this process
    ended, within this run's ceiling; else a new one."""
    window = Window(ceiling)
    with _LOCK:
        kept = _LEARNED.get(key)
    if kept is not None:
        window.size = max(1.0, min(kept[0], float(ceiling)))
        window.threshold = max(1.0, min(kept[1], float(ceiling)))
        window.signed = kept[2]
        window.peak = window.limit()
    return window


def keep(key: Hashable, window: Window) -> None:
    """Remember where a run of `key` ended, for the next (`learned`)."""
    with _LOCK:
        _LEARNED[key] = (window.size, window.threshold, window.signed)
