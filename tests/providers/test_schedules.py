"""Time-of-day pricing (issue 47, off-peak): DeepSeek's schedule as its pricing page states it
(https://api-docs.deepseek.com/quick_start/pricing, read 2026-12-06: "Off-peak rates are half of
the peak rates. Peak hours are 01:00 - 04:00 and 06:00 - 10:00 UTC", in force since 16:00 UTC on
2026-08-16; weekends off-peak all day in its later revision), the price factor at an instant, the
next change of window, and a `--prices` file's `$schedules` checked field by field."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.prices import bundled_prices, load_prices
from lexpilot_batch.providers.schedules import (
    bundled_schedules,
    factor_at,
    is_peak,
    next_change,
    next_off_peak,
    schedule_for,
)


def at(iso: str) -> float:
    return datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp()


DEEPSEEK = bundled_schedules()["deepseek"]


@pytest.mark.parametrize(
    ("instant", "factor"),
    [
        ("2026-12-07T00:59:59", 0.5),  # Monday, a second before the first window
        ("2026-12-07T01:00:00", 1.0),  # its start is peak (inclusive)
        ("2026-12-07T03:59:59", 1.0),
        ("2026-12-07T04:00:00", 0.5),  # its end is off-peak (exclusive)
        ("2026-12-07T05:59:59", 0.5),
        ("2026-12-07T06:00:00", 1.0),
        ("2026-12-07T09:59:59", 1.0),
        ("2026-12-07T10:00:00", 0.5),
        ("2026-12-11T09:00:00", 1.0),  # Friday
        ("2026-12-12T02:00:00", 0.5),  # Saturday: off-peak all day
        ("2026-12-13T07:00:00", 0.5),  # Sunday
        ("2026-08-17T02:00:00", 1.0),  # a Monday after the change
        ("2026-08-16T15:59:59", 1.0),  # before the schedule began: the list price
    ],
)
def test_deepseeks_factor_at_the_boundaries_and_on_weekends(instant: str, factor: float) -> None:
    assert factor_at(DEEPSEEK, at(instant)) == factor


def test_the_next_change_opens_and_closes_windows_across_the_weekend() -> None:
    assert next_change(DEEPSEEK, at("2026-12-07T00:30:00")) == at("2026-12-07T01:00:00")
    assert next_change(DEEPSEEK, at("2026-12-07T01:00:00")) == at("2026-12-07T04:00:00")
    assert next_change(DEEPSEEK, at("2026-12-07T05:00:00")) == at("2026-12-07T06:00:00")
    # Friday's last window closes at 10:00; the next opens on Monday at 01:00.
    assert next_change(DEEPSEEK, at("2026-12-11T10:00:00")) == at("2026-12-14T01:00:00")
    assert next_off_peak(DEEPSEEK, at("2026-12-07T07:00:00")) == at("2026-12-07T10:00:00")
    assert next_off_peak(DEEPSEEK, at("2026-12-12T07:00:00")) == at("2026-12-12T07:00:00")


def test_the_bundled_schedule_says_its_source_and_date_and_the_table_lists_the_peak_price() -> None:
    assert DEEPSEEK.source.startswith("https://api-docs.deepseek.com/quick_start/pricing")
    assert DEEPSEEK.as_of == "2026-12-06"
    # The page's off-peak rates, half the table's: deepseek-flash 0.003 / 0.15 / 0.6.
    flash = bundled_prices()["deepseek/deepseek-flash"]
    assert {k: v * DEEPSEEK.off_peak_factor for k, v in flash.items()} == {
        "input": 0.15,
        "cached_input": 0.003,
        "output": 0.6,
    }
    assert schedule_for(None, "deepseek/deepseek-flash") == DEEPSEEK
    assert schedule_for(None, "openai/gpt-4o-mini") is None
    assert schedule_for(None, "deepseek-flash") is None  # a bare name names no provider


def test_a_prices_file_corrects_a_schedule_or_adds_one(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "$schedules": {
                    "deepseek": {"peak_utc": ["02:00-03:00"], "off_peak_factor": 0.25},
                    "moonshot": {"peak_utc": ["00:00-24:00"], "peak_days": ["Sat"], "off_peak_factor": 0.9},
                }
            }
        ),
        encoding="utf-8",
    )
    prices = load_prices(path)
    mine = schedule_for(prices, "deepseek/deepseek-flash")
    assert mine is not None and mine.windows == ((120, 180),) and len(mine.days) == 7
    assert factor_at(mine, at("2026-12-12T02:30:00")) == 1.0  # every day without peak_days
    assert factor_at(mine, at("2026-12-07T01:30:00")) == 0.25
    kimi = schedule_for(prices, "moonshot/kimi-k2.5")
    assert kimi is not None and is_peak(kimi, at("2026-12-12T23:59:59"))
    assert factor_at(kimi, at("2026-12-13T00:00:00")) == 0.9


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"deepsek": {"peak_utc": [], "off_peak_factor": 0.5}}, r"deepsek: unknown provider prefix"),
        ({"deepseek": {"peak_utc": ["01:00-04:00"]}}, r"deepseek: missing field 'off_peak_factor'"),
        ({"deepseek": {"peak_utc": ["1-4"], "off_peak_factor": 0.5}}, r"peak_utc: '1-4' is not a \"HH:MM-HH:MM\""),
        ({"deepseek": {"peak_utc": ["22:00-02:00"], "off_peak_factor": 0.5}}, r"split a window across midnight"),
        ({"deepseek": {"peak_utc": [], "off_peak_factor": 2}}, r"off_peak_factor: must be a number from 0 to 1"),
        ({"deepseek": {"peak_utc": [], "off_peak_factor": 0.5, "peak_days": ["Monday"]}}, r"peak_days: must be"),
        ({"deepseek": {"peak_utc": [], "off_peak_factor": 0.5, "since": "yesterday"}}, r"since: must be a UTC"),
        ({"deepseek": {"peak_utc": [], "off_peak_factor": 0.5, "peak": []}}, r"unknown field 'peak'"),
        ([], r"must be an object by provider"),
    ],
)
def test_a_bad_schedule_is_refused_naming_the_file_and_the_field(tmp_path: Path, entry: object, problem: str) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"$schedules": entry}), encoding="utf-8")
    with pytest.raises(LexpilotError, match=r"mine.json: \$schedules.*" + problem):
        load_prices(path)
