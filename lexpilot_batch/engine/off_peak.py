"""`--off-peak`: the requests of a model whose provider prices by time of day (DeepSeek's peak
hours, `providers.schedules`) are sent only in its off-peak window.

It gates the files the engine runs itself (`sync` and `flex`, `backends.RUN_HERE`), at the two
places they are sent: a file is not begun while its model's provider is at peak (`held_until`:
`engine.poll` leaves it in flight, to be run by the first poll inside the next window), and a file
begun off-peak starts no call once the window closes (`may_start`, the sync runner's hook): the
calls in flight finish, their answers are saved, and the rest wait for the next window. Nothing
is recorded for the wait: a file in flight whose output answers some of its requests is what a
killed run leaves, and the next poll, in this command (`run --wait`, `poll-and-advance --wait`:
`engine.loop` pauses until the window opens) or a later one, sends only what has no answer. So
the records are the ones an uninterrupted run makes, each request answered once.

The window is read on this machine's clock (`util.clock.now`); what each answer costs is read on
the provider's (`engine.answers.answered_at`). Models priced as batches and models whose provider
has no schedule are never held. `status` says what waits and until when (`waiting`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import RUN_HERE
from lexpilot_batch.providers.schedules import Schedule, is_peak, next_off_peak, schedule_for
from lexpilot_batch.state.states import RequestState
from lexpilot_batch.state.waves import SUBMITTED
from lexpilot_batch.util import clock

OFF_PEAK = "off_peak"  # its key in the workspace's remembered tail choices (`session._tail_choices`)


def schedule_of(choices: Mapping[str, Any], row: Mapping[str, Any]) -> Schedule | None:
    """The schedule `--off-peak` holds a file to (`choices`: the session's `tail`), or None."""
    if not choices.get(OFF_PEAK) or row["backend"] not in RUN_HERE:
        return None
    return schedule_for(choices.get("prices"), row["model"])


def held_until(schedule: Schedule | None, now: float) -> float | None:
    """When a file held at `now` may begin (its provider's next off-peak window); None: now."""
    if schedule is None or not is_peak(schedule, now):
        return None
    opens = next_off_peak(schedule, now)
    if opens is None:
        raise ConfigError(
            f"--off-peak: the schedule of {schedule.provider} ({schedule.describe()}) has no off-peak hour, so its "
            "requests would wait for ever; correct its $schedules in your --prices FILE, or run with --any-hour"
        )
    return opens


def may_start(schedule: Schedule | None) -> Callable[[], bool] | None:
    """The sync runner's hook: whether a call may start now (off-peak on this machine's clock)."""
    if schedule is None:
        return None
    return lambda: not is_peak(schedule, clock.now())


def waiting(db: sqlite3.Connection, choices_json: str | None) -> list[dict[str, Any]]:
    """For `status`: per model, the requests `--off-peak` holds in files in flight and when their
    window opens (epoch seconds, None when it is open now: the next poll sends them)."""
    choices = json.loads(choices_json or "{}")
    if not choices.get(OFF_PEAK):
        return []
    out: dict[str, dict[str, Any]] = {}
    now = clock.now()
    for row in db.execute(
        "SELECT f.model, f.backend, COUNT(q.pk) FROM files f JOIN requests q ON q.file_pk = f.pk"
        f" WHERE f.status = '{SUBMITTED}' AND f.backend IN ({', '.join(repr(b) for b in sorted(RUN_HERE))})"
        f" AND q.status = '{RequestState.PENDING}' GROUP BY f.model, f.backend"
    ):
        model, backend, n = row[0], row[1], row[2]
        schedule = schedule_of(choices, {"backend": backend, "model": model})
        if schedule is None:
            continue
        entry = out.setdefault(model, {"model": model, "requests": 0, "until": held_until(schedule, now)})
        entry["requests"] += n
    return list(out.values())
