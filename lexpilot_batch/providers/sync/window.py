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

A window serves one run (one request file, of one model); what it learned is kept for the next
run of the same (endpoint, model, tier) in this process (`learned`, `keep`), so the next wave's file
starts where the last one ended rather than at `START`: the window is per (provider, model), as the
limits are. A new process starts at `START` again. A window is not thread-safe on its own: the
runner's event loop calls it, from its one thread.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping

# Calls in flight at first: the bench's old fixed width (the product's default ceiling, 8, is lower,
# so a run told nothing keeps 8 in flight as before).
START = 64
LOW = 0.1  # an answer with less than this share of a limit remaining is a sign to shrink
HIGH = 0.5  # an answer with at least this share of every limit remaining: grow as in slow start
DECREASE = 0.5  # the share of the window kept on a sign


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


class Window:
    """The calls-in-flight window of one run (module docstring)."""

    def __init__(self, ceiling: int, start: int | None = None) -> None:
        if ceiling < 1:
            raise ValueError(f"a window needs a ceiling of at least 1, not {ceiling}")
        self.ceiling = ceiling
        self.size = float(min(ceiling, max(1, START if start is None else start)))
        self.threshold = float(ceiling)  # slow start until the first sign
        self.peak = int(self.size)
        self.cuts = 0
        self._sent = 0  # calls handed out (`ticket`)
        self._cut_at = 0  # the first ticket sent after the last cut

    def limit(self) -> int:
        """Calls that may be in flight now."""
        return max(1, int(self.size))

    def ticket(self) -> int:
        """The number of a call about to be sent (given back with its outcome)."""
        self._sent += 1
        return self._sent

    def answered(self, ticket: int, headers: Mapping[str, str] | None = None) -> None:
        """A call answered (any answer but a 429): shrink if its headers say the limit is near, else grow."""
        share = remaining_share(headers)
        if share is not None and share < LOW:
            self._cut(ticket)
            return
        if self.size < self.threshold or (share is not None and share >= HIGH):
            self.size += 1.0
        else:
            self.size += 1.0 / self.size
        self.size = min(self.size, float(self.ceiling))
        self.peak = max(self.peak, self.limit())

    def refused(self, ticket: int) -> None:
        """A call refused 429 for the rate: shrink."""
        self._cut(ticket)

    def _cut(self, ticket: int) -> None:
        if ticket <= self._cut_at:
            return  # sent before the last cut: that cut answered its sign
        self.size = max(1.0, self.size * DECREASE)
        self.threshold = self.size
        self._cut_at = self._sent
        self.cuts += 1


_LEARNED: dict[Hashable, tuple[float, float]] = {}  # key -> (size, threshold) a run ended with
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
        window.peak = window.limit()
    return window


def keep(key: Hashable, window: Window) -> None:
    """Remember where a run of `key` ended, for the next (`learned`)."""
    with _LOCK:
        _LEARNED[key] = (window.size, window.threshold)
