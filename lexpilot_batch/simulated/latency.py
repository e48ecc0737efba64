"""The simulated provider's latency model: how long a batch takes, and how long a chat completion.

A batch takes `latency` seconds (S) from its creation to its terminal state; a chat completion
takes `sync_latency` seconds (s). `latency_spread` (a fraction f, 0 by default) spreads each one
uniformly over [L(1 - f), L(1 + f)]. Each draw is a pure function of the fault seed and what is
timed: a batch by the SHA-256 of its input file, a chat completion by the id the client gives it
(`X-Client-Request-Id`, which the sync backend sets to the request's custom_id; a random id per call
otherwise). So the server sleeps exactly what `bench/run_bench.py` computes from a workspace
without sleeping: the simulated time to result of a run with minutes-long batches.
"""

from __future__ import annotations

from lexpilot_batch.simulated.faults import Faults, draw


def _spread(faults: Faults, base: float, *parts: str) -> float:
    if base <= 0:
        return 0.0
    if not faults.latency_spread:
        return base
    return base * (1 + faults.latency_spread * (2 * draw(faults.seed, "latency", *parts) - 1))


def batch_seconds(faults: Faults, input_sha256: str) -> float:
    """Seconds from the creation of a batch of this input file to its terminal state."""
    return _spread(faults, faults.latency, "batch", input_sha256)


def chat_seconds(faults: Faults, request_id: str, flex: bool = False) -> float:
    """Seconds one chat completion takes, for the client's id of the call; on the flex tier
    `flex_latency` (`sync_latency` when that is 0), spread by a draw of its own."""
    if flex and faults.flex_latency:
        return _spread(faults, faults.flex_latency, "flex", request_id)
    return _spread(faults, faults.sync_latency, "chat", request_id)
