"""How each group of a wave travels: as a batch, on the flex tier, or through the sync backend.

A wave's requests go into one file per (backend, endpoint, model) group (`request_files`), one
batch each. In the last waves of Interaction LJP only the consultations still asking are left, and
a batch round trip of minutes to hours carries a few hundred requests. Two policies send such a
wave without a batch round trip; either way the request lines are the same (the sync runner runs
batch request files of every API shape and answers in that API's batch output shape:
`providers.sync.call`), so records are identical and the manifest does not change: like `--concurrency`,
an operational choice.

- `--tail-sync N` (manual): a group of at most N requests goes through its provider's synchronous
  call (`sync`: chat completions, Anthropic's Messages, Gemini's generateContent), at list price.
- `--tail auto`: per wave, the groups travel together without a batch when running them here
  takes less than the expected batch round trip: on the flex tier (`providers.routing.flex`: batch price)
  for the models that take it, else through `sync` while the premium stays within `--max-premium`
  (0, the default: flex only). Running them takes `ceil(n / concurrency) × latency` per model, or
  its measured rate, the models at once (`poll.poll_files` sends a pass's files together, each model
  in its own window: `TailPolicy.here_seconds`). A wave that must wait for a
  batch anyway sends every group as a batch: it would pay a premium, or risk flex refusals, and
  save nothing. The expected latencies are `Expected`: the workspace's own measured batch
  durations, else `DEFAULT_BATCH_SECONDS`, and `--expect-latency KIND=S` for any of them.

  `--max-premium PCT` is checked on the whole study so far, in US dollars at the user's prices
  (`--prices`, remembered by the workspace; else the bundled table, `prices.price_for`) and batch
  discount: a wave's groups go through sync only if the premium already paid (every request sent
  through sync, at its reported tokens: its list price less its batch price) plus these groups'
  premium stays within PCT% of the batch-priced cost of the requests sent before this wave (at
  their reported tokens; this wave's own cost is not counted). Before their answers, these groups
  are weighed high (`Measures`): each request's input tokens at the largest ratio of reported to
  estimated tokens its model had, its completion at the largest completion its role and model
  had (`prices.COMPLETION_TOKENS` until one is answered), no prompt cached. So the premium of the
  study stays within PCT% of its batch-priced cost at the end as long as no request sent through
  sync outgrows the largest of its role and model answered before it. While a model of the study
  has no price, tokens stand in for dollars, every model alike. The bench measures the real premium.

A group smaller than its provider takes in one batch (`spec.Limits.min_requests`: AWS Bedrock's
minimum records per job) goes through `sync` whatever the policy and the premium: it cannot be a
batch (`below_minimum`). Its provider's batch backend refuses such a file, naming the minimum.

Decided here only, for the groups of a wave as the compiler writes them (`request_files.WaveWriter`),
for the waves an estimate projects (`estimate.tail`), and the bench's replays.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from lexpilot_batch.engine.budgets import FRAMING
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import BATCH, BATCH_DISCOUNT, BATCH_LIKE, FLEX, SIMULATED, SYNC
from lexpilot_batch.providers.prefixes import provider_of
from lexpilot_batch.providers.prices import COMPLETION_TOKENS, cost_usd, price_for
from lexpilot_batch.providers.registry import api_spec
from lexpilot_batch.providers.routing.flex import takes_flex
from lexpilot_batch.providers.routing.routes import Route
from lexpilot_batch.state.states import RequestState

AUTO, OFF = "auto", "off"
# Defaults of the expected latencies, in seconds; the workspace's measured batch durations replace
# the first. A batch: an hour, a typical Batch API turnaround well inside its 24 h window (ours, not
# a provider's number). A chat completion of these prompts: 2 s. A flex call: 60 s, the low end of
# Gemini's "1 to 15 minutes" target (OpenAI's guide promises only "slower").
DEFAULT_BATCH_SECONDS = 3600.0
DEFAULT_SYNC_SECONDS = 2.0
DEFAULT_FLEX_SECONDS = 60.0
LATENCY_KINDS = ("batch", "sync", "flex")


# Workspace meta: the models whose flex calls fell back to batches (`poll`), as a JSON list.
FLEX_REFUSED = "flex_refused"


def flex_refused(db: sqlite3.Connection) -> list[str]:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (FLEX_REFUSED,)).fetchone()
    return list(json.loads(row[0])) if row else []


def check_tail_sync(limit: int) -> int:
    if limit < 0:
        raise ConfigError(f"--tail-sync must be 0 (off) or a number of requests, not {limit}")
    return limit


def check_tail(mode: str | None) -> str | None:
    if mode is not None and mode not in (AUTO, OFF):
        raise ConfigError(f"--tail must be 'auto' or 'off', not {mode!r}")
    return mode


def parse_expected(flags: list[str] | None) -> dict[str, float]:
    """`--expect-latency KIND=SECONDS` (repeatable; KIND batch, sync or flex)."""
    out: dict[str, float] = {}
    for flag in flags or []:
        kind, sep, raw = flag.partition("=")
        try:
            seconds = float(raw)
        except ValueError:
            seconds = math.nan
        if not sep or kind.strip() not in LATENCY_KINDS or not (math.isfinite(seconds) and seconds > 0):
            raise ConfigError(
                f"--expect-latency {flag!r} must be KIND=SECONDS, KIND one of {', '.join(LATENCY_KINDS)} "
                "and SECONDS > 0 (e.g. --expect-latency batch=1800)"
            )
        out[kind.strip()] = seconds
    return out


@dataclass(frozen=True)
class Expected:
    """Expected seconds of a batch round trip, and of one call of the sync backend and of flex."""

    batch: float = DEFAULT_BATCH_SECONDS
    sync: float = DEFAULT_SYNC_SECONDS
    flex: float = DEFAULT_FLEX_SECONDS


@dataclass(frozen=True)
class TailPolicy:
    """How a wave's groups travel (the module docstring)."""

    limit: int = 0  # --tail-sync N; 0: off
    auto: bool = False  # --tail auto
    max_premium: float = 0.0  # percent of the batch-priced cost sent before the wave (the module docstring)
    concurrency: int = 8
    expected: Expected = field(default_factory=Expected)
    flex: Mapping[str, bool] = field(default_factory=dict)  # --flex MODEL=on|off
    refused: frozenset[str] = frozenset()  # models flex kept refusing: back on batches (`poll`)
    measures: Measures = field(default_factory=lambda: Measures())  # what `--max-premium` weighs requests at
    # Measured requests a second per (backend, model) at a real provider (`measured_call_rates`).
    rates: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def takes_flex(self, route: Route) -> bool:
        return route.model not in self.refused and takes_flex(route, self.flex)

    def group_seconds(self, backend: str, model: str, requests: float) -> float:
        """Seconds a group of `requests` requests of `model` takes on `backend` (`sync` or `flex`):
        at its measured rate, else `concurrency` at a time at the expected latency."""
        rate = self.rates.get((backend, model))
        if rate and rate > 0:
            return requests / rate if requests > 0 else 0.0
        return run_seconds(requests, self.concurrency, getattr(self.expected, backend))

    def here_seconds(self, groups: Iterable[tuple[str, str, float]]) -> float:
        """Seconds the groups (backend, model, requests) sent here together take: the files of a
        pass run at once, each (backend, model) in its own window (`providers.sync.at_once.run_files`),
        so the longest of the models, each model's groups one after the other in its window."""
        lanes: dict[tuple[str, str], float] = {}
        for backend, model, requests in groups:
            lanes[(backend, model)] = lanes.get((backend, model), 0.0) + requests
        return max((self.group_seconds(b, m, n) for (b, m), n in lanes.items()), default=0.0)


