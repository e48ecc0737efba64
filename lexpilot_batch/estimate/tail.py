"""The projected batch round trips, with and without `--tail-sync N`, and what tail-sync costs.

The projection (`projection.Tally.by_wave`) gives each projected wave's expected requests and prompt
characters per (file group, role). A wave makes a batch round trip when one of its groups travels
as a batch; with `--tail-sync N`, a group of at most N expected requests travels through chat
completions instead (`tail_sync.wave_backend`, the compiler's rule), at the list price rather than
the batch price: the premium. Counts are expectations (the clarification probability weighs each
branch), so a wave whose groups the projection expects to be small is counted as the compiler would
decide it on those counts; the real counts of each wave decide when it is compiled.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from lexpilot_batch.engine.tail import is_round_trip, wave_backend
from lexpilot_batch.estimate.assumptions import Assumptions, TailSyncProjection
from lexpilot_batch.estimate.projection import Tally
from lexpilot_batch.providers.apis import SYNC
from lexpilot_batch.providers.routes import Route
from lexpilot_batch.report.costs import cost_usd


def project_tail_sync(
    tally: Tally,
    routes: Mapping[Hashable, Route],
    limit: int,
    a: Assumptions,
    prices: Mapping[str, Mapping[str, float]] | None,
    discount: float,
) -> TailSyncProjection:
    """Batch round trips of the projected waves with and without `limit`, and the premium."""
    out = TailSyncProjection(limit=limit, waves=len(tally.by_wave))
    premium: float | None = 0.0
    for number, wave in enumerate(tally.by_wave, 1):
        sizes: dict[Hashable, float] = {}
        for (group, _role), (n, _chars) in wave.items():
            sizes[group] = sizes.get(group, 0.0) + n
        travels = {group: wave_backend(routes[group], n, limit) for group, n in sizes.items()}
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
            price = prices.get(role) if prices is not None else None
            prompt_tokens, completion_tokens = chars / a.chars_per_token, n * a.completion_tokens[role]
            listed = cost_usd(prompt_tokens, completion_tokens, price, SYNC, discount)
            batched = cost_usd(prompt_tokens, completion_tokens, price, routes[group].backend, discount)
            if premium is None or listed is None or batched is None:
                premium = None
            else:
                premium += listed - batched
    out.sync_requests = round(out.sync_requests)
    out.premium_usd = premium if prices is not None else None
    return out
