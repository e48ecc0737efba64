"""Switchable faults of the simulated provider, parsed from a spec string, and their dice.

A spec looks like `"line_error=0.05,truncate=0.02,malformed_judge=0.1,expire_batch=0.1,
fail_batch=0.05,http_429=0.05,http_500=0.05,latency=2,seed=7"`; every key is optional and every
fault is off by default. `LEXPILOT_SIM_FAULTS` supplies the spec when none is given.
`http_routes=create_batch+file_content` confines the per-call HTTP faults (429, 500, slow answers)
to the named routes (`route_names`); `damage=empty+html` confines damaged downloads to those kinds
(`DAMAGES`).

Per-request and per-batch faults are drawn from a hash of (fault seed, kind, custom_id or batch
input content), never from counters kept in memory: a restarted server, or a client that resubmits
the same file after a crash, sees the same world, while a retry under a new custom_id gets a fresh
draw. Only the per-call HTTP faults (429, 500, slow answers) are drawn per call, since the SDK
retries those by itself.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, fields

from lexpilot_batch.errors import ConfigError

ENV_VAR = "LEXPILOT_SIM_FAULTS"

PROBABILITIES = (
    "line_error",
    "truncate",
    "malformed_judge",
    "expire_batch",
    "fail_batch",
    "http_429",
    "http_500",
    "empty_content",
    "line_400",
    "stall_batch",
    "http_slow",
    "late_create",
    "content_filter",
    "refusal",
    "http_529",
    "flex_429",
    "cut_download",
    "damaged_download",
    "stuck_batch",
)
SECONDS = (
    "latency",
    "sync_latency",
    "retry_after",
    "slow_seconds",
    "flex_latency",
    "batch_median",
    "batch_p90",
    "flex_min",
    "flex_max",
)
FRACTIONS = ("latency_spread",)
COUNTS = ("token_limit", "refuse_at_create", "file_cap", "damaged_times", "rpm", "tpm")
# What a damaged download of a file's content (`damaged_download`) answers, with HTTP 200: nothing,
# a gateway's HTML error page, its plain-text error, the file cut in the middle of a line, or the
# file without one of its lines.
DAMAGES = ("empty", "html", "text", "truncated", "missing_line")


def route_names() -> tuple[str, ...]:
    """The routes of the simulated server by name, for `http_routes`: each API's, as it declares
    them (`apis`)."""
    from lexpilot_batch.simulated import apis  # its modules import this one: looked up when first asked

    return apis.ROUTE_NAMES


class FaultSpecError(ConfigError, ValueError):
    """A fault spec names an unknown key or gives a bad value."""


@dataclass(frozen=True)
class Faults:
    """Probabilities (0–1) of each fault, plus timing and the seed of the fault dice.

    - `line_error`: a request lands in the error file (`server_error`, or status 500).
    - `truncate`: a request is answered with `finish_reason="length"` and cut content.
    - `malformed_judge`: a judge request's answer is not valid judge JSON.
    - `expire_batch`: a batch expires with only part of its requests done.
    - `fail_batch`: a batch fails validation (`token_limit_exceeded`).
    - `http_429`, `http_500`: any HTTP call is answered 429 (with retry-after) or 500.
    - `http_529`: any HTTP call is answered 529 "overloaded" (Anthropic's; 503 on Gemini's routes).
    - `empty_content`: a request is answered (status 200, `finish_reason="stop"`) with empty or
      null content.
    - `line_400`: a request lands in the error file as a 400 response whose body holds the error
      (`error` null), as seen in the wild.
    - `stall_batch`: a batch stops part-way and stays `in_progress` until its 24 h window ends
      (then `expired`); cancelling it keeps what it finished.
    - `http_slow`: an HTTP call's answer is held back for `slow_seconds` *after* its route ran
      (what a client that times out sees when the provider did the work but answered too late).
    - `late_create`: a batches create is held `slow_seconds` *before* it runs, then creates the
      batch and answers: a client that timed out finds no batch right away, and one later.
    - `content_filter`: a request is answered with `finish_reason="content_filter"` and part of
      its text (what a provider's content filter leaves).
    - `refusal`: a request is answered with `message.refusal` and no content (a model declining).
    - `token_limit`: the enqueued-token quota of each model, in prompt tokens as `usage` counts
      them (0: none). A batch whose tokens, added to those of the model's batches not yet
      finished, go over it fails at once with `token_limit_exceeded`, naming the quota.
    - `flex_429`: a call on the flex tier (`service_tier: "flex"`, chat completions and
      generateContent) is refused 429 "resource unavailable", as OpenAI's Flex processing and
      Gemini's Flex inference refuse when capacity is short; drawn per call, 1 refuses every one.
    - `flex_latency`: seconds each call on the flex tier takes (`sync_latency` if 0).
    - `cut_download`: a download of a file's content (an output or error file, Anthropic's
      results, Gemini's responses file, a page of OpenRouter's results) breaks off half-way: the answer's `Content-Length` is the
      whole file's, and the connection closes after half of it (drawn per call).
    - `damaged_download`: a download of a file's content is answered HTTP 200 with a damaged body,
      whole as far as HTTP can tell (its `Content-Length` its own): one of `DAMAGES`, drawn per
      call among those `damage` names (every kind when empty), as a proxy or gateway having a bad
      moment answers. A page of results in JSON (`routes.Route.page`) is damaged alike:
      `missing_line` drops one of its results, `truncated` cuts its JSON in the middle.
    - `damage`: `+`-separated kinds of damage (`DAMAGES`) `damaged_download` draws from.
    - `damaged_times`: the most times one file's downloads are damaged (0: no bound): with
      `damaged_download=1`, `damaged_times=1` damages every file's first download and no other.
    - `refuse_at_create`: 1 to refuse a batch over the enqueued-token quota (`token_limit`,
      `fail_batch`) at create, with HTTP 400 `token_limit_exceeded` and no batch, as Azure does
      (Azure OpenAI batch docs); 0 (OpenAI's way): a batch that fails with that code.
    - `file_cap`: the most files the provider holds without an expiration (0: no cap), input and
      output files alike, as Azure's 500 (Azure OpenAI batch docs, "Batch limits"): an upload over
      it is refused with HTTP 400 `quota_exceeded` (output files count, as Azure's do). A file uploaded with `expires_after`, an output file of a batch created with
      `output_expires_after`, and a deleted file do not count.
    - `latency`: seconds from batch creation to its terminal state.
    - `sync_latency`: seconds each chat completion takes.
    - `latency_spread`: a fraction f spreading each latency over [L(1 - f), L(1 + f)] (`latency`).
    - `batch_median`, `batch_p90`: with both set (the median below the 90th percentile), a batch
      takes a log-normal draw of that median and 90th percentile instead of `latency`; a draw
      reaching the batch's window makes it stuck (`latency`, fitted to OpenRouter's published
      figures in `latency.PUBLISHED`).
    - `stuck_batch`: a batch stops part-way and ends only at its window's expiry with partial
      results, as `stall_batch` does, drawn by its input file's hash (`latency.stuck`) as the
      bench's replay draws it.
    - `flex_min`, `flex_max`: with `flex_max` set, a flex call takes a uniform draw over
      [flex_min, flex_max] seconds instead of `flex_latency` (Gemini's "1 to 15 minutes").
    - `rpm`, `tpm`: requests and tokens a minute each (API, model) takes on its synchronous calls
      (0: no limit), refused 429 with OpenAI's `x-ratelimit-*` headers and `retry-after`
      (`ratelimits`; `ratelimits.MID_TIER` a documented mid-tier pair).
    - `retry_after`: the wait, in seconds, that 429 and 500 answers ask for.
    - `slow_seconds`: how long an `http_slow` answer is held back.
    - `http_routes`: `+`-separated route names (`route_names`) the per-call HTTP faults are confined
      to; empty means every route.
    - `seed`: seed of the fault dice (independent of the simulated models' seed).
    """

    line_error: float = 0.0
    truncate: float = 0.0
    malformed_judge: float = 0.0
    expire_batch: float = 0.0
    fail_batch: float = 0.0
    http_429: float = 0.0
    http_500: float = 0.0
    latency: float = 0.0
    retry_after: float = 0.05
    seed: int = 0
    empty_content: float = 0.0
    line_400: float = 0.0
    stall_batch: float = 0.0
    http_slow: float = 0.0
    slow_seconds: float = 2.0
    http_routes: str = ""
    sync_latency: float = 0.0
    latency_spread: float = 0.0
    late_create: float = 0.0
    content_filter: float = 0.0
    refusal: float = 0.0
    token_limit: int = 0
    refuse_at_create: int = 0
    file_cap: int = 0
    http_529: float = 0.0
    flex_429: float = 0.0
    flex_latency: float = 0.0
    cut_download: float = 0.0
    damaged_download: float = 0.0
    damage: str = ""
    damaged_times: int = 0
    batch_median: float = 0.0
    batch_p90: float = 0.0
    stuck_batch: float = 0.0
    flex_min: float = 0.0
    flex_max: float = 0.0
    rpm: int = 0
    tpm: int = 0

    def applies_to(self, route: str) -> bool:
        """Whether the per-call HTTP faults apply to calls of this route."""
        return not self.http_routes or route in self.http_routes.split("+")

    def describe(self) -> str:
        """The spec string that reproduces these faults (only non-default keys)."""
        default = Faults()
        parts = [
            f"{f.name}={getattr(self, f.name)}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
        return ",".join(parts) or "none"


def _known() -> str:
    return ", ".join(f.name for f in fields(Faults))


def parse_faults(spec: str | None) -> Faults:
    """Parse `key=value,...`; `None` means "use $LEXPILOT_SIM_FAULTS, else no faults".

    Raises `FaultSpecError` (both a `LexpilotError` and a `ValueError`) naming the bad key.
    """
    if spec is None:
        spec = os.environ.get(ENV_VAR, "")
    spec = spec.strip()
    if spec.lower() in ("", "none", "off"):
        return Faults()
    values: dict[str, float | int | str] = {}
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep:
            raise FaultSpecError(f"faults spec: {item!r} is not key=value (known keys: {_known()})")
        if key in values:
            raise FaultSpecError(f"faults spec: key {key!r} given twice")
        values[key] = _parse_value(key, raw)
    faults = Faults(**values)  # type: ignore[arg-type]
    if (faults.batch_median > 0 or faults.batch_p90 > 0) and not 0 < faults.batch_median < faults.batch_p90:
        raise FaultSpecError(
            f"faults spec: batch_median={faults.batch_median:g} and batch_p90={faults.batch_p90:g} must both be "
            "given, the median below the 90th percentile (e.g. batch_median=420,batch_p90=3600)"
        )
    if (faults.flex_min > 0 or faults.flex_max > 0) and not faults.flex_min <= faults.flex_max:
        raise FaultSpecError(
            f"faults spec: flex_min={faults.flex_min:g} must not exceed flex_max={faults.flex_max:g} "
            "(e.g. flex_min=60,flex_max=900)"
        )
    return faults


def _parse_value(key: str, raw: str) -> float | int | str:
    if key == "damage":
        kinds = [kind.strip() for kind in raw.split("+") if kind.strip()]
        if not kinds or any(kind not in DAMAGES for kind in kinds):
            raise FaultSpecError(
                f"faults spec: damage={raw!r} must name kinds joined by '+' (known kinds: {', '.join(DAMAGES)})"
            )
        return "+".join(kinds)
    if key == "http_routes":
        names = [name.strip() for name in raw.split("+") if name.strip()]
        known = route_names()
        unknown = [name for name in names if name not in known]
        if not names or unknown:
            raise FaultSpecError(
                f"faults spec: http_routes={raw!r} must name routes joined by '+' (known routes: {', '.join(known)})"
            )
        return "+".join(names)
    if key == "seed" or key in COUNTS:
        try:
            whole = int(raw.replace("_", ""))
        except ValueError:
            raise FaultSpecError(f"faults spec: {key}={raw!r} must be an integer") from None
        if key in COUNTS and whole < 0:
            raise FaultSpecError(f"faults spec: {key}={raw!r} must be a whole number >= 0")
        return whole
    if key not in PROBABILITIES and key not in SECONDS and key not in FRACTIONS:
        raise FaultSpecError(f"faults spec: unknown key {key!r} (known keys: {_known()})")
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if key in PROBABILITIES:
        if not 0.0 <= value <= 1.0:
            raise FaultSpecError(f"faults spec: {key}={raw!r} must be a probability between 0 and 1")
    elif key in FRACTIONS:
        if not 0.0 <= value <= 1.0:
            raise FaultSpecError(f"faults spec: {key}={raw!r} must be a fraction between 0 and 1")
    elif not (math.isfinite(value) and value >= 0.0):
        raise FaultSpecError(f"faults spec: {key}={raw!r} must be a number of seconds >= 0")
    return value


def draw(seed: int, *parts: str) -> float:
    """A uniform number in [0, 1) fixed by the seed and the parts (no hidden state)."""
    digest = hashlib.sha256("|".join([str(seed), *parts]).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64
