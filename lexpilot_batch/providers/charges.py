"""What a role's work on one backend cost, from its counts (`state.usage.usage_by_run`): what the
provider reported, where it reported the cost of all of it (OpenRouter's `usage.cost`); else its
tokens at `prices.cost_usd`, and for a provider pricing by the hour (`schedules`) each minute of
answers at that minute's factor. The report and `status` both price with it."""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.prices import cost_usd
from lexpilot_batch.providers.prices import total as total_cost
from lexpilot_batch.providers.schedules import Schedule, factor_at


def all_reported(counts: dict[str, Any]) -> bool:
    """Whether the provider reported the cost of all the work of a role's backend: some requests
    report one, and none that used tokens reports none (counts without these keys: none reported)."""
    return bool(counts.get("reported")) and not counts.get("unreported")


def backend_cost(
    counts: dict[str, Any], price: Any, backend: str, discount: float, schedule: Schedule | None = None
) -> float | None:
    """A role's work on one backend: what the provider reported it cost, where it reported the
    cost of all of it (OpenRouter's `usage.cost`, its batch discount included); else
    `prices.cost_usd` of its tokens (batch work at the discount, sync work at list price, manual
    work unpriced); sync work of a provider pricing by the hour (`schedule`) minute by minute of
    its answers, at `schedules.factor_at` of the list price (the list price where no time was kept)."""
    if all_reported(counts):
        return float(counts["reported_cost_usd"])
    if schedule is not None and "timed" in counts:
        return total_cost(
            None
            if (usd := cost_usd(p, c, price, backend, discount, k, w)) is None
            else usd * factor_at(schedule, None if minute is None else minute * 60.0)
            for minute, _, p, c, k, w in counts["timed"]
        )
    return cost_usd(
        int(counts["prompt_tokens"]),
        int(counts["completion_tokens"]),
        price,
        backend,
        discount,
        int(counts["cached_tokens"]),
        int(counts["cache_write_tokens"]),
    )
