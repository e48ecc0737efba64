"""The bench's replay over many draws of the calibrated latency model (`bench/draws.py`): what
each configuration waits for, on a small study of known waves, by behaviour."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import pytest

from bench import draws
from lexpilot_batch.engine.hedge import quantile
from lexpilot_batch.engine.tail import DEFAULT_FLEX_SECONDS
from lexpilot_batch.providers.routing.routes import RouteRules, resolve_route
from lexpilot_batch.simulated.batches.lifecycle import WINDOW_SECONDS
from lexpilot_batch.simulated.latency import batch_seconds, chat_seconds, stuck


def args(**given: Any) -> argparse.Namespace:
    base = dict(
        draws=3, compare=False, batch_median=420.0, batch_p90=3600.0, stuck=0.0, flex_range=None,
        flex_latency=None, sync_latency=2.0, concurrency=64, prices=None, rate_limits=None,
    )  # fmt: skip
    return argparse.Namespace(**{**base, **given})


def study(sizes: list[int]) -> draws.Study:
    """One file per wave, of these many requests, for a bare model (an OpenAI batch route)."""
    route = resolve_route("eval", "bench-eval", None, RouteRules(environ={}))
    files: list[dict[str, Any]] = [
        {"pk": i, "wave": i, "path": f"file-{i}", "n_requests": n, "tokens": 1000 * n, "endpoint": "/v1/chat/completions",
         "model": "bench-eval", "provider": None, "backend": "batch"}
        for i, n in enumerate(sizes, start=1)
    ]  # fmt: skip
    ids = {f["pk"]: [f"w{f['pk']}-r{j}" for j in range(f["n_requests"])] for f in files}
    return draws.Study(files, {f["pk"]: route for f in files}, ids, {})


def replay(s: draws.Study, given: argparse.Namespace, seed: int) -> dict[str, dict[str, Any]]:
    return draws.replay(s, given, seed, {f["pk"]: 1.0 for f in s.files})


def a_seed(spec: argparse.Namespace, extra: Callable[[list[float]], bool] = lambda first: True) -> int:
    """A seed under which file-4's batch is drawn stuck and none of the first three, the batch a
    hedge sends for file-4's rest ends within the deadline the first three give, and `extra` holds
    of the first three's durations."""
    for seed in range(5000):
        faults = draws.model_faults(spec, seed)
        first = [batch_seconds(faults, f"file-{i}") for i in (1, 2, 3)]
        if (
            stuck(faults, "file-4", WINDOW_SECONDS)
            and not any(stuck(faults, f"file-{i}", WINDOW_SECONDS) for i in (1, 2, 3))
            and not stuck(faults, "file-4|hedge", WINDOW_SECONDS)
            and batch_seconds(faults, "file-4|hedge") <= quantile(first, 0.9)
            and extra(first)
        ):
            return seed
    raise AssertionError("no such seed")


def test_batches_only_waits_for_each_wave_s_drawn_batch_and_a_stuck_one_for_its_window_and_a_retry() -> None:
    s = study([5000, 100, 100])
    got = replay(s, args(), seed=4)["batches"]
    faults = draws.model_faults(args(), 4)
    assert got["round_trips"] == 3
    assert got["seconds"] == pytest.approx(sum(batch_seconds(faults, f"file-{i}") for i in (1, 2, 3)))
    stuck = replay(s, args(stuck=1.0), seed=4)["batches"]
    # Every batch stuck, its leftover too, up to RETRIES round trips a wave.
    assert stuck["round_trips"] == 3 * draws.RETRIES and stuck["seconds"] == 3 * draws.RETRIES * WINDOW_SECONDS
    seconds, trips, completed = draws.round_trip(draws.model_faults(args(stuck=0.5), 0), "file-7", WINDOW_SECONDS)
    assert seconds == (trips - 1) * WINDOW_SECONDS + batch_seconds(
        draws.model_faults(args(stuck=0.5), 0), "file-7" if trips == 1 else f"file-7|retry-{trips - 1}"
    )
    assert completed == (trips == 1)


