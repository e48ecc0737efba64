"""The time to result of a finished workspace under the simulated provider's latency model, its
batch round trips and its cost, for its own `--tail-sync` and a sweep of others (bench/README.md,
"Time to result")."""

from __future__ import annotations

import argparse
import heapq
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

# Tail-sync limits the bench also evaluates on every run (see `time_to_result`).
SWEEP = (0, 100, 250, 500, 1000, 1500, 2000, 3000, 5000)
# Default prices, the same for every role: gpt-4o-mini's list price, USD per 1M tokens.
DEFAULT_PRICE = {"input": 0.15, "output": 0.60}


# Keys of the simulated provider's faults that make it sleep (`simulated.latency`).
LATENCY_KEYS = ("latency", "sync_latency", "latency_spread", "flex_latency")


def simulator_faults(args: argparse.Namespace) -> str:
    """The simulated provider's faults: `--sim-faults`, and with `--real-time` the latency model's
    keys, so that it sleeps what `time_to_result` computes."""
    parts = [] if args.sim_faults.strip().lower() in ("", "none", "off") else [args.sim_faults]
    if args.real_time:
        parts.append(
            f"latency={args.batch_latency},sync_latency={args.sync_latency},latency_spread={args.latency_spread},"
            f"flex_latency={flex_latency(args)}"
        )
    return ",".join(parts) or "none"


def flex_latency(args: argparse.Namespace) -> float:
    """Seconds a flex call takes in the latency model: `--flex-latency`, by default twice a chat
    completion's (the providers promise only "slower"; Gemini targets 1 to 15 minutes)."""
    return float(args.flex_latency) if args.flex_latency is not None else 2 * float(args.sync_latency)


def expected_latency(args: argparse.Namespace) -> dict[str, float]:
    """What `--tail auto` is told to expect (`--expect-latency`): the latency model's own numbers,
    as a workspace that measured its batches would know them; nothing without `--batch-latency`."""
    if args.batch_latency is None:
        return {}
    return {"batch": float(args.batch_latency), "sync": float(args.sync_latency), "flex": flex_latency(args)}


# The `--tail auto` policies every run is also replayed under (`time_to_result`): (name, premium
# percent, flex-capable models).
POLICIES = (("auto", 0.0, True), ("auto, no flex, premium 10", 10.0, False))


