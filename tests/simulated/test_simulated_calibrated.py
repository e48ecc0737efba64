"""The simulated provider's latency model calibrated to published figures (`simulated.latency`):
OpenRouter's batch median and 90th percentile, a stuck batch ending at its window's expiry with
partial results, Gemini's flex "1 to 15 minutes". Checked by what the draws do, not by the formula."""

from __future__ import annotations

import hashlib
from statistics import quantiles

import pytest
from openai import OpenAI

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.data import Message
from lexpilot_batch.simulated import FaultSpecError, SimulatedServer, parse_faults
from lexpilot_batch.simulated.batches import current
from lexpilot_batch.simulated.batches.lifecycle import WINDOW_SECONDS
from lexpilot_batch.simulated.latency import PUBLISHED, batch_seconds, chat_seconds, published_spec, stuck
from tests.helpers.simulated import jsonl, request_line, submit

HISTORY = [Message(role="user", content="我2021年3月借给朋友5万元，他写了借条，约定一年后还，现在一直不还。")]


@pytest.fixture(autouse=True)
def _no_env_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


def test_batch_durations_have_the_published_median_and_90th_percentile_and_a_heavy_tail() -> None:
    faults = parse_faults(PUBLISHED + ",seed=5")
    draws = sorted(batch_seconds(faults, f"input-{i}") for i in range(20_000))
    cuts = quantiles(draws, n=100)
    # OpenRouter: "the median finished in 7 minutes and 90% finished within an hour".
    assert 400 <= cuts[49] <= 440 and 3400 <= cuts[89] <= 3800
    # Heavy-tailed: the 99th percentile is many medians away, unlike the constant model's spread.
    assert cuts[98] > 30 * cuts[49] and min(draws) < 60
    assert draws == sorted(batch_seconds(faults, f"input-{i}") for i in range(20_000))  # a pure function
    assert batch_seconds(parse_faults(PUBLISHED + ",seed=6"), "input-1") != batch_seconds(faults, "input-1")


def test_a_small_named_share_of_batches_is_stuck_until_the_window_and_flex_takes_1_to_15_minutes() -> None:
    faults = parse_faults(PUBLISHED + ",seed=5")
    share = sum(stuck(faults, f"input-{i}", WINDOW_SECONDS) for i in range(20_000)) / 20_000
    # 1% drawn stuck, plus the log-normal's own tail beyond 24 h (about 0.07%).
    assert 0.008 <= share <= 0.013
    assert not any(stuck(parse_faults("latency=60"), f"input-{i}", WINDOW_SECONDS) for i in range(2000))
    # A draw reaching a short window is stuck as well: a 20-minute window leaves the slow half.
    short = sum(stuck(parse_faults("batch_median=420,batch_p90=3600"), f"input-{i}", 1200) for i in range(4000))
    assert 0.15 * 4000 < short < 0.4 * 4000
    flex = [chat_seconds(faults, f"call-{i}", flex=True) for i in range(5000)]
    assert 60 <= min(flex) < 70 and 890 < max(flex) <= 900 and 440 < sum(flex) / len(flex) < 520
    assert chat_seconds(faults, "call-1") == 0  # the sync call keeps its own (here none)


@pytest.mark.parametrize(
    ("spec", "field"),
    [("batch_median=420", "batch_p90"), ("batch_median=3600,batch_p90=420", "batch_median"),
     ("flex_min=120", "flex_min"), ("flex_min=900,flex_max=60", "flex_max"), ("stuck_batch=2", "stuck_batch")],
)  # fmt: skip
def test_inconsistent_calibrated_keys_are_refused_by_name(spec: str, field: str) -> None:
    with pytest.raises(FaultSpecError, match=field):
        parse_faults(spec)


def test_a_stuck_batch_runs_part_way_then_expires_at_its_window_with_partial_results(tmp_path) -> None:
    lines = [request_line(f"k1-{i}-lca.c.gen-1", prompts.lexawn_prompt(HISTORY)) for i in range(10)]
    data = jsonl(lines)
    with SimulatedServer(tmp_path / "sim", faults=parse_faults(published_spec(stuck_batch=1))) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        batch_id = submit(client, data)
        assert server.store is not None
        record = server.store.get_batch(batch_id)
        assert record is not None
        start = record["sim"]["created"]
        took = batch_seconds(server.faults, hashlib.sha256(data).hexdigest())
        assert took < WINDOW_SECONDS  # stuck by the draw, not by its duration
        late = current(server.store, record, start + took + 60)
        assert late["status"] == "in_progress" and 3 <= late["request_counts"]["completed"] <= 7
        assert current(server.store, record, start + WINDOW_SECONDS - 1)["status"] == "in_progress"
        ended = current(server.store, record, start + WINDOW_SECONDS + 1)
    assert ended["status"] == "expired" and ended["output_file_id"] and ended["error_file_id"]
    assert ended["request_counts"] == {**late["request_counts"], "failed": 10 - late["request_counts"]["completed"]}
