"""How each group of a wave travels: as a batch, on the flex tier, or through the sync backend.

A wave's requests go into one file per (backend, endpoint, model) group (`request_files`), one
batch each. In the last waves of Interaction LJP only the consultations still asking are left, and
a batch round trip of minutes to hours carries a few hundred requests. Two policies send such a
wave without a batch round trip; either way the request lines are the same (the sync runner runs
batch request files of every API shape and answers in that API's batch output shape:
`providers.chat`), so records are identical and the manifest does not change: like `--concurrency`,
an operational choice.

- `--tail-sync N` (manual): a group of at most N requests goes through its provider's synchronous
  call (`sync`: chat completions, Anthropic's Messages, Gemini's generateContent), at list price.
- `--tail auto`: per wave, the groups travel together without a batch when running them here
  takes less than the expected batch round trip: on the flex tier (`providers.flex`: batch price)
  for the models that take it, else through `sync` while the premium stays within `--max-premium`
  percent of the batch-priced cost compiled so far (0, the default: flex only). Running them takes
  `ceil(n / concurrency) × latency` per group, the groups one after the other (`poll.poll_files`
  runs files in turn). A wave that must wait for a batch anyway sends every group as a batch: it
  would pay a premium, or risk flex refusals, and save nothing. The expected latencies are
  `Expected`: the workspace's own measured batch durations, else `DEFAULT_BATCH_SECONDS`, and
  `--expect-latency KIND=S` for any of them. Premiums are weighed in estimated US dollars: each
  group's estimated input tokens (`files.tokens`, the only size known before answers) and its
  role's expected completion tokens (`prices.COMPLETION_TOKENS`) at its model's bundled price
  (`prices.price_for`; the compile has no `--prices` file), so that an expensive model's group on
  sync weighs what it costs beside cheap batched ones. While a model of the wave or of the waves
  before has no bundled price, estimated input tokens stand in for dollars, every model alike.
  The bench measures the real premium.

Decided here only, for the groups of a wave as the compiler writes them (`request_files.WaveWriter`),
for the waves an estimate projects (`estimate.tail`), and the bench's replays.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.apis import BATCH, BATCH_DISCOUNT, BATCH_LIKE, FLEX, OPENAI, SIMULATED, SYNC
from lexpilot_batch.providers.flex import takes_flex
from lexpilot_batch.providers.prices import COMPLETION_TOKENS, cost_usd, price_for
from lexpilot_batch.providers.registry import provider_of
from lexpilot_batch.providers.routes import Route

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
    max_premium: float = 0.0  # percent of the batch-priced cost compiled so far
    concurrency: int = 8
    expected: Expected = field(default_factory=Expected)
    flex: Mapping[str, bool] = field(default_factory=dict)  # --flex MODEL=on|off
    refused: frozenset[str] = frozenset()  # models flex kept refusing: back on batches (`poll`)

    def takes_flex(self, route: Route) -> bool:
        return route.model not in self.refused and takes_flex(route, self.flex)


@dataclass
class Spent:
    """What was compiled so far at batch price, and what of it was sent at list price instead: in
    estimated input tokens, and in estimated dollars at batch price (None once a model without a
    bundled price is among them: `group_usd`)."""

    batch_tokens: float = 0.0
    sync_tokens: float = 0.0
    batch_usd: float | None = 0.0
    sync_usd: float | None = 0.0

    def add(self, role: str, model: str, requests: float, tokens: float, sync: bool) -> None:
        usd = group_usd(role, model, requests, tokens)
        self.batch_tokens += tokens
        self.batch_usd = None if usd is None or self.batch_usd is None else self.batch_usd + usd
        if sync:
            self.sync_tokens += tokens
            self.sync_usd = None if usd is None or self.sync_usd is None else self.sync_usd + usd


def group_usd(role: str, model: str, requests: float, tokens: float) -> float | None:
    """Estimated dollars of a group at batch price: its input tokens, and `requests` times its
    role's expected completion tokens, at the model's bundled price; None without one."""
    price = price_for(None, role, model)
    if price is None:
        return None
    return cost_usd(tokens, requests * COMPLETION_TOKENS.get(role, 0), price, BATCH)


def compiled_spent(db: sqlite3.Connection, but_wave: int | None = None) -> Spent:
    """`Spent` of the files compiled so far (but those of `but_wave`, the one being compiled): the
    batched groups, and those of them sent through sync (`--max-premium`); a role on sync by
    choice counts among these, which only makes the budget stricter. The compiler's and an
    estimate's starting point alike."""
    travelled = (*BATCH_LIKE, FLEX, SYNC)
    marks = ", ".join("?" * len(travelled))
    spent = Spent()
    for backend, roles, model, requests, tokens in db.execute(
        f"SELECT backend, roles, model, n_requests, COALESCE(tokens, 0) FROM files WHERE wave != ? AND backend IN ({marks})"
        " ORDER BY pk",
        (-1 if but_wave is None else but_wave, *travelled),
    ):
        spent.add(roles.split("+")[0], model, requests, tokens, backend == SYNC)
    return spent


