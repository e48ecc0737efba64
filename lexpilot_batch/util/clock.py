"""Every wait of the product between two tries or two polls, in one function, so that a test can
make them all zero at once (`monkeypatch.setattr(clock, "pause", ...)`)."""

from __future__ import annotations

import time


def pause(seconds: float) -> None:
    """Wait `seconds` (nothing for zero or less)."""
    if seconds > 0:
        time.sleep(seconds)
