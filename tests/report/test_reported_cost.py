"""A provider's own cost of its answers (OpenRouter's `usage.cost`) in the cost report
(`report.build`): used for a role's work on a backend where every request that used tokens reported
one, shown beside it (`reported_cost_usd`), and absent, the report unchanged, where none did."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from lexpilot_batch.report import build

TOKENS = {"requests": 4, "prompt_tokens": 4_000_000, "completion_tokens": 1_000_000, "cached_tokens": 0}
PRICE = {"openrouter/x/priced": {"input": 1.0, "output": 2.0}}  # $ a million tokens


def usage(model: str, **counts: Any) -> dict[str, Any]:
    run = SimpleNamespace(model=model, user_model=None, judge_model=None, usage={"eval": {"batch": counts}})
    return build._usage([run], PRICE, 0.5)  # type: ignore[list-item]


def test_every_request_s_reported_cost_is_the_role_s_cost_where_the_table_has_no_price() -> None:
    found = usage("openrouter/x/unpriced", **TOKENS, reported=4, reported_cost_usd=0.75, unreported=0)
    role = found["roles"]["eval"]
    assert role["cost_usd"] == role["reported_cost_usd"] == 0.75 and found["total"]["cost_usd"] == 0.75
    assert usage("openrouter/x/unpriced", **TOKENS)["total"]["cost_usd"] is None  # the control: no price, no cost


def test_the_reported_cost_wins_over_the_table_s_price_and_only_when_all_the_work_reported_one() -> None:
    table = (4 * 1.0 + 1 * 2.0) * 0.5  # 4M prompt and 1M completion tokens at half price
    assert usage("openrouter/x/priced", **TOKENS)["roles"]["eval"]["cost_usd"] == table
    reported = usage("openrouter/x/priced", **TOKENS, reported=4, reported_cost_usd=2.5, unreported=0)
    assert reported["roles"]["eval"]["cost_usd"] == 2.5
    # One request that used tokens reported none: the table prices the whole backend's work, the sum shown apart.
    partly = usage("openrouter/x/priced", **TOKENS, reported=3, reported_cost_usd=2.0, unreported=1)
    assert partly["roles"]["eval"]["cost_usd"] == table and partly["roles"]["eval"]["reported_cost_usd"] == 2.0


def test_a_report_without_any_reported_cost_has_no_field_for_it() -> None:
    assert "reported_cost_usd" not in usage("openrouter/x/priced", **TOKENS)["roles"]["eval"]
