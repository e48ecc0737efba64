"""The one retry schedule (`util.clock.Backoff`): the provider's word first, else doubling to a cap."""

from __future__ import annotations

import pytest

from lexpilot_batch.util import clock


def test_the_wait_doubles_from_the_first_and_stops_at_the_cap():
    schedule = clock.Backoff(0.5, 8.0)
    assert [schedule.wait(n) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_a_retry_after_the_provider_sent_is_honoured_even_when_zero():
    assert clock.RETRY.wait(3, retry_after=0.0) == 0.0
    assert clock.RETRY.wait(0, retry_after=42.0) == 42.0


@pytest.mark.parametrize("attempt", [0, 10, 60])
def test_no_wait_exceeds_the_cap_however_many_tries(attempt: int):
    assert clock.Backoff(1.0, 30.0).wait(attempt) <= 30.0


def test_pause_of_nothing_returns_at_once(monkeypatch: pytest.MonkeyPatch):
    slept: list[float] = []
    monkeypatch.setattr(clock.time, "sleep", slept.append)
    clock.pause(0)
    clock.pause(-1)
    clock.pause(0.25)
    assert slept == [0.25]