def has_chat(route: Route) -> bool:
    """Whether a synchronous call can be sent where the route's batches go: chat completions at any
    OpenAI-compatible endpoint but an Azure Global Batch deployment (`registry.Provider.chat_api`),
    Anthropic's Messages and Gemini's generateContent (`providers.anthropic.chat`, `providers.google.chat`)."""
    if route.provider is None or (route.backend == SIMULATED and route.api == OPENAI):
        return True  # (the simulated provider's OpenAI routes: a chat completion for any model)
    return provider_of(route.provider)[0].chat_api


def wave_backend(route: Route, requests: float, limit: int) -> str:
    """`--tail-sync limit`: the backend a wave's group of `requests` requests of this route travels
    on: `sync` for a batched group of at most `limit` requests (0: never) whose provider has a
    synchronous call, the route's own backend otherwise. (An estimate passes expected numbers.)"""
    if limit and requests <= limit and route.backend in BATCH_LIKE and has_chat(route):
        return SYNC
    return route.backend


def run_seconds(requests: float, concurrency: int, latency: float) -> float:
    """Seconds the sync runner takes for a file of `requests` calls of `latency` seconds each."""
    return math.ceil(requests / max(1, concurrency) - 1e-9) * latency if requests > 0 else 0.0


def premium(batch_priced: float) -> float:
    """The list-price premium of what costs `batch_priced` as a batch, sent through `sync`: list
    price is batch price / (1 - discount)."""
    return batch_priced * BATCH_DISCOUNT / (1 - BATCH_DISCOUNT)


K = TypeVar("K", bound=Hashable)
Sizes = Mapping[K, tuple[Route, float, float]]  # group -> (its route, requests, estimated input tokens)


def wave_travel(policy: TailPolicy, groups: Sizes[K], spent: Spent | None = None) -> dict[K, str]:
    """The backend each group of one wave travels on, under `policy`; `spent` (updated) is what the
    earlier waves were compiled at, for `--max-premium`."""
    spent = spent if spent is not None else Spent()
    own = {key: route.backend for key, (route, _, _) in groups.items()}
    batched = [key for key, (route, _, _) in groups.items() if route.backend in BATCH_LIKE]
    if not policy.auto:
        chosen = {key: wave_backend(route, n, policy.limit) for key, (route, n, _) in groups.items()}
    else:
        chosen = _auto(policy, groups, spent, batched) or own
    for key in batched:
        route, n, tokens = groups[key]
        spent.add(route.role, route.model, n, tokens, chosen[key] == SYNC)
    return chosen


def _auto(policy: TailPolicy, groups: Sizes[K], spent: Spent, batched: list[K]) -> dict[K, str] | None:
    movable = {key for key, (route, _, _) in groups.items() if route.backend in BATCH_LIKE and has_chat(route)}
    if not movable or any(route.backend != SYNC and key not in movable for key, (route, _, _) in groups.items()):
        return None  # nothing to move, or a group waits for a round trip anyway (manual, no chat)
    # What each batched group weighs: its estimated dollars when every model is priced, else tokens.
    usd = {key: group_usd(groups[key][0].role, groups[key][0].model, groups[key][1], groups[key][2]) for key in batched}
    weight: dict[K, float]
    if spent.batch_usd is not None and spent.sync_usd is not None and all(v is not None for v in usd.values()):
        weight, before, sent = {k: v for k, v in usd.items() if v is not None}, spent.batch_usd, spent.sync_usd
    else:
        weight, before, sent = {key: groups[key][2] for key in batched}, spent.batch_tokens, spent.sync_tokens
    budget = policy.max_premium / 100 * (before + sum(weight.values()))
    flexed = {key: FLEX if policy.takes_flex(groups[key][0]) else SYNC for key in movable}
    for plan in (flexed, dict.fromkeys(movable, SYNC)):
        seconds = sum(
            run_seconds(groups[key][1], policy.concurrency, getattr(policy.expected, backend))
            for key, backend in plan.items()
        )
        extra = premium(sum(weight.get(key, 0.0) for key, backend in plan.items() if backend == SYNC))
        if seconds < policy.expected.batch and premium(sent) + extra <= budget + 1e-12 * max(1.0, budget):
            return {key: plan.get(key, route.backend) for key, (route, _, _) in groups.items()}
    return None


def is_round_trip(backend: str) -> bool:
    """Whether a group on this backend waits for a batch: `batch` and `simulated`, and `manual`
    (a file someone runs elsewhere); not `sync` or `flex`."""
    return backend not in (SYNC, FLEX)
