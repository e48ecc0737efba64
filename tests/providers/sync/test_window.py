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


def send_against_limits(window: Window, calls: int, seconds: float, tokens: int, rpm: int, tpm: int) -> dict:
    """`calls` calls of `seconds` each and `tokens` each sent in `window` against the simulated
    provider's buckets (`RateLimits`) on a clock of the test's own, a refused call sent again when
    its `retry-after-ms` has passed. Returns the widths after each round trip, the 429s and the end."""
    import heapq

    now = 0.0
    limits, faults = RateLimits(lambda: now), parse_faults(f"rpm={rpm},tpm={tpm}")
    window.now = lambda: now
    flight: list[tuple[float, int, dict[str, str]]] = []
    left, blocked, refused, widths = calls, 0.0, 0, []
    next_trip = seconds
    while left or flight:
        while left and len(flight) < window.limit() and blocked <= now:
            ticket = window.ticket(tokens)
            try:
                headers = limits.admit(faults, "openai", "m", tokens)
            except Exception as err:  # the 429 `ApiError`
                window.refused(ticket)
                refused += 1
                blocked = now + int(err.headers["retry-after-ms"]) / 1000  # type: ignore[attr-defined]
                continue
            heapq.heappush(flight, (now + seconds, ticket, headers))
            left -= 1
        after = [flight[0][0]] if flight else []
        if left and blocked > now:
            after.append(blocked)
        now = min(after)
        while flight and flight[0][0] <= now:
            _, ticket, headers = heapq.heappop(flight)
            window.answered(ticket, headers)
        while now >= next_trip:
            widths.append(window.limit())
            next_trip += seconds
    return {"widths": widths, "refused": refused, "end": now, "cuts": window.cuts}


def test_the_window_jumps_to_what_the_stated_limits_sustain():
    # Flex-like calls of 60 s and 6,000 tokens under OpenAI's tier-3 pair (5,000 requests and
    # 4,000,000 tokens a minute): the tokens bind, at 666 calls a minute, so 666 in flight.
    sustained = 4_000_000 / 6_000 * 60 / 60
    got = send_against_limits(Window(1000), 20_000, 60.0, 6_000, 5_000, 4_000_000)
    assert got["widths"][0] >= 0.85 * sustained  # after the first round trip, not 64 doubling
    assert got["refused"] <= 0.005 * 20_000  # 429s rare
    # The time: 20,000 calls at the limit's 666 a minute take 30 minutes and the last minute's calls.
    assert got["end"] <= (20_000 / sustained + 1) * 60 * 1.05
    # Doubling from 64 would have needed 4 round trips to get there.
    blind = Window(1000)
    for _ in range(2):
        round_trip(blind)
    assert blind.limit() == 256


def test_without_tokens_only_the_requests_limit_is_stated():
    window = Window(1000)
    clock = [0.0]
    window.now = lambda: clock[0]
    ticket = window.ticket()
    clock[0] = 6.0
    window.answered(
        ticket,
        {
            "x-ratelimit-limit-requests": "5000",
            "x-ratelimit-remaining-requests": "4990",
            "x-ratelimit-limit-tokens": "4000000",
            "x-ratelimit-remaining-tokens": "3990000",
        },
    )
    assert window.width == pytest.approx(5000 * 6 / 60)  # 500 in flight: the requests' width alone
    assert window.limit() == 451  # STATED of it, and one call for the answer (plenty left: `HIGH`)
    window.refused(window.ticket())  # a sign: AIMD's from here on
    assert window.limit() == 225
    ticket = window.ticket()
    clock[0] = 60.0
    window.answered(ticket, {"x-ratelimit-limit-requests": "5000", "x-ratelimit-remaining-requests": "4990"})
    assert window.limit() == 226  # no jump after a sign: one call for an answer with plenty left


def test_call_tokens_counts_the_text_and_the_output_asked_for():
    from lexpilot_batch.providers.sync.window import CHARS_PER_TOKEN, call_tokens

    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 1300}], "max_tokens": 500}
    import json

    assert call_tokens(body) == pytest.approx(len(json.dumps(body)) / CHARS_PER_TOKEN + 500)
    assert call_tokens({"contents": [], "generationConfig": {"maxOutputTokens": 64}}) > 64
