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


def test_a_wait_for_the_provider_never_ends_past_the_budget(monkeypatch: pytest.MonkeyPatch):
    """Within `provider_waits`, the waits of one run of retries are dated from its first refusal; a
    wait that would end past the budget is not begun (`OutOfTime`), and each is told first."""
    now = [100.0]
    slept: list[float] = []
    monkeypatch.setattr(clock.time, "monotonic", lambda: now[0])

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(clock, "pause", sleep)
    told: list[clock.ProviderWait] = []
    with clock.provider_waits(10.0, told.append) as waits:
        clock.wait_for_provider(4.0, "refused", 0)
        clock.wait_for_provider(4.0, "refused", 1)
        with pytest.raises(clock.OutOfTime) as out:
            clock.wait_for_provider(4.0, "refused", 2)  # would end at 12 s of 10
        assert (out.value.why, out.value.waited, out.value.budget) == ("refused", 8.0, 10.0)
        assert slept == [4.0, 4.0] and [(t.pause, t.left) for t in told] == [(4.0, 6.0), (4.0, 2.0)]
        # A round that failed dates the outage from that run's first refusal until a round succeeds.
        assert waits.began(now[0]) == 100.0
        waits.round_begins()
        with pytest.raises(clock.OutOfTime):
            clock.wait_for_provider(3.0, "refused again", 0)  # a new run of retries, the same outage
        waits.clear()
        clock.wait_for_provider(3.0, "refused after a success", 0)
    clock.wait_for_provider(60.0, "outside any budget", 0)
    assert slept == [4.0, 4.0, 3.0, 60.0]