def test_auto_sends_a_wave_on_flex_when_quicker_than_the_median_batch_measured_so_far() -> None:
    s = study([5000, 100, 100])
    got = replay(s, args(), seed=4)["auto"]
    faults = draws.model_faults(args(), 4)
    # Wave 1: 5,000 calls of 60 s, 64 at a time, take 79 min: longer than the default hour, a batch.
    # Waves 2 and 3: 2 x 60 s on flex, less than the median batch measured so far.
    assert got["round_trips"] == 1
    assert got["seconds"] == pytest.approx(batch_seconds(faults, "file-1") + 2 * 2 * DEFAULT_FLEX_SECONDS)
    # Batches measured quicker than two flex calls: the waves stay batches.
    quick = replay(s, args(batch_median=30.0, batch_p90=60.0), seed=4)["auto"]
    assert quick["round_trips"] == 3
    # Flex over Gemini's 1 to 15 minutes: each call is drawn. Wave 2 goes flex on the product's
    # 60 s a call; wave 3, of as many requests, is planned at the rate wave 2's flex file ran at
    # (its time again), and goes flex only if that is quicker than the batch measured so far.
    spread = args(flex_range="60:900")
    ranged = replay(s, spread, seed=4)["auto"]
    wave2 = draws.makespan([chat_seconds(draws.model_faults(spread, 4), f"w2-r{j}", flex=True) for j in range(100)], 64)
    assert ranged["round_trips"] == 1 + (wave2 >= batch_seconds(faults, "file-1"))
    assert ranged["seconds"] > got["seconds"]


def test_auto_without_flex_sends_small_waves_through_sync_within_the_premium() -> None:
    s = study([5000, 100, 100, 2000])
    got = replay(s, args(), seed=2)["auto-noflex"]
    faults = draws.model_faults(args(), 2)
    # Waves 2 and 3 (2 calls of 2 s at a time each) cost +100% of 200 requests: within 10% of
    # wave 1's 5,000; wave 4's 2,000 would not be.
    assert got["round_trips"] == 2
    expected = batch_seconds(faults, "file-1") + 2 * 2 * 2.0 + batch_seconds(faults, "file-4")
    assert got["seconds"] == pytest.approx(expected)


def test_percentiles_interpolate_as_the_standard_library_and_options_are_checked() -> None:
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0, 3.5, 8.9, 7.9, 3.2]
    assert draws.percentile(values, 95) == pytest.approx(statistics.quantiles(values, n=20, method="inclusive")[18])
    assert draws.percentile(values, 50) == statistics.median(values)
    assert draws.makespan([2.0] * 130, 64) == 6.0 and draws.makespan([], 8) == 0.0
    assert draws.check_draws_args(args()) is None
    assert "MIN:MAX" in (draws.check_draws_args(args(flex_range="900:60")) or "")
    assert "batch_p90" in (draws.check_draws_args(args(batch_p90=100.0)) or "")
    assert "--compare" in (draws.check_draws_args(args(compare=True)) or "")


def test_hedging_cancels_a_stuck_batch_at_the_measured_90th_percentile_and_resends_its_rest() -> None:
    s = study([200, 200, 200, 5000])
    spec = args(stuck=0.3)
    seed = a_seed(spec)
    faults = draws.model_faults(spec, seed)
    got = replay(s, spec, seed)
    first = [batch_seconds(faults, f"file-{i}") for i in (1, 2, 3)]
    retry = batch_seconds(faults, "file-4|retry-1")
    assert not stuck(faults, "file-4|retry-1", WINDOW_SECONDS)
    assert got["batches"]["seconds"] == pytest.approx(sum(first) + WINDOW_SECONDS + retry)
    # Hedged: cancelled at the 90th percentile of the three measured and itself at its age (`engine.hedge`:
    # 4 durations, the 90th percentile between the third and it), past which it is from the slowest
    # of the three on; its rest in a new batch.
    deadline = max(first)
    again = batch_seconds(faults, "file-4|hedge")
    assert got["batches+hedge"]["seconds"] == pytest.approx(sum(first) + deadline + draws.CANCEL_SECONDS + again)
    assert got["batches+hedge"]["round_trips"] == got["batches"]["round_trips"] == 5
    # No premium: the rest travels at batch price.
    assert got["batches+hedge"]["extra_usd"] == 0


