"""Every wait of the product, the one retry schedule and the one clock it reads, in one place.

`pause` is the only sleep of the package (the simulated server's latency aside): a test makes every
wait zero at once with `monkeypatch.setattr(clock, "pause", ...)`, and `tests/test_architecture.py`
fails on a `time.sleep` anywhere else. `now` is the only reading of this machine's clock (the
simulated provider, which stands for another machine, keeps its own): a test shifts the client's
clock with `monkeypatch.setattr(clock, "now", ...)`, and the same test fails on a `time.time()`
anywhere else. What `now` gives is recorded and compared with what it gave before, never with a
provider's times: the two clocks may disagree by hours (`engine.recovery`).

`Backoff` is the one schedule of a call tried again: the provider's `retry-after` when it sent one,
else a wait doubling from `first` up to `cap`. Every provider call, the sync runner and the
engine's recovery and outage waits use it with their own first wait and cap.
"""

from __future__ import annotations

import time
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
