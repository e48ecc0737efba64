"""Straggler hedging (`--hedge`): a batch still running past a deadline drawn from the workspace's
own measured batch durations is cancelled, and its unfinished requests travel again.

Batch durations are heavy-tailed (OpenRouter's batch API: median 7 minutes, 90% within an hour;
`simulated.latency`), and a wave waits for its slowest batch. With `--hedge`, the deadline is the
`HEDGE_QUANTILE` of the durations (submit to finish) of the workspace's batches that completed at a
provider, the simulated one included, once `MIN_MEASURED` have; before that nothing is hedged. Each
batch still running counts at its age, a duration it will at least take (a censored one): the
batches that complete first are the quickest, and without the running ones three quick batches of
a wave of twenty would set a deadline that cancels most of the rest (`bench/draws.py` at 20x: 48
round trips at p50 instead of 15, and p50 3x longer). Counted so, a wave's own batches set a
deadline its running batches pass only once about 9 in 10 of them have completed.
`--max-wave-age` still applies as a fixed bound: the earlier of the two is the one used.

What happens past the deadline is what `--max-wave-age` does (`poll.poll_files`): the batch is
cancelled where it is still running; the provider keeps the lines it finished and answers the rest
as never run (OpenAI, Anthropic: a cancelled batch's completed requests are in its results and are
the only ones billed), which are ingested as any cancelled batch's: the finished answers recorded
once, the rest back to due without using up `--retries` (`due.UNEXECUTED_ATTEMPTS` bounds them),
asked again in the next wave, by whatever route `--tail` gives that wave (flex, sync within
`--max-premium`, or a new batch). A batch that completes before its cancel lands is taken as it
ended, every answer once; a crash in between leaves the file in flight and the next poll sees the
batch as the provider has it. So a hedged study ends with the records of an unhedged one.

A batch of a retried request can be hedged again, and a provider whose batches all slow down
together gets its slow batches cancelled more than once (their finished lines are kept each time).
"""

from __future__ import annotations

import math
import sqlite3

from lexpilot_batch.providers.backends import BATCH_LIKE
from lexpilot_batch.providers.batch import BatchStatus
from lexpilot_batch.state.states import FileState
from lexpilot_batch.util import clock

HEDGE_QUANTILE = 0.9  # a batch slower than 9 in 10 of the workspace's own is a straggler
MIN_MEASURED = 3  # completed batches needed before a deadline is drawn from them


def quantile(values: list[float], q: float) -> float:
    """The q-quantile (0-1) of `values` by linear interpolation between order statistics."""
    ordered = sorted(values)
    at = (len(ordered) - 1) * q
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def batch_durations(db: sqlite3.Connection) -> list[float]:
    """Seconds from submitting to finishing of the workspace's completed batches at a provider."""
    marks = ", ".join("?" * len(BATCH_LIKE))
    return [
        float(r[0])
        for r in db.execute(
            f"SELECT finished_at - submitted_at FROM files WHERE backend IN ({marks}) AND batch_status = ?"
            " AND finished_at IS NOT NULL AND submitted_at IS NOT NULL",
            (*sorted(BATCH_LIKE), BatchStatus.COMPLETED),
        )
    ]


def running_ages(db: sqlite3.Connection, now: float) -> list[float]:
    """Seconds since submitting of the workspace's batches still running at a provider."""
    marks = ", ".join("?" * len(BATCH_LIKE))
    return [
        max(0.0, now - float(r[0]))
        for r in db.execute(
            f"SELECT submitted_at FROM files WHERE backend IN ({marks}) AND status = ? AND submitted_at IS NOT NULL",
            (*sorted(BATCH_LIKE), FileState.SUBMITTED),
        )
    ]


def hedge_deadline(db: sqlite3.Connection, now: float | None = None) -> float | None:
    """Seconds after which a batch still running is a straggler; None before `MIN_MEASURED`. The
    running batches count at their age on `clock.now` (module docstring)."""
    durations = batch_durations(db)
    if len(durations) < MIN_MEASURED:
        return None
    return quantile(durations + running_ages(db, clock.now() if now is None else now), HEDGE_QUANTILE)


def max_age(db: sqlite3.Connection, hedge: bool, max_wave_age: float | None) -> float | None:
    """The age past which `poll.poll_files` cancels a running batch: the earlier of `--max-wave-age`
    and, with `--hedge`, the hedge deadline; None: never."""
    ages = [age for age in (max_wave_age, hedge_deadline(db) if hedge else None) if age is not None]
    return min(ages) if ages else None
