"""The projected batch round trips, with and without `--tail-sync N` or `--tail auto`, and what they cost.

The projection (`projection.Tally.by_wave`) gives each projected wave's expected requests and prompt
characters per (file group, role). A wave makes a batch round trip when one of its groups travels
as a batch; with `--tail-sync N`, a group of at most N expected requests travels through chat
completions instead (`engine.tail.wave_backend`, the compiler's rule), at the list price rather than
the batch price: the premium. Counts are expectations (the clarification probability weighs each
branch), so a wave whose groups the projection expects to be small is counted as the compiler would
decide it on those counts; the real counts of each wave decide when it is compiled. The wave in
flight (`projection.InFlight`) comes first, its unanswered requests on the backends its files were
sent on: its round trip, and what it costs, are still ahead.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence

from lexpilot_batch.engine.budgets import FRAMING
from lexpilot_batch.engine.tail import Spent, TailPolicy, is_round_trip, wave_backend, wave_travel
from lexpilot_batch.estimate.assumptions import Assumptions, AutoProjection, AutoWave, TailSyncProjection
from lexpilot_batch.estimate.projection import Tally
from lexpilot_batch.providers.backends import FLEX, SYNC
from lexpilot_batch.providers.prices import cost_usd, price_for
from lexpilot_batch.providers.routing.routes import Route


def group_sizes(
    parts: Mapping[tuple[Hashable, str], Sequence[float]], routes: Mapping[Hashable, Route]
) -> dict[Hashable, tuple[Route, float, float]]:
    """A wave's (group, role) -> (requests, prompt characters) as `tail.wave_travel` weighs its
    groups: each group's route, requests and input tokens estimated as the compiler estimates
    them (`budgets.request_tokens`), which `tail.Measures` scales by what the workspace measured."""
    sizes: dict[Hashable, tuple[Route, float, float]] = {}
    for (group, _role), (n, chars) in parts.items():
        _, count, tokens = sizes.get(group, (routes[group], 0.0, 0.0))
        sizes[group] = (routes[group], count + n, tokens + chars + n * FRAMING)
    return sizes


Parts = Mapping[tuple[Hashable, str], Sequence[float]]  # (file group, role) -> (requests, prompt chars)


def _waves(tally: Tally, first: int) -> Iterator[tuple[int, Parts, Mapping[Hashable, str] | None]]:
    """Each wave still ahead: its number, its parts, and how its groups travel where that is decided
    (the wave in flight), else None; the projected waves numbered from `first`."""
    sent = tally.in_flight
    if sent.parts and sent.wave is not None:
        yield sent.wave, sent.parts, sent.backends
    yield from ((number, wave, None) for number, wave in enumerate(tally.by_wave, first))


def project_tail_sync(
    tally: Tally,
    routes: Mapping[Hashable, Route],
    limit: int,
    a: Assumptions,
    prices: Mapping[str, Mapping[str, float]] | None,
    discount: float,
    first: int = 1,
) -> TailSyncProjection:
    """Batch round trips of the projected waves with and without `limit`, and the premium; the
    waves numbered from `first`, the workspace's next."""
    out = TailSyncProjection(limit=limit)
    premium: float | None = 0.0
    for number, wave, decided in _waves(tally, first):
        out.waves += 1
        sizes: dict[Hashable, float] = {}
        for (group, _role), (n, _chars) in wave.items():
            sizes[group] = sizes.get(group, 0.0) + n
        travels = decided or {group: wave_backend(routes[group], n, limit) for group, n in sizes.items()}
        if any(is_round_trip(routes[group].backend) for group in sizes):
            out.batch_round_trips_without += 1
        if any(is_round_trip(backend) for backend in travels.values()):
            out.batch_round_trips += 1
        moved = [group for group, backend in travels.items() if backend == SYNC and routes[group].backend != SYNC]
        if moved:
            out.sync_waves.append(number)
        for (group, role), (n, chars) in wave.items():
            if group not in moved:
                continue
            out.sync_requests += n
            price = price_for(prices, role, routes[group].model)
            prompt_tokens, completion_tokens = chars / a.chars_per_token, n * a.completion_tokens[role]
            cached = prompt_tokens * a.cached_share[role]  # the same prefixes, cached on either route
            listed = cost_usd(prompt_tokens, completion_tokens, price, SYNC, discount, cached)
            batched = cost_usd(prompt_tokens, completion_tokens, price, routes[group].backend, discount, cached)
            if premium is None or listed is None or batched is None:
                premium = None
            else:
                premium += listed - batched
    out.sync_requests = round(out.sync_requests)
    out.premium_usd = premium
    return out


def project_auto(
    tally: Tally,
    routes: Mapping[Hashable, Route],
    policy: TailPolicy,
    a: Assumptions,
    prices: Mapping[str, Mapping[str, float]] | None,
    discount: float,
    spent: Spent | None = None,
    first: int = 1,
) -> AutoProjection:
    """The projected waves batch-only and under `--tail auto` with `policy`'s premium, concurrency
    and expected latencies (`tail.wave_travel`, the compiler's rule, the waves in order), from
    `spent`: what the workspace sent before them (`tail.sent_spent`; none for a new one);
    the waves numbered from `first`, the workspace's next."""
    auto = TailPolicy(**{**policy.__dict__, "auto": True, "limit": 0})
    out = AutoProjection(policy.max_premium, policy.concurrency, policy.expected.batch)
    spent = spent if spent is not None else Spent()
    # Each model at its own price (`prices.price_for`: a --prices file, else the bundled table).
    batch_cost: float | None = 0.0
    premium: float | None = 0.0
    for number, wave, decided in _waves(tally, first):
        sizes = group_sizes(wave, routes)
        # (The wave in flight is in `spent` already: `tail.sent_spent` counts every sent request.)
        travels = decided or wave_travel(auto, sizes, spent)
        row = AutoWave(number, sum(n for _, n, _ in sizes.values()), 0.0, in_flight=decided is not None)
        if any(is_round_trip(route.backend) for route, _, _ in sizes.values()):
            row.batch_seconds = policy.expected.batch
            out.batch_round_trips += 1
        here: list[tuple[str, str, float]] = []
        for group, backend in travels.items():
            n = sizes[group][1]
            if backend == FLEX:
                row.flex += n
            elif backend == SYNC and routes[group].backend != SYNC:
                row.sync += n
            if is_round_trip(backend):
                row.batch += n
            else:
                here.append((backend, routes[group].model, n))
        row.seconds = policy.expected.batch if row.batch else policy.here_seconds(here)
        out.auto_round_trips += bool(row.batch)
        if batch_cost is not None:
            row.premium_usd = 0.0
            for (group, role), (n, chars) in wave.items():
                prompt, completion = chars / a.chars_per_token, n * a.completion_tokens[role]
                price = price_for(prices, role, routes[group].model)
                cached = prompt * a.cached_share[role]
                batched = cost_usd(prompt, completion, price, routes[group].backend, discount, cached)
                moved = cost_usd(prompt, completion, price, travels[group], discount, cached)
                if batched is None or moved is None or batch_cost is None or premium is None:
                    batch_cost = premium = row.premium_usd = None
                    break
                batch_cost += batched
                row.premium_usd += moved - batched
            if premium is not None and row.premium_usd is not None:
                premium += row.premium_usd
        out.batch_seconds += row.batch_seconds
        out.auto_seconds += row.seconds
        out.waves.append(row)
    out.cost_usd, out.premium_usd = batch_cost, premium
    return out