@dataclass(frozen=True)
class Measures:
    """What `--max-premium` weighs a request at before its answer, and the prices it weighs in: the
    user's (`--prices`, else the bundled table) and their batch discount; per model, the largest
    ratio of reported input tokens to the estimate (`budgets.request_tokens`) over its answered
    requests; per (role, model), the largest reported completion. Empty: the estimate itself and
    `prices.COMPLETION_TOKENS` (a projection, or a workspace with no answer yet)."""

    prices: Mapping[str, Mapping[str, float]] | None = None
    discount: float = BATCH_DISCOUNT
    input_factor: Mapping[str, float] = field(default_factory=dict)
    completion: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def usd(self, role: str, model: str, requests: float, tokens: float) -> float | None:
        """Dollars at batch price of `requests` requests of `tokens` estimated input tokens, weighed
        high; None without a price."""
        price = price_for(self.prices, role, model)
        if price is None:
            return None
        completion = self.completion.get((role, model), COMPLETION_TOKENS.get(role, 0))
        return cost_usd(self.tokens(model, tokens), requests * completion, price, BATCH, self.discount)

    def tokens(self, model: str, tokens: float) -> float:
        return tokens * self.input_factor.get(model, 1.0)


def measure(db: sqlite3.Connection, prices: Mapping[str, Mapping[str, float]] | None = None) -> Measures:
    """`Measures` of the workspace's answered requests, at `prices`."""
    done = (RequestState.ANSWERED, RequestState.DISCARDED)
    factor = {
        model: ratio
        for model, ratio in db.execute(
            f"SELECT model, MAX(prompt_tokens * 1.0 / (prompt_chars + {FRAMING})) FROM requests"
            " WHERE prompt_tokens > 0 GROUP BY model"
        )
    }
    completion = {
        (role, model): float(n)
        for role, model, n in db.execute(
            "SELECT role, model, MAX(completion_tokens) FROM requests"
            " WHERE status IN (?, ?) AND completion_tokens > 0 GROUP BY role, model",
            done,
        )
    }
    return Measures(prices, BATCH_DISCOUNT, factor, completion)