def check_latency_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the latency options together, or None."""
    from lexpilot_batch.simulated import parse_faults

    given = parse_faults(args.sim_faults)
    if (args.compare or args.real_time) and args.batch_latency is None:
        return "--compare and --real-time need --batch-latency S"
    if args.batch_latency is not None and any(getattr(given, key) for key in LATENCY_KEYS):
        return (
            "give the latency either as --batch-latency/--sync-latency/--latency-spread (the latency model) or in "
            "--sim-faults, not both"
        )
    return None


def sleeps_latency(args: argparse.Namespace) -> bool:
    """Whether the simulated provider sleeps a latency in this run."""
    from lexpilot_batch.simulated import parse_faults

    return bool(args.real_time or parse_faults(args.sim_faults).latency)


def poll_pause(args: argparse.Namespace) -> float:
    """Seconds between polls while batches are in flight: `--poll-interval`; by default 0.2 with
    `--real-time`, 0.1 with a latency in `--sim-faults`, and 0.01 when batches end at once."""
    if args.poll_interval is not None:
        return float(args.poll_interval)
    if args.real_time:
        return 0.2
    return 0.1 if sleeps_latency(args) else 0.01


def makespan(durations: list[float], workers: int) -> float:
    """How long the sync backend takes for requests of these durations, in file order, `workers` at
    a time (`providers.sync.SyncRunner`: each free worker takes the next request)."""
    free = [0.0] * max(1, min(workers, len(durations)))
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free) if durations else 0.0


def time_to_result(ws_root: Path, options: Any, args: argparse.Namespace, local_seconds: float) -> dict[str, Any]:
    """The simulated time to result of a finished workspace, its batch round trips and its cost,
    for the run's own `--tail-sync` and for each limit of `SWEEP`.

    Computed, not slept: each batch takes `simulated.latency.batch_seconds` of its input's hash and
    each chat completion `chat_seconds` of its custom_id, the draws the simulated provider sleeps
    with `--real-time`. A wave takes the longest of its batches, or its sync and flex files if that
    is longer: sent at once (`poll.poll_files`, `providers.sync.at_once.run_files`), each model
    `--concurrency` requests at a time, its files in turn, the wave waiting for the slowest model; the run takes the sum over its waves plus `local_seconds`: the engine's time measured
    in this run, less the simulated provider's own work (answering a batch when it is created, and
    chat completions), which a real provider does within its latency. Polls are assumed to notice a
    finished batch at once (`--poll-interval` adds up to its length per wave). Tail-sync does not
    change which requests a wave holds, only how each group travels, so every limit of the sweep is
    evaluated on the same waves, with the compiler's rule (`tail_sync.wave_backend`), and so is each
    `--tail auto` policy of `POLICIES` (`tail.wave_travel`, the waves in order for `--max-premium`).
    A flex call takes `chat_seconds(..., flex=True)`; the run's own row is its files' recorded backends.
    """
    from lexpilot_batch.engine.session import Session
    from lexpilot_batch.engine.tail import Expected, Spent, TailPolicy, is_round_trip, wave_backend, wave_travel
    from lexpilot_batch.providers.backends import FLEX
    from lexpilot_batch.providers.prices import DEFAULT_BATCH_DISCOUNT, cost_usd
    from lexpilot_batch.simulated.faults import Faults
    from lexpilot_batch.simulated.latency import batch_seconds, chat_seconds
    from lexpilot_batch.state.workspace import Workspace

    faults = Faults(
        latency=args.batch_latency,
        sync_latency=args.sync_latency,
        latency_spread=args.latency_spread,
        flex_latency=flex_latency(args),
    )
    prices = json.loads(Path(args.prices).read_text(encoding="utf-8")) if args.prices else None
    price_of = (prices or {}).get
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
    batch_s = {f["pk"]: batch_seconds(faults, f["sha256"]) for f in files}
    sync_s = {pk: makespan([chat_seconds(faults, c) for c in cids], args.concurrency) for pk, cids in ids.items()}
    flex_s = {
        pk: makespan([chat_seconds(faults, c, flex=True) for c in cids], args.concurrency) for pk, cids in ids.items()
    }
    recorded = {f["pk"]: f["backend"] for f in files}
    groups: dict[tuple, list[dict]] = defaultdict(list)  # a wave's files of one group, as compiled
    for f in files:
        route = routes[f["pk"]]
        groups[(f["wave"], route.backend, f["endpoint"], f["model"], f["provider"])].append(f)

    def cost(backend_of: dict[int, str]) -> float:
        return sum(
            cost_usd(p, c, price_of(role, DEFAULT_PRICE), backend_of[pk], DEFAULT_BATCH_DISCOUNT) or 0.0
            for (pk, role), (p, c) in tokens.items()
        )

    def by_limit(limit: int) -> dict[int, str]:
        backend_of = {}
        for group in groups.values():
            backend = wave_backend(routes[group[0]["pk"]], sum(f["n_requests"] for f in group), limit)
            backend_of.update((f["pk"], backend) for f in group)
        return backend_of

    def by_policy(premium: float, flex: bool) -> dict[int, str]:
        policy = TailPolicy(
            auto=True,
            max_premium=premium,
            concurrency=args.concurrency,
            expected=Expected(**expected_latency(args)),
            flex={"*": flex},
        )
        spent, backend_of = Spent(), {}
        for wave in sorted({f["wave"] for f in files}):
            mine = {key: group for key, group in groups.items() if key[0] == wave}
            sizes = {
                key: (routes[g[0]["pk"]], sum(f["n_requests"] for f in g), sum(f["tokens"] or 0 for f in g))
                for key, g in mine.items()
            }
            for key, backend in wave_travel(policy, sizes, spent).items():
                backend_of.update((f["pk"], backend) for f in mine[key])
        return backend_of

    def evaluate(backend_of: dict[int, str], **label: Any) -> dict[str, Any]:
        waves = []
        for wave in sorted({f["wave"] for f in files}):
            mine = [f for f in files if f["wave"] == wave]
            batched = [f for f in mine if is_round_trip(backend_of[f["pk"]])]
            synced = [f for f in mine if not is_round_trip(backend_of[f["pk"]])]
            # The files at once, each model in its own pool (`at_once.run_files`), a model's files in turn.
            lanes: dict[tuple[str, str], float] = defaultdict(float)
            for f in synced:
                backend = backend_of[f["pk"]]
                lanes[(backend, f["model"])] += (flex_s if backend == FLEX else sync_s)[f["pk"]]
            here = max(lanes.values(), default=0.0)
            seconds = max(max((batch_s[f["pk"]] for f in batched), default=0.0), here)
            waves.append(
                {
                    "wave": wave,
                    "batch_requests": sum(f["n_requests"] for f in batched),
                    "sync_requests": sum(f["n_requests"] for f in synced if backend_of[f["pk"]] != FLEX),
                    "flex_requests": sum(f["n_requests"] for f in synced if backend_of[f["pk"]] == FLEX),
                    "seconds": round(seconds, 1),
                }
            )
        provider = sum(w["seconds"] for w in waves)
        all_batch = cost({pk: routes[pk].backend for pk in routes})
        spent = cost(backend_of)
        return {
            **label,
            "batch_round_trips": sum(1 for w in waves if w["batch_requests"]),
            "sync_requests": sum(w["sync_requests"] for w in waves),
            "flex_requests": sum(w["flex_requests"] for w in waves),
            "provider_seconds": round(provider, 1),
            "simulated_seconds": round(provider + local_seconds, 1),
            "cost_usd": round(spent, 4),
            "premium_usd": round(spent - all_batch, 4),
            "premium_pct": round(100 * (spent - all_batch) / all_batch, 1) if all_batch else None,
            "by_wave": waves,
        }

    own = evaluate(recorded, tail_sync=args.tail_sync, tail=args.tail)
    replayed = {pk for group in groups.values() for pk in (f["pk"] for f in group)}
    assert len(replayed) == len(files)
    sweep = [evaluate(by_limit(limit), tail_sync=limit) for limit in SWEEP]
    sweep += [evaluate(by_policy(p, flex), tail=name) for name, p, flex in POLICIES if args.batch_latency]
    for entry in sweep:
        del entry["by_wave"]
    return {
        "model": {
            "batch_latency_s": args.batch_latency,
            "sync_latency_s": args.sync_latency,
            "flex_latency_s": flex_latency(args),
            "latency_spread": args.latency_spread,
            "concurrency": args.concurrency,
            "prices": prices or {"every role": DEFAULT_PRICE},
            "batch_discount": DEFAULT_BATCH_DISCOUNT,
            "local_seconds": round(local_seconds, 1),
        },
        **own,
        "sweep": sweep,
    }
