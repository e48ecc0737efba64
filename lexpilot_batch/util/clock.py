"""Every wait of the product, and the one retry schedule, in one place.

`pause` is the only sleep of the package (the simulated server's latency aside): a test makes every
wait zero at once with `monkeypatch.setattr(clock, "pause", ...)`, and `tests/test_architecture.py`
fails on a `time.sleep` anywhere else. `Backoff` is the one schedule of a call tried again: the
provider's `retry-after` when it sent one, else a wait doubling from `first` up to `cap`. Every
provider call, the sync runner and the engine's recovery and outage waits use it with their own
first wait and cap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


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