@dataclass
class Spent:
    """What the study sent so far at batch price, and what of it was sent at list price instead: in
    input tokens, and in dollars at batch price (None once a model without a price is among them)."""

    batch_tokens: float = 0.0
    sync_tokens: float = 0.0
    batch_usd: float | None = 0.0
    sync_usd: float | None = 0.0

    def add(self, usd: float | None, tokens: float, sync: bool) -> None:
        self.batch_tokens += tokens
        self.batch_usd = None if usd is None or self.batch_usd is None else self.batch_usd + usd
        if sync:
            self.sync_tokens += tokens
            self.sync_usd = None if usd is None or self.sync_usd is None else self.sync_usd + usd


def group_usd(role: str, model: str, requests: float, tokens: float, measures: Measures | None = None) -> float | None:
    """Dollars of a group at batch price before its answers, weighed high (`Measures.usd`)."""
    return (measures or Measures()).usd(role, model, requests, tokens)


def sent_spent(db: sqlite3.Connection, measures: Measures, but_wave: int | None = None) -> Spent:
    """`Spent` of the requests sent so far (but those of `but_wave`, the one being compiled), the
    `--max-premium` budget's starting point for the compiler and an estimate alike: at their
    reported tokens, at `measures`' prices; a request with no reported usage weighed high as before
    its answer (`Measures.usd`), but a failed one, which is not billed. Those sent through sync are
    its premium; a role on sync by choice counts among them, which only makes the budget stricter."""
    travelled = (*BATCH_LIKE, FLEX, SYNC)
    marks = ", ".join("?" * len(travelled))
    spent = Spent()
    for role, model, backend, reported, n, chars, prompt, completion, cached, written in db.execute(
        "SELECT q.role, q.model, f.backend, q.prompt_tokens IS NOT NULL AS reported, COUNT(*), SUM(q.prompt_chars),"
        " SUM(COALESCE(q.prompt_tokens, 0)), SUM(COALESCE(q.completion_tokens, 0)),"
        " SUM(COALESCE(q.cached_tokens, 0)), SUM(COALESCE(q.cache_write_tokens, 0))"
        f" FROM requests q JOIN files f ON f.pk = q.file_pk WHERE q.wave != ? AND f.backend IN ({marks})"
        " AND (q.prompt_tokens IS NOT NULL OR q.status != ?)"
        " GROUP BY q.role, q.model, f.backend, reported ORDER BY q.role, q.model, f.backend, reported",
        (-1 if but_wave is None else but_wave, *travelled, RequestState.FAILED),
    ):
        if reported:
            price = price_for(measures.prices, role, model)
            usd = cost_usd(prompt, completion, price, BATCH, measures.discount, cached, written) if price else None
            spent.add(usd, prompt, backend == SYNC)
        else:
            tokens = chars + n * FRAMING
            spent.add(measures.usd(role, model, n, tokens), measures.tokens(model, tokens), backend == SYNC)
    return spent


def has_chat(route: Route) -> bool:
    """Whether a synchronous call can be sent where the route's batches go: chat completions at any
    OpenAI-compatible endpoint but an Azure Global Batch deployment (`spec.Provider.chat_api`),
    Anthropic's Messages and Gemini's generateContent (`providers.anthropic.chat`, `providers.google.chat`)."""
    if route.provider is None or (route.backend == SIMULATED and api_spec(route.api).openai_lines):
        return True  # (the simulated provider's OpenAI routes: a chat completion for any model)
    return provider_of(route.provider)[0].chat_api


def wave_backend(route: Route, requests: float, limit: int) -> str:
    """`--tail-sync limit`: the backend a wave's group of `requests` requests of this route travels
    on: `sync` for a batched group of at most `limit` requests (0: never), or of fewer than one
    batch of its provider may hold (`spec.Limits.min_requests`), whose provider has a synchronous
    call; the route's own backend otherwise. (An estimate passes expected numbers.)"""
    if (
        (limit and requests <= limit or below_minimum(route, requests))
        and route.backend in BATCH_LIKE
        and has_chat(route)
    ):
        return SYNC
    return route.backend