def test_hedging_under_auto_sends_the_rest_on_flex_when_quicker_than_a_batch() -> None:
    # Every wave 5,000 requests: 79 min of flex calls, longer than any median batch here, so batches.
    s = study([5000, 5000, 5000, 5000])
    spec = args(stuck=0.3, batch_median=5000.0, batch_p90=10000.0)
    # Measured batches quicker than a wave on flex (79 min), slower than half of one (40 min).
    seed = a_seed(
        spec,
        lambda first: all(statistics.median(first[:k]) < 4740 for k in (1, 2, 3)) and statistics.median(first) > 2400,
    )
    faults = draws.model_faults(spec, seed)
    first = [batch_seconds(faults, f"file-{i}") for i in (1, 2, 3)]
    got = replay(s, spec, seed)
    assert got["auto"]["round_trips"] == got["batches"]["round_trips"] >= 5  # every wave a batch, a retry
    # Wave 4 stuck: cancelled at the deadline with half of it done; its 2,500 left take 40 x 60 s on
    # flex, quicker than the median batch measured, so they go flex, at batch price.
    rest = draws.makespan([chat_seconds(faults, f"w4-r{j}", flex=True) for j in range(2500, 5000)], 64)
    assert rest == 40 * DEFAULT_FLEX_SECONDS
    hedged = got["auto+hedge"]
    assert statistics.median(first) > rest  # (this seed's three measured batches)
    assert hedged["seconds"] == pytest.approx(sum(first) + max(first) + draws.CANCEL_SECONDS + rest)
    assert hedged["round_trips"] == 4 and hedged["extra_usd"] == 0
    # Without flex, within --max-premium 10: 2,500 of 20,000 requests through sync is +12.5%, too much.
    noflex = got["auto-noflex+hedge"]
    assert noflex["extra_usd"] == 0 and noflex["round_trips"] == 5


def test_a_hedged_batch_s_rest_is_hedged_in_turn_past_the_same_deadline() -> None:
    faults = draws.model_faults(args(stuck=0.0), 0)
    keys = ["x", "x|hedge", "x|hedge|hedge"]
    took = [batch_seconds(faults, k) for k in keys]
    deadline = min(took[0], took[1]) - 1  # the first two past it
    seconds, trips, completed = draws.hedged_trip(faults, "x", deadline)
    if took[2] <= deadline:
        assert seconds == pytest.approx(2 * (deadline + draws.CANCEL_SECONDS) + took[2]) and trips == 3
    else:
        assert seconds > 2 * (deadline + draws.CANCEL_SECONDS) + deadline and trips > 3
    assert not completed  # the first batch was cancelled: nothing measured of it
    assert draws.hedged_trip(faults, "x", 10 * max(took)) == (took[0], 1, True)
    # Never more than RETRIES batches, each past the deadline: the last one is waited for.
    seconds, trips, _ = draws.hedged_trip(faults, "x", 0.0)
    assert trips == draws.RETRIES and seconds >= (draws.RETRIES - 1) * draws.CANCEL_SECONDS


