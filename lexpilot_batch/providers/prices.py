"""What tokens cost: one formula for the report (tokens used), the estimate (tokens projected) and
`--tail auto`'s premium (`engine.tail`).

Prices are list prices per model, `{"openai/gpt-4o-mini": {"input": USD per 1M prompt tokens,
"cached_input": USD per 1M cached prompt tokens (optional), "cache_write": USD per 1M prompt tokens
written to a cache (optional: Anthropic's 1.25x of input), "output": USD per 1M completion
tokens}}`, looked up by `price_for`: a user's `--prices FILE` first (a model as registered, then
as its provider is sent it, then the older per-role keys `eval`, `user`, `judge`, still accepted),
then the bundled, dated table `data/prices.json` (its sources and date in the file), so that a
study of common models is priced without a file and a user's file overrides it model by model.
A provider that bills by time of day has its peak hours in the table's `$schedules` (or the
file's), read by `providers.schedules`: its models are listed at the peak price.
Work sent through a provider's Batch API (the `batch`
backend, and the `simulated` one that stands in for it) costs the list price less the batch
discount, 0.5 by default because providers' Batch APIs charge about half; work sent through
`sync` costs the list price. Cached prompt tokens (`usage`'s `cached_tokens`, Anthropic's
`cache_read_input_tokens`, Gemini's `cachedContentTokenCount`) cost `cached_input` where the price
has one, the input price where it has none; the batch discount applies to them as to the rest:
Anthropic's Message Batches discount "stacks" with prompt caching (https://docs.claude.com/en/docs/build-with-claude/batch-processing,
"Pricing"), and OpenAI's batch prices list cached input at half its standard price
(https://platform.openai.com/docs/pricing, "Batch"). Work left to the `manual` backend, or a role without a price, has no
cost we can know (None): a local model, or a console with its own pricing.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from lexpilot_batch.data.jsonfile import object_pairs
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.providers.backends import BATCH_DISCOUNT, BATCH_PRICED
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.util import resources

Prices = Mapping[str, Mapping[str, float]]
PRICE_FIELDS = frozenset({"input", "output"})
OPTIONAL_PRICE_FIELDS = frozenset({"cached_input", "cache_write"})
ROLE_KEYS = ("eval", "user", "judge")  # the older per-role format, still read
# Completion tokens expected per request of each role, until a workspace measures them
# (`estimate.calibration`; `engine.tail` weighs premiums with them).
COMPLETION_TOKENS: dict[str, int] = {"eval": 500, "user": 120, "judge": 400}
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")  # gpt-4o-mini-2024-07-18 is priced as gpt-4o-mini

DEFAULT_BATCH_DISCOUNT = BATCH_DISCOUNT
DISCOUNTED_BACKENDS = BATCH_PRICED  # batches, and the flex tier (`providers.routing.flex`)
UNPRICED_BACKENDS: tuple[str, ...] = ("manual",)


def cost_usd(
    prompt_tokens: float,
    completion_tokens: float,
    price: Mapping[str, float] | None,
    backend: str,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
    cached_tokens: float = 0,
    written_tokens: float = 0,
) -> float | None:
    """List price of the tokens, less the batch discount where the backend earns it; None when
    there is no price or the backend's cost is not ours to know. `cached_tokens` and
    `written_tokens` (a cache's reads and writes) are part of `prompt_tokens`."""
    if price is None or backend in UNPRICED_BACKENDS:
        return None
    factor = 1 - batch_discount if backend in DISCOUNTED_BACKENDS else 1.0
    listed = float(price["input"])
    cached = min(cached_tokens, prompt_tokens)
    written = min(written_tokens, prompt_tokens - cached)
    prompt = (
        (prompt_tokens - cached - written) * listed
        + cached * float(price.get("cached_input", listed))
        + written * float(price.get("cache_write", listed))
    )
    return (prompt + completion_tokens * float(price["output"])) / 1_000_000 * factor


def cache_saving(
    prompt_tokens: float,
    cached_tokens: float,
    price: Mapping[str, float] | None,
    backend: str,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
    written_tokens: float = 0,
) -> float | None:
    """What the cache saved on these prompt tokens: their cost uncached less their cost as counted."""
    full = cost_usd(prompt_tokens, 0, price, backend, batch_discount)
    counted = cost_usd(prompt_tokens, 0, price, backend, batch_discount, cached_tokens, written_tokens)
    return None if full is None or counted is None else full - counted


def total(costs: Iterable[float | None]) -> float | None:
    """The sum, or None when any part has no cost."""
    costs = list(costs)
    return None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))


