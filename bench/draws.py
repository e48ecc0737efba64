"""The time to result of a finished workspace over many draws of the calibrated latency model
(`simulated.latency.PUBLISHED`): `python bench/run_bench.py --draws N` (bench/README.md, "Time to
result over many draws").

Each draw is the model under one fault seed (0 ... N-1): every batch of the run's own waves takes
`latency.batch_seconds` of its request file's path (`requests/w0003/eval__....jsonl`), a call
`chat_seconds` of its request's id stem (`batches.answers.draw_key`), both the same in every
workspace of the same study, so that a seed draws the same world whichever run is replayed (the
simulated provider draws by the file's hash and the full custom_id, which carry the workspace's
tag); a batch drawn stuck (`latency.stuck`) ends at its
window's expiry (24 h) with part of its requests done, and the rest take another round trip, drawn
by the same model (a stuck retry waits again). A flex call takes `chat_seconds(..., flex=True)`: the
product's own default, `engine.tail.DEFAULT_FLEX_SECONDS`, unless `--flex-latency S` or
`--flex-range MIN:MAX` (Gemini's "1 to 15 minutes": 60:900) says otherwise; a chat completion
`--sync-latency`. A wave takes its longest batch, or the time its flex and sync files take if that
is longer: sent at once as the product sends a pass's files (`providers.sync.at_once.run_files`),
each model and tier in its own window under its own rate limit, the files of one model in turn in
that window, the wave waiting for the slowest model; the run the sum over its waves plus the
engine's own local time measured in the run. A model's calls run as the product's client runs them
(`adaptive_makespan`): the product's own window (`providers.sync.window.Window`, `--concurrency` its
ceiling per model; a wave's files start where the last files of their model and tier ended in the
same draw and configuration, as `window.learned` and `keep` carry it from one pass to the next
within the product's process, a `run --wait`) against the simulator's own rate limits
(`simulated.ratelimits.RateLimits`, `--rate-limits RPM:TPM` per model, the documented mid-tier
`MID_TIER` by default, each call counting its file's mean input tokens).

Each configuration of `CONFIGS` replays the run's waves with `engine.tail.wave_travel` as the
compiler would: `--tail auto` expects of a batch the median of the durations of the batches that
completed in the earlier waves of the same draw (`state.queries.measured_batch_seconds`), the
product's default (`DEFAULT_BATCH_SECONDS`) before any, and of flex and sync calls the product's
defaults (`Expected`), as a workspace told nothing would. The policy changes how groups travel,
not what a wave holds, so every configuration is replayed on the same waves. `--tail auto` plans a
flex or sync group with the requests a second its model's files ran at in the earlier waves of the
same draw, as the product does (`state.queries.measured_call_rates`), and a wave's models at once
(`engine.tail.TailPolicy.here_seconds`). Not modelled: the provider's rate-limit buckets carried
from one wave to the next (each wave's models find them full), output tokens against the limit.
"""

from __future__ import annotations

import argparse
import copy
import heapq
import json
import math
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

# (name, --tail auto, --max-premium percent, flex-capable models); "batches": batches only.
CONFIGS = (("batches", False, 0.0, False), ("auto", True, 0.0, True), ("auto-noflex", True, 10.0, False))
# How long a cancel takes to land: OpenAI's batch reference, "The batch will be in status
# `cancelling` for up to 10 minutes, before changing to `cancelled`, where it will have partial
# results (if any) available in the output file." The longest, to be safe.
CANCEL_SECONDS = 600.0
RETRIES = 5  # round trips a stuck batch's leftover may take before the replay gives up waiting on it


@dataclass
class Study:
    """What the replay needs of a finished workspace: its files (pk, wave, path, n_requests,
    tokens, backend), each file's route and custom_ids, and its tokens by (file, role)."""

    files: list[dict[str, Any]]
    routes: dict[int, Any]
    ids: dict[int, list[str]]
    tokens: dict[tuple[int, str], tuple[int, int]]

    @property
    def waves(self) -> list[int]:
        return sorted({f["wave"] for f in self.files})