def test_the_adaptive_client_runs_as_the_fixed_pool_when_no_limit_binds_and_slower_under_one() -> None:
    calls = [60.0 + (i * 37) % 840 for i in range(3000)]
    free, peak = draws.adaptive_makespan(calls, 64, 0, 0, 1000)
    assert free == draws.makespan(calls, 64) and peak == 64  # starts at 64: the old fixed pool
    grown, peak = draws.adaptive_makespan(calls, 1000, 0, 0, 1000)
    assert grown < free / 5 and peak == 1000  # grows to its ceiling
    # 120 requests a minute, 2 a second: 3,000 calls take at least 1,500 s less the minute's burst.
    limited, peak = draws.adaptive_makespan(calls, 1000, 120, 0, 1000)
    assert limited >= (3000 - 120) / 2 and peak < 1000
    # Tokens bind the same way: 1,000 tokens a call at 120,000 a minute.
    assert draws.adaptive_makespan(calls, 1000, 0, 120_000, 1000)[0] == pytest.approx(limited, rel=0.05)


def test_rate_limits_parse_with_the_mid_tier_by_default() -> None:
    assert draws.rate_limits(None) == (5000, 4_000_000)
    assert draws.rate_limits("0:100") == (0, 100)
    with pytest.raises(ValueError, match="RPM:TPM"):
        draws.rate_limits("5000")


def test_a_window_carried_from_the_last_file_starts_where_it_ended() -> None:
    """The product keeps a run's window for the next file of the same model and tier in its process
    (`window.learned`, `keep`); the replay does too: a second file of 60 s calls starts at the
    ceiling the first grew to, instead of climbing from 64 again."""
    from lexpilot_batch.providers.sync.window import Window

    calls = [60.0] * 4000
    fresh, _ = draws.adaptive_makespan(calls, 1000, 0, 0, 1000)
    window = Window(1000)
    draws.adaptive_makespan(calls, 1000, 0, 0, 1000, window)
    assert window.limit() == 1000
    carried, peak = draws.adaptive_makespan(calls, 1000, 0, 0, 1000, window)
    assert carried == 4 * 60.0 and peak == 1000 and fresh >= carried + 3 * 60.0  # 64, 128, 256, 512 first


def one_wave(models: list[str], n: int) -> draws.Study:
    """One wave of one file per entry of `models` (a model may repeat), each of `n` requests."""
    rules = RouteRules(environ={})
    files: list[dict[str, Any]] = [
        {"pk": i, "wave": 1, "path": f"file-{i}", "n_requests": n, "tokens": 1000 * n, "endpoint": "/v1/chat/completions",
         "model": model, "provider": None, "backend": "batch"}
        for i, model in enumerate(models, start=1)
    ]  # fmt: skip
    ids = {f["pk"]: [f"f{f['pk']}-r{j}" for j in range(n)] for f in files}
    routes = {f["pk"]: resolve_route("eval", f["model"], None, rules) for f in files}
    return draws.Study(files, routes, ids, {})


def test_a_wave_s_flex_files_of_two_models_take_the_longer_not_the_sum() -> None:
    """The product sends a pass's files at once, each model in its own window (`at_once.run_files`):
    two models' 1,500 calls of 60 s, 64 at a time, take the time of one (1,410 s), and `--tail auto`
    plans them so (the sum, 2,820 s, would still be under the default hour; 3,000 calls each, 2,820 s
    apiece, go flex only because they run at once). Two files of one model share its window: they
    take as long as their calls through one window."""
    alone = draws.adaptive_makespan([DEFAULT_FLEX_SECONDS] * 1500, 64, 5000, 4_000_000, 1000)[0]
    two = replay(one_wave(["bench-eval", "bench-two"], 1500), args(), seed=0)["auto"]
    assert two["round_trips"] == 0 and two["seconds"] == pytest.approx(alone)
    big = replay(one_wave(["bench-eval", "bench-two"], 3000), args(), seed=0)["auto"]
    longer = draws.adaptive_makespan([DEFAULT_FLEX_SECONDS] * 3000, 64, 5000, 4_000_000, 1000)[0]
    assert big["round_trips"] == 0 and big["seconds"] == pytest.approx(longer) and 2 * longer > 3600
    same = replay(one_wave(["bench-eval", "bench-eval"], 1500), args(), seed=0)["auto"]
    assert same["seconds"] == pytest.approx(longer) and same["seconds"] > 1.9 * two["seconds"]


