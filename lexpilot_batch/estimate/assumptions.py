"""The result of an estimate: the dataclasses `render` shows and `--format json` writes, and the
default assumptions (what each means, and what replaces it once measured: `calibration`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from lexpilot_batch.benchmark.settings import ROLES
from lexpilot_batch.providers.prices import COMPLETION_TOKENS, DEFAULT_BATCH_DISCOUNT

# The default assumptions: `calibration` says what each is and how the workspace measures it.
CHARS_PER_TOKEN = 1.3
RESPONSE_CHARS: dict[str, int] = {"eval": 600, "user": 150, "judge": 30}
CLARIFY_PROBABILITY = 0.5


@dataclass
class Span:
    """A projected quantity: its minimum, probability-weighted expectation and maximum."""

    min: float = 0
    expected: float = 0
    max: float = 0

    def __add__(self, other: Span) -> Span:
        return Span(self.min + other.min, self.expected + other.expected, self.max + other.max)

    def map(self, f: Any) -> Span:
        return Span(f(self.min), f(self.expected), f(self.max))


@dataclass
class WaveRange:
    """How many more waves: all consultations ending at their next label, or going the distance."""

    min: int = 0
    max: int = 0


@dataclass
class RoleWave:
    """One role's requests in the next wave."""

    models: list[str]
    backend: str
    requests: int = 0
    prompt_chars: int = 0
    prompt_tokens: int = 0  # estimated from prompt_chars
    completion_tokens: int = 0  # estimated per request
    cost_usd: float | None = None


@dataclass
class RoleProjection:
    """One role's requests still to be paid for: those in flight, then the next wave's to the end of every run."""

    models: list[str]
    backend: str
    requests: Span = field(default_factory=Span)
    prompt_chars: Span = field(default_factory=Span)
    prompt_tokens: Span = field(default_factory=Span)
    completion_tokens: Span = field(default_factory=Span)
    cost_usd: Span | None = None


@dataclass
class RunProjection:
    run_id: str
    model: str
    new: bool  # not yet registered in the workspace
    active_threads: int
    requests: Span = field(default_factory=Span)


@dataclass
class TailSyncProjection:
    """Batch round trips of the projection, with `--tail-sync limit` and without (waves whose groups
    all travel at once, through the sync backend, make none), and what the groups it moves cost more."""

    limit: int  # --tail-sync N; 0: off
    waves: int = 0  # waves ahead with an expected request: the one in flight, and the projected ones
    batch_round_trips: int = 0
    batch_round_trips_without: int = 0
    sync_waves: list[int] = field(default_factory=list)  # projected waves (the workspace's numbers) moving a group
    sync_requests: float = 0  # expected requests moved to the sync backend
    premium_usd: float | None = None  # their list price less their batch price; None without prices
    premium_share: float | None = None  # the premium over the projection's expected cost


@dataclass
class AutoWave:
    """One wave still ahead (by the workspace's numbering: the one in flight, then the next
    compile's onwards) batch-only and under `--tail auto` (`engine.tail`)."""

    wave: int
    requests: float
    batch_seconds: float  # batch-only: one round trip of the expected batch latency
    in_flight: bool = False  # sent already: its requests not yet answered, on the backends they were sent on
    batch: float = 0  # expected requests that still travel as batches under the policy
    flex: float = 0
    sync: float = 0
    seconds: float = 0.0  # under the policy: the round trip, or the time to run the rest here
    premium_usd: float | None = None


@dataclass
class AutoProjection:
    """The projection batch-only and under the `--tail auto` policy with this workspace's choices."""

    max_premium: float = 0.0
    concurrency: int = 8
    expected_batch_seconds: float = 0.0
    batch_round_trips: int = 0  # batch-only
    auto_round_trips: int = 0
    batch_seconds: float = 0.0
    auto_seconds: float = 0.0
    cost_usd: float | None = None  # batch-only
    premium_usd: float | None = None  # what the policy adds to it
    waves: list[AutoWave] = field(default_factory=list)


@dataclass
class Assumptions:
    """The constants an estimate used, and how many answered requests measured each (0: default).

    Always assumed as well: no failures, hence no retries and no failed threads.
    """

    chars_per_token: float = CHARS_PER_TOKEN
    chars_per_token_measured_on: int = 0
    response_chars: dict[str, int] = field(default_factory=lambda: dict(RESPONSE_CHARS))
    response_chars_measured_on: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    completion_tokens: dict[str, int] = field(default_factory=lambda: dict(COMPLETION_TOKENS))
    completion_tokens_measured_on: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    # Share of a role's prompt tokens its provider reported cached (priced at `cached_input`); 0,
    # no saving assumed, until the workspace measured one.
    cached_share: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ROLES, 0.0))
    cached_share_measured_on: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    clarify_probability: float = CLARIFY_PROBABILITY
    clarify_probability_measured_on: int = 0
    clarify_probability_given: bool = False
    batch_discount: float = DEFAULT_BATCH_DISCOUNT
    backends: dict[str, str] = field(default_factory=dict)


@dataclass
class Estimate:
    """Everything `render` shows; `to_json()` is the `--format json` shape."""

    mode: Literal["dry_run", "workspace"]
    runs: list[RunProjection]
    wave: int | None  # number of the next wave; None while a wave is in flight
    next_wave_source: Literal["compiled", "due", "in_flight", "nothing"]
    next_wave: dict[str, RoleWave]
    next_wave_cost_usd: float | None
    in_flight_wave: int | None
    in_flight_requests: dict[str, int]
    projection: dict[str, RoleProjection]
    projection_requests: Span
    projection_cost_usd: Span | None
    waves_remaining: WaveRange  # from the next wave on (after the one in flight, if any)
    prices_given: bool
    assumptions: Assumptions
    tail_sync: TailSyncProjection = field(default_factory=lambda: TailSyncProjection(0))
    tail_auto: AutoProjection | None = None
    # Projected cost of each model over the roles it serves (`prices.price_for`: a model has its
    # own price); empty when no model has a price.
    projection_cost_by_model: dict[str, Span | None] = field(default_factory=dict)
    # Models priced by the hour, their cost and wait sent now and off-peak (`estimate.off_peak`).
    off_peak: list[Any] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