def below_minimum(route: Route, requests: float) -> bool:
    """Whether a group is smaller than the fewest requests its provider takes in one batch."""
    return 0 < requests < route.limits.min_requests


def run_seconds(requests: float, concurrency: int, latency: float) -> float:
    """Seconds the sync runner takes for a file of `requests` calls of `latency` seconds each."""
    return math.ceil(requests / max(1, concurrency) - 1e-9) * latency if requests > 0 else 0.0


def premium(batch_priced: float, discount: float = BATCH_DISCOUNT) -> float:
    """The list-price premium of what costs `batch_priced` as a batch, sent through `sync`: list
    price is batch price / (1 - discount)."""
    if discount >= 1:  # batches free: any list price is beyond every budget
        return math.inf if batch_priced > 0 else 0.0
    return batch_priced * discount / (1 - discount)


K = TypeVar("K", bound=Hashable)
Sizes = Mapping[K, tuple[Route, float, float]]  # group -> (its route, requests, estimated input tokens)


Weights = Mapping[K, tuple[float | None, float]]  # group -> (dollars at batch price, weighed high; tokens)


def wave_travel(
    policy: TailPolicy, groups: Sizes[K], spent: Spent | None = None, weights: Weights[K] | None = None
) -> dict[K, str]:
    """The backend each group of one wave travels on, under `policy`; `spent` (updated) is what the
    earlier waves were sent at, for `--max-premium`. `weights` are the groups' (`WaveWriter`'s, by
    role), else each group's as one of its route's role (`Measures.usd`)."""
    spent = spent if spent is not None else Spent()
    own = {key: route.backend for key, (route, _, _) in groups.items()}
    batched = [key for key, (route, _, _) in groups.items() if route.backend in BATCH_LIKE]
    if weights is None:
        m = policy.measures
        weights = {
            key: (m.usd(route.role, route.model, n, tokens), m.tokens(route.model, tokens))
            for key, (route, n, tokens) in groups.items()
        }
    if not policy.auto:
        chosen = {key: wave_backend(route, n, policy.limit) for key, (route, n, _) in groups.items()}
    else:
        chosen = _auto(policy, groups, spent, batched, weights) or own
        # A group below its provider's minimum cannot be a batch, whatever the premium.
        chosen = {
            key: wave_backend(route, n, 0) if chosen[key] == route.backend else chosen[key]
            for key, (route, n, _) in groups.items()
        }
    for key in batched:
        usd, tokens = weights[key]
        spent.add(usd, tokens, chosen[key] == SYNC)
    return chosen


def _auto(
    policy: TailPolicy, groups: Sizes[K], spent: Spent, batched: list[K], weights: Weights[K]
) -> dict[K, str] | None:
    movable = {key for key, (route, _, _) in groups.items() if route.backend in BATCH_LIKE and has_chat(route)}
    if not movable or any(route.backend != SYNC and key not in movable for key, (route, _, _) in groups.items()):
        return None  # nothing to move, or a group waits for a round trip anyway (manual, no chat)
    # What each batched group weighs: its dollars when every model is priced, else its tokens.
    weight: dict[K, float]
    usd = {key: weights[key][0] for key in batched}
    if spent.batch_usd is not None and spent.sync_usd is not None and all(v is not None for v in usd.values()):
        weight, before, sent = {k: v for k, v in usd.items() if v is not None}, spent.batch_usd, spent.sync_usd
    else:
        weight, before, sent = {key: weights[key][1] for key in batched}, spent.batch_tokens, spent.sync_tokens
    # Within PCT% of what was sent before this wave: this wave's own cost, not yet known, is left out.
    budget = policy.max_premium / 100 * before
    discount = policy.measures.discount
    flexed = {key: FLEX if policy.takes_flex(groups[key][0]) else SYNC for key in movable}
    for plan in (flexed, dict.fromkeys(movable, SYNC)):
        seconds = policy.here_seconds((backend, groups[key][0].model, groups[key][1]) for key, backend in plan.items())
        extra = sum(weight.get(key, 0.0) for key, backend in plan.items() if backend == SYNC)
        paid = premium(sent + extra, discount)
        if seconds < policy.expected.batch and paid <= budget + 1e-12 * max(1.0, budget):
            return {key: plan.get(key, route.backend) for key, (route, _, _) in groups.items()}
    return None


def is_round_trip(backend: str) -> bool:
    """Whether a group on this backend waits for a batch: `batch` and `simulated`, and `manual`
    (a file someone runs elsewhere); not `sync` or `flex`."""
    return backend not in (SYNC, FLEX)
