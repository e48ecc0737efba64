"""Every wait of the product, the one retry schedule and the one clock it reads, in one place.

`pause` is the only sleep of the package (the simulated server's latency aside), and `sleep` its
twin for a coroutine on an event loop (the sync runner's, `providers.sync.runner`): a test makes
every wait zero at once with `monkeypatch.setattr(clock, "pause", ...)` (and `"sleep"`), and
`tests/test_architecture.py` fails on a `time.sleep` or an `asyncio.sleep` anywhere else. `now`
is the only reading of this machine's clock (the simulated provider, which stands for another
machine, keeps its own): a test shifts the client's clock with `monkeypatch.setattr(clock, "now",
...)`, and the same test fails on a `time.time()` anywhere else. What `now` gives is recorded and
compared with what it gave before, never with a provider's times: the two clocks may disagree by
hours (`engine.recovery`).

`Backoff` is the one schedule of a call tried again: the provider's `retry-after` when it sent one,
else a wait doubling from `first` up to `cap`. Every provider call, the sync runner and the
engine's recovery and outage waits use it with their own first wait and cap.

`wait_for_provider` is a wait for a provider that refused (a 429's retry-after, a lost create
looked for): inside `provider_waits` (`--outage-wait`) none ends past the budget, counted from
the first refusal of the outage, and each is told (`ProviderWait`) so that it is not silent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def now() -> float:
    """This machine's clock, in seconds since the epoch: when a file was sent, a wave closed, an
    anomaly seen. Compared only with times it gave itself; it may jump (a clock set right)."""
    return time.time()


def monotonic() -> float:
    """Seconds on a clock that never jumps, meaningful only within this process: what bounds a wait."""
    return time.monotonic()


def pause(seconds: float) -> None:
    """Wait `seconds` (nothing for zero or less)."""
    if seconds > 0:
        time.sleep(seconds)


async def sleep(seconds: float) -> None:
    """Wait `seconds` on the running event loop (nothing for zero or less): `pause` for a coroutine,
    which lets the loop's other tasks run meanwhile."""
    if seconds > 0:
        await asyncio.sleep(seconds)


@dataclass(frozen=True)
class Backoff:
    """Seconds to wait before a try: `retry_after` when the provider named one, else `first`
    doubled at each try after the first, never more than `cap`."""

    first: float = 0.5
    cap: float = 8.0

    def wait(self, attempt: int, retry_after: float | None = None) -> float:
        """The wait after try `attempt` (0: the first) failed."""
        if retry_after is not None:
            return retry_after
        return min(self.first * 2.0 ** min(max(attempt, 0), 64), self.cap)


# A provider call tried again after a transient failure: half a second, doubling up to 8 s.
RETRY = Backoff()


# --- waits for a provider that refuses, within `--outage-wait` ------------------------------------


@dataclass(frozen=True)
class ProviderWait:
    """A wait about to begin for a provider that refused: why, how long, and what is left after it."""

    why: str  # what was refused, or what is looked for (the provider's own words included)
    pause: float  # seconds of this wait
    left: float  # seconds of the budget left after it


class OutOfTime(Exception):
    """A wait for the provider would end past the budget (`provider_waits`): the provider has
    refused for as long as the user allows. Not begun; the caller stops, nothing being lost."""

    def __init__(self, why: str, waited: float, budget: float) -> None:
        super().__init__(f"{why} (refused for {waited:.0f} s of {budget:.0f} s allowed)")
        self.why = why
        self.waited = waited  # seconds since the outage's first refusal
        self.budget = budget


class ProviderWaits:
    """The budget of one command's waits for a refusing provider (`provider_waits`).

    The outage is dated from its first refusal: `outage_since` once a round of the engine failed
    (kept until a round succeeds, `clear`), else the first wait of the retries under way (a wait
    of `attempt` 0 starts them). A wait that would end past that date plus `budget` is not begun.
    """

    def __init__(self, budget: float, on_wait: Callable[[ProviderWait], None] | None) -> None:
        self.budget = budget
        self.on_wait = on_wait
        self.outage_since: float | None = None  # monotonic: the failing rounds' first refusal
        self.retries_since: float | None = None  # monotonic: the current retries' first wait

    def round_begins(self) -> None:
        """A round of the engine begins: earlier retries (which ended) date nothing."""
        self.retries_since = None

    def began(self, now: float) -> float:
        """The outage's start, for a round that failed at `now`: its retries' first refusal if it
        waited (the failed round's), else `now`; kept until `clear`."""
        if self.outage_since is None:
            self.outage_since = self.retries_since if self.retries_since is not None else now
        return self.outage_since

    def clear(self) -> None:
        """A round succeeded: the provider answers again."""
        self.outage_since = self.retries_since = None

    def wait(self, seconds: float, why: str, attempt: int) -> None:
        now = time.monotonic()
        if attempt == 0 or self.retries_since is None:
            self.retries_since = now
        since = self.outage_since if self.outage_since is not None else self.retries_since
        left = since + self.budget - now
        if seconds > left:
            raise OutOfTime(why, now - since, self.budget)
        if self.on_wait is not None:
            self.on_wait(ProviderWait(why, seconds, left - seconds))
        pause(seconds)


_waits: ProviderWaits | None = None


@contextmanager
def provider_waits(budget: float, on_wait: Callable[[ProviderWait], None] | None = None) -> Iterator[ProviderWaits]:
    """Inside it, every `wait_for_provider` ends within `budget` seconds of the outage's first
    refusal (`ProviderWaits`), or raises `OutOfTime` instead of beginning; `on_wait` is told of
    each wait before it begins."""
    global _waits
    outer, _waits = _waits, ProviderWaits(budget, on_wait)
    try:
        yield _waits
    finally:
        _waits = outer


def wait_for_provider(seconds: float, why: str, attempt: int) -> None:
    """Wait `seconds` before try `attempt + 1` of something the provider refused (`why`); within
    `provider_waits`' budget, or `OutOfTime`. Outside any budget, `pause`."""
    if _waits is None:
        pause(seconds)
    else:
        _waits.wait(seconds, why, attempt)
