"""Prices per model (issue 29 item 4): a user's file by model or (the older format) by role, over
the bundled, dated table `data/prices.json`, whose sources are the providers' pricing pages
(https://platform.openai.com/docs/pricing, https://docs.claude.com/en/docs/about-claude/pricing,
https://ai.google.dev/gemini-api/docs/pricing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.prices import bundled_as_of, bundled_prices, check_prices, load_prices, price_for


def test_the_bundled_table_is_dated_and_each_price_has_input_and_output() -> None:
    assert bundled_as_of()[:4].isdigit() and len(bundled_as_of()) == 10
    table = bundled_prices()
    assert {"gpt-4o-mini", "gpt-4o", "o4-mini"} <= set(table)
    check_prices(table, 0.5)
    data = json.loads(Path(__file__).resolve().parents[2].joinpath("data", "prices.json").read_text(encoding="utf-8"))
    assert set(data["$sources"]) >= {"openai", "anthropic", "google"}


def test_a_model_is_priced_by_the_users_file_first_then_by_the_bundled_table() -> None:
    mini = bundled_prices()["gpt-4o-mini"]
    # No file: the bundled table, by the name the provider is sent (prefix and snapshot date off).
    assert price_for(None, "eval", "openai/gpt-4o-mini") == mini
    assert price_for(None, "eval", "gpt-4o-mini-2024-07-18") == mini
    assert price_for(None, "eval", "sim-eval") is None
    own: dict[str, float] = {"input": 0.1, "output": 0.2}
    users: dict[str, dict[str, float]] = {"openai/gpt-4o": own, "judge": {"input": 1, "output": 2}}
    # Two evaluated models, priced differently: one by the file, one by the table.
    assert price_for(users, "eval", "openai/gpt-4o") == own
    assert price_for(users, "eval", "openai/gpt-4o-mini") == mini
    # A role's price (the older format) comes before the table, after a model's own.
    assert price_for(users, "judge", "openai/gpt-4o-mini") == {"input": 1, "output": 2}
    assert price_for(users, "judge", "openai/gpt-4o") == own


def test_a_prices_file_by_model_with_cached_input_is_read_and_a_bad_one_named(tmp_path: Path) -> None:
    good = tmp_path / "prices.json"
    good.write_text(
        json.dumps({"$note": "mine", "openai/gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6}}),
        encoding="utf-8",
    )
    assert load_prices(good)["openai/gpt-4o-mini"]["cached_input"] == 0.075  # type: ignore[index]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"openai/gpt-4o-mini": {"input": 0.15, "ouput": 0.6}}), encoding="utf-8")
    with pytest.raises(LexpilotError, match=r"bad.json: Price of model 'openai/gpt-4o-mini': unknown field 'ouput'"):
        load_prices(bad)


@pytest.mark.parametrize(
    ("price", "problem"),
    [
        ({"input": 0.15}, "missing field 'output'"),
        ({"input": "0.15", "output": 0.6}, "'input' must be a number, not '0.15'"),
        ({"input": 0.15, "output": True}, "'output' must be a number, not True"),
        ({"input": 0.15, "cahced_input": 0.07, "output": 0.6}, "unknown field 'cahced_input'"),
        ([0.15, 0.6], "a price is an object of USD per 1M tokens, not list"),
    ],
)
def test_a_bad_price_is_refused_naming_its_field(tmp_path: Path, price: object, problem: str) -> None:
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps({"openai/gpt-4o-mini": price}), encoding="utf-8")
    with pytest.raises(LexpilotError) as refused:
        load_prices(bad)
    assert f"Price of model 'openai/gpt-4o-mini': {problem}; expected" in str(refused.value)


def test_a_prices_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Windows PowerShell 5.1's `Set-Content -Encoding utf8` and Notepad write one."""
    marked = tmp_path / "prices.json"
    marked.write_bytes(b"\xef\xbb\xbf" + json.dumps({"openai/gpt-4o-mini": {"input": 1, "output": 2}}).encode())
    assert load_prices(marked) == {"openai/gpt-4o-mini": {"input": 1, "output": 2}}


