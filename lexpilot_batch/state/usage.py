"""What the workspace's answered requests used, by run, role and backend: requests and tokens (what
their cost depends on), what the provider reported it cost, and the sync work by the minute it was
answered. The report's cost (`report.build`) and `status`'s cost so far both price these counts
with `providers.charges.backend_cost`, so the two never disagree."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from typing import Any

from lexpilot_batch.providers.backends import SYNC
from lexpilot_batch.state.states import RequestState


def usage_by_run(db: sqlite3.Connection) -> dict[int, dict[str, dict[str, dict[str, Any]]]]:
    """Requests and tokens by run, role and backend (what their cost depends on), and, where the
    provider reported the cost of some of them, how many and its sum; from the `requests_usage`
    index and the small files table."""
    out: dict[int, dict[str, dict[str, dict[str, Any]]]] = defaultdict(dict)
    for run_pk, role, backend, n, p, c, k, w, reported, cost, unreported in db.execute(
        "SELECT q.run_pk, q.role, f.backend, COUNT(*), SUM(q.prompt_tokens), SUM(q.completion_tokens),"
        " SUM(q.cached_tokens), SUM(q.cache_write_tokens), COUNT(q.cost_usd), SUM(q.cost_usd),"
        " SUM(q.cost_usd IS NULL AND (q.prompt_tokens > 0 OR q.completion_tokens > 0))"
        f" FROM requests q JOIN files f ON f.pk = q.file_pk WHERE q.status != '{RequestState.PENDING}'"
        " GROUP BY q.run_pk, q.role, f.backend"
    ):
        counts = {
            "requests": n,
            "prompt_tokens": p or 0,
            "completion_tokens": c or 0,
            "cached_tokens": k or 0,
            "cache_write_tokens": w or 0,
        }
        if reported:  # the provider's own cost of some (`engine.answers._usage`), and the work it did not price
            counts.update(reported=reported, reported_cost_usd=cost or 0.0, unreported=unreported or 0)
        out[run_pk].setdefault(role, {})[backend] = counts
    # Sync work by the minute it was answered (`requests.answered_at`, null before it was kept): what
    # a provider pricing by the hour bills it at (`providers.charges.backend_cost`).
    for run_pk, role, minute, n, p, c, k, w in db.execute(
        "SELECT q.run_pk, q.role, CAST(q.answered_at / 60 AS INTEGER), COUNT(*), SUM(q.prompt_tokens),"
        " SUM(q.completion_tokens), SUM(q.cached_tokens), SUM(q.cache_write_tokens)"
        f" FROM requests q JOIN files f ON f.pk = q.file_pk WHERE q.status != '{RequestState.PENDING}'"
        f" AND f.backend = '{SYNC}' GROUP BY q.run_pk, q.role, 3"
    ):
        timed = out[run_pk].get(role, {}).get(SYNC)
        if timed is not None:
            timed.setdefault("timed", []).append((minute, n, p or 0, c or 0, k or 0, w or 0))
    return out