@functools.cache
def _bundled() -> tuple[dict[str, dict[str, float]], str]:
    try:
        data = json.loads(resources.data_dir().joinpath("prices.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a broken install prices nothing, rather than failing a report
        return {}, ""
    return {k: v for k, v in data.items() if not k.startswith("$")}, str(data.get("$as_of", ""))


def bundled_prices() -> dict[str, dict[str, float]]:
    """The bundled table: model name as sent -> price."""
    return _bundled()[0]


def bundled_as_of() -> str:
    """The date the bundled table was read from its source pages."""
    return _bundled()[1]


def _sent(model: str) -> str:
    try:
        return parse_model(model).sent
    except ConfigError:
        return model


def price_for(prices: Prices | None, role: str, model: str | None) -> Mapping[str, float] | None:
    """The price of `model` in `role`: the user's file (the model as registered, as sent, without a
    dated snapshot suffix, then the role), else the bundled table; None when neither has it."""
    names = [] if model is None else list(dict.fromkeys([model, _sent(model), _SNAPSHOT.sub("", _sent(model))]))
    given = {k: v for k, v in (prices or {}).items() if not k.startswith("$")}
    for key in [*names, role]:
        if key in given:
            return given[key]
    table = bundled_prices()
    for key in names:
        if key in table:
            return table[key]
    return None


def unused_prices(prices: Prices | None, models: Iterable[str]) -> list[str]:
    """The models a prices file names that `price_for` finds for none of `models` (a misspelt
    name prices nothing, and the model it meant is priced from the bundled table without a word)."""
    names = {n for m in models for n in (m, _sent(m), _SNAPSHOT.sub("", _sent(m)))}
    return [k for k in (prices or {}) if not k.startswith("$") and k not in ROLE_KEYS and k not in names]


def misspelt_prices(prices: Prices | None, models: Iterable[str]) -> list[tuple[str, str]]:
    """The names a prices file gives that price none of `models` but are close to one of them
    (`difflib`, ratio 0.8): a typo, as `(name, the model it most likely meant)`."""
    import difflib

    models = list(models)
    candidates = sorted({n for m in models for n in (m, _sent(m))})
    out = []
    for name in unused_prices(prices, models):
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.8)
        if close:
            out.append((name, close[0]))
    return out


def refuse_misspelt_prices(prices: Prices | None, models: Iterable[str], when: str) -> None:
    """A misspelt model name in a `--prices` file is refused before anything is sent or shown:
    it priced nothing, and the model it meant went on at the bundled price or none."""
    misspelt = misspelt_prices(prices, models)
    if misspelt:
        named = "; ".join(
            f"{name!r} prices no model of this study (did you mean {meant!r}?)" for name, meant in misspelt
        )
        raise ConfigError(f"--prices: {named}. Correct the name in the file and run {when} again; nothing was sent.")


def check_prices(prices: Prices | None, batch_discount: float) -> None:
    if not 0 <= batch_discount <= 1:
        raise LexpilotError(f"batch_discount must be between 0 and 1, got {batch_discount}.")
    for key, price in (prices or {}).items():
        if key.startswith("$"):  # a note, as in the bundled table
            continue
        what = f"role {key!r}" if key in ROLE_KEYS else f"model {key!r}"
        problem = _price_problem(price)
        if problem:
            raise LexpilotError(
                f'Price of {what}: {problem}; expected {{"input": USD per 1M prompt tokens, "cached_input": '
                f'USD per 1M cached prompt tokens (optional), "cache_write": USD per 1M prompt tokens written to a '
                f'cache (optional), "output": USD per 1M completion tokens}}, got {price!r}.'
            )


def _price_problem(price: object) -> str | None:
    """What is wrong with one model's price, in a few words; None when nothing is."""
    if not isinstance(price, Mapping):
        return f"a price is an object of USD per 1M tokens, not {type(price).__name__}"
    unknown = sorted(set(price) - PRICE_FIELDS - OPTIONAL_PRICE_FIELDS)
    if unknown:
        return f"unknown field {', '.join(map(repr, unknown))}"
    missing = sorted(PRICE_FIELDS - set(price))
    if missing:
        return f"missing field {', '.join(map(repr, missing))}"
    for name, value in price.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"{name!r} must be a number, not {value!r}"
        if not math.isfinite(value) or value < 0:
            return f"{name!r} must be a finite number of USD, 0 or more, not {value!r}"
    return None


def duplicate_keys(value: object) -> list[str]:
    """The keys given more than once anywhere in JSON read with `object_pairs`, in file order."""
    if isinstance(value, list):
        return [k for item in value for k in duplicate_keys(item)]
    if not isinstance(value, dict):
        return []
    found = list(getattr(value, "duplicate_keys", []))
    return found + [k for item in value.values() for k in duplicate_keys(item)]


def load_prices(path: Path | None) -> dict | None:
    """The prices file (`--prices`), checked; None without one."""
    if path is None:
        return None
    try:
        # A BOM from a Windows editor is fine; a key given twice is marked (`object_pairs`), not lost.
        prices = json.loads(path.read_text(encoding="utf-8-sig"), object_pairs_hook=object_pairs)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LexpilotError(
            f"{path}: cannot read prices ({exc}); expected JSON "
            '{"openai/gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6}, ...} in USD per 1M tokens'
        ) from None
    twice = duplicate_keys(prices)
    if twice:
        raise LexpilotError(
            f"{path}: {', '.join(map(repr, twice))} given more than once; JSON keeps only the last, "
            "so keep one entry for each and delete the others"
        )
    if not isinstance(prices, dict):
        raise LexpilotError(
            f"{path}: prices must be a JSON object keyed by model (or by role: eval, user, judge), "
            'e.g. {"openai/gpt-4o-mini": {"input": 0.15, "output": 0.6}}'
        )
    try:
        check_prices(prices, DEFAULT_BATCH_DISCOUNT)
    except LexpilotError as exc:
        raise LexpilotError(f"{path}: {exc}") from None
    from lexpilot_batch.providers.schedules import check_schedules

    check_schedules(prices, str(path))  # a provider's hours by time of day (`providers.schedules`)
    return prices