def test_a_key_given_twice_is_refused_in_a_users_file_and_absent_from_the_bundled_one(tmp_path: Path) -> None:
    """JSON keeps the last of two equal keys: a price typed twice would be half ignored in silence."""
    twice = tmp_path / "prices.json"
    twice.write_text(
        '{"openai/gpt-4o": {"input": 1, "output": 2},\n "openai/gpt-4o": {"input": 3, "output": 4, "input": 5}}',
        encoding="utf-8",
    )
    with pytest.raises(LexpilotError, match=r"prices.json: 'openai/gpt-4o', 'input' given more than once"):
        load_prices(twice)
    bundled = Path(__file__).resolve().parents[2].joinpath("data", "prices.json")
    assert load_prices(bundled) is not None  # the same check passes on the table we ship


def test_cached_and_written_prompt_tokens_are_priced_at_their_own_rates():
    from lexpilot_batch.providers.prices import cache_saving, cost_usd

    price = {"input": 3.0, "cached_input": 0.3, "cache_write": 3.75, "output": 15.0}
    # 1M prompt tokens: 0.5M read from the cache, 0.25M written to it, 0.25M plain; batch at half.
    assert cost_usd(1e6, 0, price, "batch", 0.5, 5e5, 2.5e5) == pytest.approx((0.25 * 3 + 0.5 * 0.3 + 0.25 * 3.75) / 2)
    assert cost_usd(1e6, 0, price, "sync", 0.5, 5e5) == pytest.approx(0.5 * 3 + 0.5 * 0.3)
    # Without a cached price, cached tokens cost the input price: nothing saved.
    assert cache_saving(1e6, 5e5, {"input": 1.0, "output": 2.0}, "batch") == 0
    assert cache_saving(1e6, 1e6, price, "batch", 0.5) == pytest.approx((3 - 0.3) / 2)


@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "-1"])
def test_a_price_that_is_no_finite_amount_is_refused(tmp_path: Path, value: str) -> None:
    """Python's JSON reader takes Infinity and NaN: a price of either made every cost print as nan."""
    bad = tmp_path / "prices.json"
    bad.write_text(f'{{"openai/gpt-4o-mini": {{"input": {value}, "output": 0.6}}}}', encoding="utf-8")
    with pytest.raises(
        LexpilotError, match=r"prices.json: Price of model 'openai/gpt-4o-mini': 'input' must be a finite"
    ):
        load_prices(bad)


def test_a_price_of_a_model_no_run_uses_is_named():
    from lexpilot_batch.providers.prices import unused_prices

    prices: dict = {
        "$note": "mine",
        "openai/gpt-4o-mnii": {"input": 1, "output": 2},  # misspelt
        "gpt-4o-mini": {"input": 1, "output": 2},  # as sent: used
        "openai/o4-mini": {"input": 1, "output": 2},
        "judge": {"input": 1, "output": 2},  # a role: used by whatever serves it
    }
    assert unused_prices(prices, ["openai/gpt-4o-mini-2024-07-18", "openai/o4-mini"]) == ["openai/gpt-4o-mnii"]
    assert unused_prices(None, ["openai/o4-mini"]) == []


def test_the_report_warns_of_a_price_no_run_uses(study):
    from lexpilot_batch.report.produce import ReportOptions, produce_report
    from tests.helpers.engine import STUDY_MODELS

    prices = {"sim-evl": {"input": 1, "output": 2}}
    produced = produce_report(study.root, ReportOptions(prices=prices, resamples=0))
    assert any("--prices names 'sim-evl', which is no model of this workspace's runs" in w for w in produced.warnings)
    only = produce_report(study.root, ReportOptions(prices=prices, resamples=0, model=STUDY_MODELS[0]))
    assert not any("sim-evl" in w for w in only.warnings)  # a filtered report sees only some models
