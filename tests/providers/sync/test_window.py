"""The sync backend's calls in flight (`providers.sync.window`): slow start, additive increase,
multiplicative decrease on a 429 or a low `x-ratelimit-remaining-*`, the ceiling, and what the next
run starts at (the runner under the simulated provider's rate limits is tested with the runner)."""

from __future__ import annotations

import pytest

from lexpilot_batch.providers.sync.window import START, Window, remaining_share
from lexpilot_batch.simulated import parse_faults
from lexpilot_batch.simulated.ratelimits import RateLimits


def round_trip(window: Window, headers: dict[str, str] | None = None) -> None:
    """Every call of the window sent, then answered."""
    for ticket in [window.ticket() for _ in range(window.limit())]:
        window.answered(ticket, headers)


def test_slow_start_doubles_each_round_trip_up_to_the_ceiling():
    assert Window(1000).limit() == START
    window = Window(100, start=8)
    sizes = []
    for _ in range(5):
        round_trip(window)
        sizes.append(window.limit())
    assert sizes == [16, 32, 64, 100, 100]


def test_a_ceiling_below_the_start_is_the_window():
    assert Window(3).limit() == 3
    with pytest.raises(ValueError):
        Window(0)


def test_a_429_halves_once_per_round_trip_then_growth_is_additive():
    window = Window(1000, start=64)
    tickets = [window.ticket() for _ in range(64)]
    for ticket in tickets[:10]:  # ten refusals of calls sent together: one cut
        window.refused(ticket)
    assert (window.limit(), window.cuts) == (32, 1)
    for ticket in tickets[10:]:
        window.answered(ticket)
    assert window.limit() == 33  # 54 answers at about 1/32 each: one more call, not 54
    round_trip(window)
    assert window.limit() == 34
    later = window.ticket()
    window.refused(later)  # a call sent after the cut: a new sign
    assert (window.limit(), window.cuts) == (17, 2)


def test_remaining_running_low_halves_like_a_429():
    window = Window(100, start=40)
    low = {"x-ratelimit-limit-requests": "5000", "x-ratelimit-remaining-requests": "400"}  # 8% left
    window.answered(window.ticket(), low)
    assert window.limit() == 20
    some = {**low, "x-ratelimit-remaining-requests": "2000"}  # 40% left: the limit is near
    window.answered(window.ticket(), some)
    assert window.limit() == 20  # grows by 1/20
    plenty = {**low, "x-ratelimit-remaining-requests": "4000"}  # 80% left: far
    window.answered(window.ticket(), plenty)
    window.answered(window.ticket(), plenty)
    assert window.limit() == 22  # grows by one an answer, as in slow start
    assert window.threshold == 20 and window.cuts == 1
    assert remaining_share(plenty) == pytest.approx(0.8)
    tokens = {**plenty, "x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "50"}
    assert remaining_share(tokens) == pytest.approx(0.05)  # the scarcer of the two
    assert remaining_share({"x-request-id": "r"}) is None and remaining_share(None) is None


def test_never_below_one_call():
    window = Window(4, start=1)
    for _ in range(5):
        window.refused(window.ticket())
    assert window.limit() == 1


def test_the_simulated_providers_headers_are_read():
    headers = RateLimits(lambda: 0.0).admit(parse_faults("rpm=100,tpm=1000"), "openai", "m", 950)
    assert remaining_share(headers) == pytest.approx(0.05)


def test_the_next_run_of_the_same_model_starts_where_the_last_ended():
    from lexpilot_batch.providers.sync.window import keep, learned

    key = ("http://x/v1", "test-model-carry", True)
    first = learned(key, 100)
    assert first.limit() == START
    first.size = 8.0
    round_trip(first)
    round_trip(first)
    first.refused(first.ticket())
    keep(key, first)
    again = learned(key, 100)
    assert (again.limit(), again.threshold) == (first.limit(), first.threshold) == (16, 16.0)
    assert learned(key, 10).limit() == 10  # within the new run's ceiling
    assert learned(("http://x/v1", "another", True), 100).limit() == START