def load(ws_root: Path, options: Any) -> Study:
    from lexpilot_batch.engine.session import Session
    from lexpilot_batch.state.workspace import Workspace

    with Workspace(ws_root, writable=False) as ws:
        session = Session(ws, options)  # routes only: nothing is sent
        db = ws.store.conn
        files = [dict(r) for r in db.execute("SELECT * FROM files ORDER BY pk")]
        routes = {f["pk"]: session.file_route(f) for f in files}
        ids: dict[int, list[str]] = defaultdict(list)
        for file_pk, custom_id in db.execute("SELECT file_pk, custom_id FROM requests ORDER BY pk"):
            ids[file_pk].append(custom_id)
        tokens = {
            (r[0], r[1]): (r[2] or 0, r[3] or 0)
            for r in db.execute(
                "SELECT file_pk, role, SUM(prompt_tokens), SUM(completion_tokens) FROM requests"
                " WHERE status != 'pending' GROUP BY file_pk, role"
            )
        }
        session.close()
    return Study(files, routes, dict(ids), tokens)


def flex_range(raw: str | None) -> tuple[float, float] | None:
    """`--flex-range MIN:MAX` seconds, or None."""
    if raw is None:
        return None
    low, sep, high = raw.partition(":")
    try:
        pair = (float(low), float(high))
    except ValueError:
        pair = (math.nan, math.nan)
    if not sep or not all(math.isfinite(v) for v in pair) or not 0 < pair[0] <= pair[1]:
        raise ValueError(f"--flex-range {raw!r} must be MIN:MAX seconds, 0 < MIN <= MAX (e.g. 60:900)")
    return pair


def check_draws_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the `--draws` options together, or None."""
    from lexpilot_batch.simulated.faults import FaultSpecError

    if args.draws < 0:
        return "--draws must be 0 (off) or a number of seeds"
    if not args.draws:
        return None
    if args.compare:
        return "--draws replays one run's waves: give it without --compare"
    try:
        model_faults(args, 0)
        rate_limits(args.rate_limits)
    except (ValueError, FaultSpecError) as err:
        return str(err)
    return None


def model_faults(args: argparse.Namespace, seed: int) -> Any:
    """The calibrated model's faults for one draw, with the bench's overrides."""
    from lexpilot_batch.engine.tail import DEFAULT_FLEX_SECONDS
    from lexpilot_batch.simulated.faults import parse_faults
    from lexpilot_batch.simulated.latency import published_spec

    spread = flex_range(args.flex_range)
    spec = published_spec(
        batch_median=args.batch_median,
        batch_p90=args.batch_p90,
        stuck_batch=args.stuck,
        flex_min=spread[0] if spread else 0.0,
        flex_max=spread[1] if spread else 0.0,
    )
    flex = args.flex_latency if args.flex_latency is not None else DEFAULT_FLEX_SECONDS
    return parse_faults(f"{spec},sync_latency={args.sync_latency:g},flex_latency={flex:g},seed={seed}")


def makespan(durations: list[float], workers: int) -> float:
    """How long the sync backend takes for calls of these durations, in file order, `workers` at a
    time (as `latency_model.makespan`: each free worker takes the next call)."""
    free = [0.0] * max(1, min(workers, len(durations)))
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free) if durations else 0.0


def rate_limits(spec: str | None) -> tuple[int, int]:
    """`--rate-limits RPM:TPM` (0: no such limit), the simulator's mid-tier by default."""
    from lexpilot_batch.simulated.ratelimits import MID_TIER_RPM, MID_TIER_TPM

    if spec is None:
        return MID_TIER_RPM, MID_TIER_TPM
    rpm, sep, tpm = spec.partition(":")
    try:
        pair = int(rpm), int(tpm)
    except ValueError:
        pair = (-1, -1)
    if not sep or min(pair) < 0:
        raise ValueError(f"--rate-limits {spec!r} must be RPM:TPM, whole numbers >= 0 (e.g. 5000:4000000)")
    return pair


