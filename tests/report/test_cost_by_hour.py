"""Cost by the hour each request was answered (issue 47, off-peak): a model whose provider prices
by time of day (`providers.schedules`, DeepSeek's pricing page) costs, per minute of its answers,
the factor of that minute times the listed (peak) price; requests recorded without a time take
the list price, and the report says how many."""

from __future__ import annotations

from datetime import datetime, timezone

from lexpilot_batch.providers.prices import bundled_prices, cost_usd
from lexpilot_batch.report.build import _usage
from lexpilot_batch.report.document import RunResults
from lexpilot_batch.report.formats.layout import cost_note


def minute(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp() // 60)


def run(timed: list[tuple]) -> RunResults:
    counts = {
        "requests": sum(t[1] for t in timed),
        "prompt_tokens": sum(t[2] for t in timed),
        "completion_tokens": sum(t[3] for t in timed),
        "cached_tokens": sum(t[4] for t in timed),
        "cache_write_tokens": 0,
        "timed": timed,
    }
    return RunResults(
        run_id="r1",
        model="openai/gpt-4o-mini",
        user_model="deepseek/deepseek-flash",
        judge_model="deepseek/deepseek-flash",
        group_key="g",
        usage={"user": {"sync": counts}},
    )


def test_each_minute_is_priced_at_its_factor_and_untimed_requests_at_the_list_price() -> None:
    price = bundled_prices()["deepseek/deepseek-flash"]
    one = cost_usd(1000, 200, price, "sync", 0.5, 100)
    assert one is not None
    timed = [
        (minute("2026-12-07T05:00:00"), 1, 1000, 200, 100, 0),  # Monday between windows: off-peak
        (minute("2026-12-07T07:30:00"), 1, 1000, 200, 100, 0),  # Monday 07:30: peak
        (minute("2026-12-12T07:30:00"), 1, 1000, 200, 100, 0),  # Saturday: off-peak
        (None, 1, 1000, 200, 100, 0),  # recorded before answer times were kept
    ]
    usage = _usage([run(timed)], None, 0.5)
    user = usage["roles"]["user"]
    assert abs(user["cost_usd"] - one * (0.5 + 1 + 0.5 + 1)) < 1e-12
    assert abs(user["peak_cost_usd"] - one * 4) < 1e-12
    assert user["untimed_requests"] == 1
    note = cost_note(usage)
    assert "Priced by the hour" in note and "1 requests answered before" in note


def test_a_study_answered_wholly_off_peak_costs_half_of_the_peak_price() -> None:
    timed = [(minute("2026-12-07T10:00:00") + i, 3, 900, 300, 0, 0) for i in range(120)]  # 10:00-12:00 Monday
    user = _usage([run(timed)], None, 0.5)["roles"]["user"]
    assert abs(user["cost_usd"] / user["peak_cost_usd"] - 0.5) < 1e-12
    assert "untimed_requests" not in user