def test_the_files_of_one_model_share_its_rate_limit() -> None:
    """At 120,000 tokens a minute and 1,000 tokens a call, two files of one model together send
    120 calls a minute; two models, each its own limit, twice that."""
    limited = args(concurrency=1000, rate_limits="0:120000", flex_latency=60.0)
    same = replay(one_wave(["bench-eval", "bench-eval"], 600), limited, seed=0)["auto"]["seconds"]
    apart = replay(one_wave(["bench-eval", "bench-two"], 600), limited, seed=0)["auto"]["seconds"]
    assert same >= (1200 - 120) / 2 and apart < 0.6 * same


def test_the_hedge_deadline_counts_the_same_wave_s_batches_as_engine_hedge_does() -> None:
    def at(got: list[tuple[float, float] | None]) -> list[float | None]:
        return [None if g is None else round(g[0], 3) for g in got]

    # Nothing measured before: the wave's completed batches count, and its running ones at their age,
    # so the three quickest set no deadline; with 4 of 5 completed (at 400 s) the stuck one is past it.
    wave = [(400.0, True), (100.0, True), (90_000.0, False), (300.0, True), (200.0, True)]
    assert at(draws.hedge_times([], wave)) == [None, None, 400.0, None, None]
    # Earlier waves measured: the wave's own completed batches join them.
    assert at(draws.hedge_times([1000.0] * 3, [(100.0, True), (5000.0, True)])) == [None, 1000.0]
    # A stuck batch never completes: it does not count, and fewer than 3 completed hedge nothing.
    assert draws.hedge_times([], [(100.0, True), (200.0, True), (90_000.0, False)]) == [None, None, None]
    # The deadline of the earlier waves already below a batch's age: cancelled when it is passed.
    assert at(draws.hedge_times([50.0, 60.0, 70.0], [(100.0, True)])) == [70.0]
    # A wave of 20 whose 3 quickest end first: none of the others is cancelled until 18 have ended.
    wave = [(100.0 * k, True) for k in range(1, 19)] + [(90_000.0, False), (80_000.0, True)]
    got = draws.hedge_times([], wave)
    assert got[:18] == [None] * 18 and at(got[18:]) == [1800.0, 1800.0]


def test_a_stall_in_the_first_wave_is_hedged_once_the_rest_of_its_batches_have_completed() -> None:
    route = resolve_route("eval", "bench-eval", None, RouteRules(environ={}))
    files: list[dict[str, Any]] = [
        {"pk": i, "wave": 1, "path": f"file-{i}", "n_requests": 200, "tokens": 200_000, "endpoint": "/v1/chat/completions",
         "model": "bench-eval", "provider": None, "backend": "batch"}
        for i in (1, 2, 3, 4)
    ]  # fmt: skip
    s = draws.Study(
        files, {f["pk"]: route for f in files}, {f["pk"]: [f"w1-r{f['pk']}-{j}" for j in range(200)] for f in files}, {}
    )
    spec = args(stuck=0.3)
    seed = a_seed(spec)
    faults = draws.model_faults(spec, seed)
    first = [batch_seconds(faults, f"file-{i}") for i in (1, 2, 3)]
    got = replay(s, spec, seed)
    retry = batch_seconds(faults, "file-4|retry-1")
    assert got["batches"]["seconds"] == pytest.approx(max(WINDOW_SECONDS + retry, *first))
    # Hedged when the other three of the wave have completed, its rest in a new batch.
    again = batch_seconds(faults, "file-4|hedge")
    assert got["batches+hedge"]["seconds"] == pytest.approx(max(first) + draws.CANCEL_SECONDS + again)
    assert got["batches+hedge"]["seconds"] < got["batches"]["seconds"] / 5