def adaptive_makespan(
    durations: list[float], ceiling: int, rpm: int, tpm: int, tokens: float | list[float], window: Any = None
) -> tuple[float, int]:
    """(seconds, most calls in flight) for calls of these durations, in file order, sent as the
    product's sync runner sends them: at most its window (`Window`; `window`, one carried from an
    earlier file, which this one leaves where it ended, else a new one) in flight, each call admitted
    by the simulator's rate limits (`RateLimits`) on a clock of the replay's own; a refused call
    halves the window and the sending waits the retry-after the refusal names. `tokens`: each call's
    input tokens, or one figure for all. The calls of the files of one model and tier sent at once
    share its window and its limits (`providers.sync.at_once.Lane`): they are its files' calls in
    turn, as one list."""
    from lexpilot_batch.providers.sync.window import Window
    from lexpilot_batch.simulated.errors import ApiError
    from lexpilot_batch.simulated.faults import Faults
    from lexpilot_batch.simulated.ratelimits import RateLimits

    now = 0.0
    limits, faults = RateLimits(lambda: now), Faults(rpm=rpm, tpm=tpm)
    window = Window(ceiling) if window is None else window
    window.now = lambda: now  # a call's seconds on the replay's clock (the stated limits' width)
    flight: list[tuple[float, int, dict[str, str]]] = []
    costs = [max(1, round(t)) for t in tokens] if isinstance(tokens, list) else None
    cost = max(1, round(tokens)) if not isinstance(tokens, list) else 0
    pending, blocked, peak = 0, 0.0, 0
    while pending < len(durations) or flight:
        while pending < len(durations) and len(flight) < window.limit() and blocked <= now:
            need = cost if costs is None else costs[pending]
            ticket = window.ticket(need)
            try:
                headers = limits.admit(faults, "replay", "model", need)
            except ApiError as refused:
                window.refused(ticket)
                blocked = now + int(refused.headers["retry-after-ms"]) / 1000
                continue
            heapq.heappush(flight, (now + durations[pending], ticket, headers))
            pending += 1
            peak = max(peak, len(flight))
        after = [flight[0][0]] if flight else []
        if pending < len(durations) and blocked > now:
            after.append(blocked)
        now = min(after)
        while flight and flight[0][0] <= now:
            _, ticket, headers = heapq.heappop(flight)
            window.answered(ticket, headers)
    return now, peak


def round_trip(faults: Any, key: str, window: float) -> tuple[float, int, bool]:
    """Seconds from a batch's creation until all its requests are answered, the round trips that
    took, and whether its first one completed (what `measured_batch_seconds` counts)."""
    from lexpilot_batch.simulated.latency import batch_seconds, stuck

    seconds, first = 0.0, key
    for trip in range(1, RETRIES + 1):
        if not stuck(faults, key, window):
            return seconds + batch_seconds(faults, key), trip, trip == 1
        seconds += window
        key = f"{first}|retry-{trip}"  # the leftover: another file, another draw
    return seconds, RETRIES, False


def hedged_trip(faults: Any, key: str, deadline: float) -> tuple[float, int, bool]:
    """`round_trip` of a batch hedged past `deadline`: cancelled then, its rest in a new batch (drawn
    anew, hedged in turn), up to `RETRIES` round trips; whether its first one completed."""
    from lexpilot_batch.simulated.batches.lifecycle import WINDOW_SECONDS

    seconds = 0.0
    for trip in range(1, RETRIES + 1):
        took, trips, completed = round_trip(faults, key, WINDOW_SECONDS)
        if took <= deadline or trip == RETRIES:
            return seconds + took, trip - 1 + trips, completed and trip == 1
        seconds += deadline + CANCEL_SECONDS
        key = f"{key}|hedge"
    raise AssertionError("unreachable")


