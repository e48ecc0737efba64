"""The simulated provider's latency model: how long a batch takes, and how long a chat completion.

Two models, chosen by the fault keys (`faults.Faults`):

- Constant (the default): a batch takes `latency` seconds (S) from its creation to its terminal
  state; a chat completion takes `sync_latency` seconds (s). `latency_spread` (a fraction f, 0 by
  default) spreads each one uniformly over [L(1 - f), L(1 + f)].
- Calibrated to published figures (`PUBLISHED`, every key overridable): with `batch_median` and
  `batch_p90`, a batch takes a log-normal draw with that median and 90th percentile
  (`lognormal_sigma`); a draw beyond the batch's completion window, or a batch drawn stuck
  (`stuck_batch`, `stuck`), stays `in_progress` part-way and ends only at its window's expiry with
  partial results (`batches.run`). With `flex_max`, a flex call takes a uniform draw over
  [`flex_min`, `flex_max`].

Each draw is a pure function of the fault seed and what is timed: a batch by the SHA-256 of its
input file, a chat completion by the id the client gives it (`X-Client-Request-Id`, which the sync
backend sets to the request's custom_id; a random id per call otherwise). So the server sleeps
exactly what `bench/run_bench.py` computes from a workspace without sleeping: the simulated time
to result of a run with minutes-long batches (`bench/draws.py` draws it for many seeds).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from lexpilot_batch.simulated.faults import Faults, draw

# Published figures the calibrated model is fitted to (sources cited per number).
# OpenRouter's batch API, over the 230k+ batches of its beta: "the median finished in 7 minutes and
# 90% finished within an hour" (OpenRouter's batch API announcement, as quoted in issue 47).
OPENROUTER_MEDIAN_SECONDS = 7 * 60.0
OPENROUTER_P90_SECONDS = 3600.0
# A batch that sits PENDING / in_progress until its window expires: Gemini Batch Mode incidents of
# jobs pending over 24 h (googleapis/python-genai #1482, #2439, #2974), OpenAI batches expired after
# 23 h in real evals. No provider publishes a rate: 1% a batch is ours, a small named guess.
STUCK_PROBABILITY = 0.01
# Gemini's Flex inference targets "1 to 15 minutes" a call (Gemini API docs, "Flex inference").
GEMINI_FLEX_MIN_SECONDS = 60.0
GEMINI_FLEX_MAX_SECONDS = 15 * 60.0
# The fault keys of the calibrated model and their published values (`published_spec`).
PUBLISHED_KEYS = {
    "batch_median": OPENROUTER_MEDIAN_SECONDS,
    "batch_p90": OPENROUTER_P90_SECONDS,
    "stuck_batch": STUCK_PROBABILITY,
    "flex_min": GEMINI_FLEX_MIN_SECONDS,
    "flex_max": GEMINI_FLEX_MAX_SECONDS,
}


def published_spec(**overrides: float) -> str:
    """The fault spec of the calibrated model, any key overridden (`flex_max=0`: flex at
    `flex_latency`); add `seed=N` and other faults with a comma."""
    unknown = set(overrides) - set(PUBLISHED_KEYS)
    if unknown:
        raise ValueError(f"not a key of the calibrated model: {', '.join(sorted(unknown))}")
    values = {**PUBLISHED_KEYS, **overrides}
    if not values["flex_max"]:
        values["flex_min"] = 0.0
    return ",".join(f"{key}={value:g}" for key, value in values.items() if value)


PUBLISHED = published_spec()
_Z90 = NormalDist().inv_cdf(0.9)  # 1.2816: the standard normal's 90th percentile


def lognormal_sigma(median: float, p90: float) -> float:
    """The log-normal's sigma whose median and 90th percentile are these: ln(p90 / median) / z(0.9)."""
    return math.log(p90 / median) / _Z90


def _spread(faults: Faults, base: float, *parts: str) -> float:
    if base <= 0:
        return 0.0
    if not faults.latency_spread:
        return base
    return base * (1 + faults.latency_spread * (2 * draw(faults.seed, "latency", *parts) - 1))


def _unit(u: float) -> float:
    """A uniform draw kept inside (0, 1), for an inverse CDF."""
    return min(max(u, 1e-12), 1 - 1e-12)


def batch_seconds(faults: Faults, input_sha256: str) -> float:
    """Seconds from the creation of a batch of this input file to its terminal state, if it is not
    stuck (`stuck`); a calibrated draw may exceed the batch's window: it is then stuck too."""
    if faults.batch_median > 0:
        z = NormalDist().inv_cdf(_unit(draw(faults.seed, "latency", "batch", input_sha256)))
        return faults.batch_median * math.exp(lognormal_sigma(faults.batch_median, faults.batch_p90) * z)
    return _spread(faults, faults.latency, "batch", input_sha256)


def stuck(faults: Faults, input_sha256: str, window_seconds: float) -> bool:
    """Whether a batch of this input file stops part-way and ends only at its window's expiry:
    drawn stuck (`stuck_batch`), or its drawn duration reaches the window."""
    if faults.stuck_batch and draw(faults.seed, "stuck", input_sha256) < faults.stuck_batch:
        return True
    return faults.batch_median > 0 and batch_seconds(faults, input_sha256) >= window_seconds


def chat_seconds(faults: Faults, request_id: str, flex: bool = False) -> float:
    """Seconds one chat completion takes, for the client's id of the call; on the flex tier a
    uniform draw over [`flex_min`, `flex_max`] when `flex_max` is set, else `flex_latency`
    (`sync_latency` when that is 0), spread by a draw of its own."""
    if flex and faults.flex_max > 0:
        u = draw(faults.seed, "latency", "flex-range", request_id)
        return faults.flex_min + (faults.flex_max - faults.flex_min) * u
    if flex and faults.flex_latency:
        return _spread(faults, faults.flex_latency, "flex", request_id)
    return _spread(faults, faults.sync_latency, "chat", request_id)
