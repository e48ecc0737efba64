"""A client clock a test sets: the engine's `util.clock` (`now`, `monotonic`, `pause`) shifted from
the real one by `ahead` seconds, its waits taken in virtual time.

The simulated provider keeps the real clock (it stands for another machine), so a clock `ahead` plays
a client whose clock runs that far in front of the provider's (WSL2 or a VM after sleep), and
setting `ahead` back to 0 plays the clock being set right. A wait (`clock.pause`, `clock.sleep`) does not sleep: it
moves both the client's clocks on and is added up in `waited`, so that a command that would sit for
hours ends at once, and says how long it would have sat.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from lexpilot_batch.util import clock


class ClientClock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, ahead: float = 0.0) -> None:
        self.ahead = ahead
        self.waited = 0.0  # seconds of every wait, in virtual time
        self.longest = 0.0  # the longest single wait
        monkeypatch.setattr(clock, "now", lambda: time.time() + self.ahead + self.waited)
        monkeypatch.setattr(clock, "monotonic", lambda: time.monotonic() + self.waited)
        monkeypatch.setattr(clock, "pause", self._pause)
        monkeypatch.setattr(clock, "sleep", self._sleep)

    def _pause(self, seconds: float) -> None:
        if seconds > 0:
            self.waited += seconds
            self.longest = max(self.longest, seconds)

    async def _sleep(self, seconds: float) -> None:
        self._pause(seconds)
        await asyncio.sleep(0)  # the loop's other tasks run, as during a real wait