def hedge_times(measured: list[float], wave: list[tuple[float, bool]]) -> list[tuple[float, float] | None]:
    """When each batch of a wave (all sent at its start; each (seconds it would take, whether it
    completes) of `round_trip`) is cancelled as a straggler, and the deadline then: `(at, deadline)`,
    or None when it ends unhedged. The deadline is the product's (`engine.hedge.hedge_deadline`, at
    every poll): the `HEDGE_QUANTILE` of the durations of the batches completed so far, the earlier
    waves' (`measured`) and this wave's that have by then, each batch still running counted at its
    age (it will take at least that), once `MIN_MEASURED` have completed. So a stall in the first
    wave is hedged once about 9 in 10 of its batches have completed, and every batch still running
    then is cancelled (they were sent together)."""
    from lexpilot_batch.engine.hedge import HEDGE_QUANTILE, MIN_MEASURED, quantile

    out: list[tuple[float, float] | None] = [None] * len(wave)
    order = sorted(range(len(wave)), key=lambda i: wave[i][0])
    done, now = list(measured), 0.0

    def past(t: float, running: int) -> bool:  # a batch of age t past the deadline at t
        return quantile(done + [t] * running, HEDGE_QUANTILE) < t

    for at, i in enumerate(order):
        took, completed = wave[i]
        running = len(order) - at
        if len(done) >= MIN_MEASURED and past(took, running):
            # The first moment past the deadline (how far past only grows with the age): bisected.
            low, high = now, took
            for _ in range(50):
                mid = (low + high) / 2
                low, high = (low, mid) if past(mid, running) else (mid, high)
            for j in order[at:]:
                out[j] = (high, quantile(done + [high] * running, HEDGE_QUANTILE))
            break
        now = took
        done += [took] if completed else []
    return out


