"""What tokens cost: one formula for the report (tokens used) and the estimate (tokens projected).

Prices are list prices per role, `{role: {"input": USD per 1M prompt tokens, "output": USD per 1M
completion tokens}}` (`--prices FILE`). Work sent through a provider's Batch API (the `batch`
backend, and the `simulated` one that stands in for it) costs the list price less the batch
discount, 0.5 by default because providers' Batch APIs charge about half; work sent through
`sync` costs the list price. Work left to the `manual` backend, or a role without a price, has no
cost we can know (None): a local model, or a console with its own pricing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.apis import BATCH_DISCOUNT, BATCH_PRICED

Prices = Mapping[str, Mapping[str, float]]

DEFAULT_BATCH_DISCOUNT = BATCH_DISCOUNT
DISCOUNTED_BACKENDS = BATCH_PRICED  # batches, and the flex tier (`providers.flex`)
UNPRICED_BACKENDS: tuple[str, ...] = ("manual",)


def cost_usd(
    prompt_tokens: float,
    completion_tokens: float,
    price: Mapping[str, float] | None,
    backend: str,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
) -> float | None:
    """List price of the tokens, less the batch discount where the backend earns it; None when
    there is no price or the backend's cost is not ours to know."""
    if price is None or backend in UNPRICED_BACKENDS:
        return None
    factor = 1 - batch_discount if backend in DISCOUNTED_BACKENDS else 1.0
    return (prompt_tokens * float(price["input"]) + completion_tokens * float(price["output"])) / 1_000_000 * factor


def total(costs: Iterable[float | None]) -> float | None:
    """The sum, or None when any part has no cost."""
    costs = list(costs)
    return None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))


def check_prices(prices: Prices | None, batch_discount: float) -> None:
    if not 0 <= batch_discount <= 1:
        raise LexpilotError(f"batch_discount must be between 0 and 1, got {batch_discount}.")
    for role, price in (prices or {}).items():
        if not isinstance(price, Mapping) or set(price) != {"input", "output"}:
            raise LexpilotError(
                f'Price of role {role!r} must be {{"input": USD per 1M prompt tokens, '
                f'"output": USD per 1M completion tokens}}, got {price!r}.'
            )


def load_prices(path: Path | None) -> dict | None:
    """The prices file (`--prices`), checked; None without one."""
    if path is None:
        return None
    try:
        prices = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LexpilotError(
            f"{path}: cannot read prices ({exc}); expected JSON "
            '{"eval": {"input": 2.5, "output": 10}, ...} in USD per 1M tokens'
        ) from None
    if not isinstance(prices, dict):
        raise LexpilotError(f"{path}: prices must be a JSON object keyed by role (eval, user, judge)")
    return prices
