"""The projection of a model whose provider prices by time of day (`providers.schedules`), both
ways: sent now, at the price of this hour and no wait, or in its off-peak window (`--off-peak`,
`engine.off_peak`), at the off-peak price after the wait until the window opens.

The projection's cost of such a model is its listed (peak) price; with `--off-peak` it is the
off-peak price, which is what `--off-peak` sends it at.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.estimate.assumptions import Span
from lexpilot_batch.providers.backends import BATCH_PRICED, RUN_HERE
from lexpilot_batch.providers.schedules import factor_at, next_change, next_off_peak, schedule_for, when


@dataclass
class OffPeakChoice:
    """One (role, model) priced by the hour: its projected cost sent now and sent off-peak."""

    role: str
    model: str
    schedule: str  # `Schedule.describe()`, with its source and date
    peak_usd: Span  # at the listed (peak) price
    now_usd: Span  # at this hour's price (the peak, or off-peak if it is off-peak now)
    now_is_peak: bool
    off_peak_usd: Span
    wait_s: float  # until the off-peak window opens (0: it is open)
    opens: str  # when it opens, or when it closes if open now (UTC)
    chosen: bool  # `--off-peak`: this is how it is sent


def choices(
    cost_by_model: dict[tuple[str, str], Span | None],
    backends: Mapping[str, str],
    prices: Mapping[str, Any] | None,
    off_peak: bool,
    now: float,
) -> list[OffPeakChoice]:
    """The (role, model)s sent here (sync) whose provider has a schedule, both ways; with
    `off_peak`, their projected cost in `cost_by_model` becomes the off-peak one."""
    out = []
    for (role, model), listed in cost_by_model.items():
        schedule = schedule_for(prices, model)
        backend = backends.get(role, "")
        if listed is None or schedule is None or backend not in RUN_HERE or backend in BATCH_PRICED:
            continue
        factor = factor_at(schedule, now)
        opens = next_off_peak(schedule, now)
        edge = next_change(schedule, now) if opens == now else opens
        cheap = listed.map(lambda usd, f=schedule.off_peak_factor: usd * f)
        out.append(
            OffPeakChoice(
                role,
                model,
                f"{schedule.describe()} ({schedule.source.split(' ')[0].rstrip(':')}, as of {schedule.as_of})",
                listed,
                listed.map(lambda usd, f=factor: usd * f),
                factor == 1.0,
                cheap,
                0.0 if opens is None else max(0.0, opens - now),
                "" if edge is None else when(edge),
                off_peak,
            )
        )
        if off_peak:
            cost_by_model[(role, model)] = cheap
    return out


def lines(rows: list[OffPeakChoice], usd: Any, three: Any) -> list[str]:
    """The render's lines: each model's cost and wait both ways, beside its cost at peak."""
    if not rows:
        return []
    way = "off-peak (--off-peak)" if rows[0].chosen else "at peak (the list price: an upper bound)"
    out = [f"Priced by the hour (USD min / expected / max; the projection above prices them {way}):"]
    for r in rows:
        wait = f"wait {r.wait_s / 3600:.1f} h, until {r.opens}" if r.wait_s else f"no wait (off-peak until {r.opens})"
        share = r.off_peak_usd.expected / r.peak_usd.expected if r.peak_usd.expected else 1.0
        out.append(f"  {r.role} {r.model}: {r.schedule}")
        out.append(f"    at peak: {three(r.peak_usd, usd)}")
        out.append(f"    sent now ({'peak' if r.now_is_peak else 'off-peak'}): {three(r.now_usd, usd)}, no wait")
        out.append(f"    sent off-peak (--off-peak): {three(r.off_peak_usd, usd)} ({share:.0%} of peak), {wait}")
    return out