def replay(
    study: Study, args: argparse.Namespace, seed: int, batch_usd: dict[int, float], peaks_out: list[int] | None = None
) -> dict[str, dict[str, Any]]:
    """Each configuration's time, round trips and cost under the draw of this seed, unhedged and
    hedged (`hedged`); `batch_usd` is each file's batch-priced cost, for a leftover sent through sync;
    `peaks_out` gets the most calls in flight of each file sent here."""
    from lexpilot_batch.engine.tail import (
        DEFAULT_BATCH_SECONDS,
        Expected,
        Spent,
        TailPolicy,
        is_round_trip,
        premium,
        wave_travel,
    )
    from lexpilot_batch.providers.backends import FLEX, SYNC
    from lexpilot_batch.providers.sync.window import keep, learned
    from lexpilot_batch.simulated.batches.answers import draw_key
    from lexpilot_batch.simulated.batches.lifecycle import WINDOW_SECONDS
    from lexpilot_batch.simulated.latency import batch_seconds, chat_seconds, stuck

    faults = model_faults(args, seed)
    trips = {f["pk"]: round_trip(faults, f["path"], WINDOW_SECONDS) for f in study.files}
    here: dict[tuple[tuple[int, ...], bool, int, float, float, bool], tuple[float, float, float, bool]] = {}

    rpm, tpm = rate_limits(args.rate_limits)
    peaks: list[int] = []

    def at_once(pks: tuple[int, ...], flex: bool, carry: Hashable, last: int = 0) -> float:
        """Seconds to send the requests of these files of one model (the last `last` of the one file,
        if given) here, on flex or sync, in one window and under one rate limit, as a pass sends the
        files of one model and tier (`at_once.Lane`); the window the one the last files of the model
        and tier ended with under `carry` (a draw's configuration), left where these end
        (`window.learned`, `window.keep`)."""
        key = (seed, carry, by_pk[pks[0]]["model"], flex)
        window = learned(key, args.concurrency)
        memo = (pks, flex, last, window.size, window.threshold, window.signed)
        if memo not in here:
            calls: list[float] = []
            tokens: list[float] = []
            for pk in pks:
                f = by_pk[pk]
                cids = [draw_key(c) for c in study.ids.get(pk, [])]
                cids = cids[-last:] if last else cids
                calls += [chat_seconds(faults, c, flex=flex) for c in cids]
                tokens += [(f["tokens"] or 0) / max(1, f["n_requests"])] * len(cids)
            took, peak = adaptive_makespan(calls, args.concurrency, rpm, tpm, tokens, window)
            here[memo] = (took, window.size, window.threshold, window.signed)
            peaks.append(peak)
        took, window.size, window.threshold, window.signed = here[memo]
        keep(key, window)
        return took

    by_pk = {f["pk"]: f for f in study.files}

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for f in study.files:
        route = study.routes[f["pk"]]
        groups[(f["wave"], route.backend, f["endpoint"], f["model"], f["provider"])].append(f)
    out = {}
    for (name, auto, pct, flex), hedge in ((config, hedge) for config in CONFIGS for hedge in (False, True)):
        spent, seconds, round_trips, extra_usd = Spent(), 0.0, 0, 0.0
        measured: list[float] = []
        backend_of: dict[int, str] = {}
        ran: dict[tuple[str, str], list[float]] = {}  # (backend, model) -> [requests, seconds] sent here

        def policy(
            batch: float, pct: float = pct, flex: bool = flex, ran: dict[tuple[str, str], list[float]] = ran
        ) -> TailPolicy:
            return TailPolicy(
                auto=True,
                max_premium=pct,
                concurrency=args.concurrency,
                expected=Expected(batch=batch),
                flex={"*": flex},
                rates={key: n / took for key, (n, took) in ran.items() if took > 0},
            )

        for wave in study.waves:
            mine = {key: group for key, group in groups.items() if key[0] == wave}
            expect = median(measured) if measured else DEFAULT_BATCH_SECONDS
            if auto:
                sizes = {
                    key: (study.routes[g[0]["pk"]], sum(f["n_requests"] for f in g), sum(f["tokens"] or 0 for f in g))
                    for key, g in mine.items()
                }
                for key, backend in wave_travel(policy(expect), sizes, spent).items():
                    backend_of.update((f["pk"], backend) for f in mine[key])
            else:
                backend_of.update((f["pk"], study.routes[f["pk"]].backend) for g in mine.values() for f in g)
            wave_files = [f for g in mine.values() for f in g]
            batched = [f for f in wave_files if is_round_trip(backend_of[f["pk"]])]
            # The wave's flex and sync files at once (`poll.poll_files`, `at_once.run_files`): each
            # model and tier in its own window, under its own limits; the wave waits for the longest.
            lanes: dict[tuple[str, str], list[dict]] = defaultdict(list)
            for f in wave_files:
                if f not in batched:
                    lanes[(backend_of[f["pk"]], study.routes[f["pk"]].model)].append(f)
            sent = 0.0
            for (backend, model), lane in lanes.items():
                took_here = at_once(tuple(f["pk"] for f in lane), backend == FLEX, (name, hedge))
                sent = max(sent, took_here)
                total = ran.setdefault((backend, model), [0.0, 0.0])
                total[0] += sum(f["n_requests"] for f in lane)
                total[1] += took_here
            longest, trips_here = 0.0, 0
            wave_trips = [(trips[f["pk"]][0], trips[f["pk"]][2]) for f in batched]
            cancels = hedge_times(measured, wave_trips) if hedge else [None] * len(batched)
            for f, cancel in zip(batched, cancels, strict=True):
                took, n_trips, completed = trips[f["pk"]]
                if cancel is None:
                    longest, trips_here = max(longest, took), max(trips_here, n_trips)
                    measured += [took] if completed else []
                    continue
                at, deadline = cancel
                # Hedged: cancelled at the deadline, its finished lines kept (a stuck batch stopped
                # part-way: half, the middle of the simulator's 30-70%; a slow one progresses
                # linearly), the rest sent again by the quickest route the policy allows.
                done = 0.5 if stuck(faults, f["path"], WINDOW_SECONDS) else at / batch_seconds(faults, f["path"])
                left = max(1, math.ceil(f["n_requests"] * (1 - done)))
                route = study.routes[f["pk"]]
                again = route.backend
                tokens_left = (f["tokens"] or 0) * left / max(1, f["n_requests"])
                if auto:
                    size = {0: (route, float(left), tokens_left)}
                    again = wave_travel(policy(expect), size, copy.deepcopy(spent))[0]
                if again == SYNC:
                    share = batch_usd.get(f["pk"], 0.0) * left / max(1, f["n_requests"])
                    extra_usd += premium(share)
                    spent.sync_usd = None if spent.sync_usd is None else spent.sync_usd + share
                    spent.sync_tokens += tokens_left
                if is_round_trip(again):
                    # The rest in a new batch, which is hedged in turn past the same deadline.
                    retry, retry_trips, retry_completed = hedged_trip(faults, f"{f['path']}|hedge", deadline)
                    measured += [retry] if retry_completed else []
                    longest = max(longest, at + CANCEL_SECONDS + retry)
                    trips_here = max(trips_here, 1 + retry_trips)
                else:
                    longest = max(
                        longest, at + CANCEL_SECONDS + at_once((f["pk"],), again == FLEX, (name, hedge), left)
                    )
                    trips_here = max(trips_here, 1)
            seconds += max(longest, sent)
            round_trips += trips_here
        label = f"{name}+hedge" if hedge else name
        out[label] = {"seconds": seconds, "round_trips": round_trips, "backend_of": backend_of, "extra_usd": extra_usd}
    if peaks_out is not None:
        peaks_out.extend(peaks)
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between order statistics."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    at = (len(ordered) - 1) * q / 100
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def time_to_result_draws(
    ws_root: Path, options: Any, args: argparse.Namespace, local_seconds: float, default_price: dict[str, float]
) -> dict[str, Any]:
    """`time_to_result_draws` (one entry per configuration of `CONFIGS`) and the model it assumed;
    a role without a price in `--prices` at `default_price`."""
    from lexpilot_batch.engine.tail import DEFAULT_BATCH_SECONDS, DEFAULT_FLEX_SECONDS, DEFAULT_SYNC_SECONDS
    from lexpilot_batch.providers.backends import BATCH
    from lexpilot_batch.providers.prices import DEFAULT_BATCH_DISCOUNT, cost_usd

    study = load(ws_root, options)
    prices = json.loads(Path(args.prices).read_text(encoding="utf-8")) if args.prices else None
    price_of = (prices or {}).get

    def cost(backend_of: dict[int, str]) -> float:
        return sum(
            cost_usd(p, c, price_of(role, default_price), backend_of[pk], DEFAULT_BATCH_DISCOUNT) or 0.0
            for (pk, role), (p, c) in study.tokens.items()
        )

    all_batch = cost({pk: route.backend for pk, route in study.routes.items()})
    batch_usd: dict[int, float] = defaultdict(float)
    for (pk, role), (p, c) in study.tokens.items():
        batch_usd[pk] += cost_usd(p, c, price_of(role, default_price), BATCH, DEFAULT_BATCH_DISCOUNT) or 0.0
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    peaks: list[int] = []
    for seed in range(args.draws):
        for name, got in replay(study, args, seed, batch_usd, peaks).items():
            spent = cost(got.pop("backend_of")) + got.pop("extra_usd")
            runs[name].append({**got, "cost": spent, "seconds": got["seconds"] + local_seconds})
    entries = []
    for name in (f"{config[0]}{hedged}" for config in CONFIGS for hedged in ("", "+hedge")):
        draws = runs[name]
        spent = median(d["cost"] for d in draws)
        entries.append(
            {
                "name": name,
                "p50_seconds": round(percentile([d["seconds"] for d in draws], 50), 1),
                "p95_seconds": round(percentile([d["seconds"] for d in draws], 95), 1),
                "max_seconds": round(max(d["seconds"] for d in draws), 1),
                "cost_usd": round(spent, 4),
                "premium_pct": round(100 * (spent - all_batch) / all_batch, 1) if all_batch else None,
                "batch_round_trips_p50": median(d["round_trips"] for d in draws),
            }
        )
    faults = model_faults(args, 0)
    spread = flex_range(args.flex_range)
    return {
        "draws": args.draws,
        "seeds": f"0-{args.draws - 1}",
        "model": {
            "batch_median_s": faults.batch_median,
            "batch_p90_s": faults.batch_p90,
            "stuck_batch": faults.stuck_batch,
            "window_s": 24 * 3600,
            "flex_s": list(spread) if spread else faults.flex_latency,
            "sync_s": faults.sync_latency,
            "concurrency": args.concurrency,
            "client": "a wave's flex and sync files at once (providers.sync.at_once), an adaptive window (providers.sync.window) per model and tier, --concurrency its ceiling, carried from wave to wave",
            "rate_limits": dict(zip(("rpm", "tpm"), rate_limits(args.rate_limits), strict=True)),
            "peak_in_flight": max(peaks, default=0),
            "expected_by_auto": {
                "batch": f"median of completed batches so far, {DEFAULT_BATCH_SECONDS:g} before any",
                "flex": f"measured rate of the earlier waves' flex files, else {DEFAULT_FLEX_SECONDS:g} s a call",
                "sync": f"measured rate of the earlier waves' sync files, else {DEFAULT_SYNC_SECONDS:g} s a call",
            },
            "prices": prices or {"every role": default_price},
            "batch_discount": DEFAULT_BATCH_DISCOUNT,
            "local_seconds": round(local_seconds, 1),
        },
        "entries": entries,
    }


def main(argv: list[str] | None = None) -> int:
    """`python bench/draws.py WORKSPACE --local-seconds S --draws N ...`: the replay alone, on a
    workspace a bench run kept (`run_bench.py --keep`), its local seconds from that run's JSON
    (`time_to_result_draws_model.model.local_seconds`)."""
    import os
    import sys

    from latency_model import DEFAULT_PRICE  # (run as a script: bench/ is on the path)

    from lexpilot_batch.engine.session import ProviderOptions

    parser = argparse.ArgumentParser(prog="python bench/draws.py", description=main.__doc__)
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--local-seconds", type=float, required=True)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--batch-median", type=float, default=420.0)
    parser.add_argument("--batch-p90", type=float, default=3600.0)
    parser.add_argument("--stuck", type=float, default=0.01)
    parser.add_argument("--flex-range")
    parser.add_argument("--flex-latency", type=float)
    parser.add_argument("--sync-latency", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rate-limits", metavar="RPM:TPM")
    parser.add_argument("--prices")
    args = parser.parse_args(argv)
    args.compare = False
    problem = check_draws_args(args) if args.draws else "--draws must be at least 1"
    if problem:
        parser.error(problem)
    # The bench's routes: its bare model names at an OpenAI-compatible endpoint (nothing is sent).
    os.environ.setdefault("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    os.environ.setdefault("OPENAI_API_KEY", "bench-not-a-secret")
    options = ProviderOptions(provider="env", concurrency=args.concurrency, flex={"*": True})
    result = time_to_result_draws(args.workspace, options, args, args.local_seconds, DEFAULT_PRICE)
    for entry in result["entries"]:
        print(json.dumps(entry), file=sys.stderr)
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
