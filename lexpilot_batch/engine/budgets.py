"""Enqueued-token budgets: how many input tokens of one model may wait at a provider at once.

OpenAI and Azure limit the tokens queued in batches per model (per usage tier, per deployment: from
about 100,000 to billions). A batch that would go over is refused as a whole
(`token_limit_exceeded`). So each model has a budget, and a file is created as a batch only while
the tokens of that model's batches still running, plus its own, fit (`submit.submit_files`); the
rest of a wave waits and goes as earlier batches finish. Files are cut by tokens as well
(`file_cap`: half the budget, so that two can be in flight), so that every file fits alone.

**The estimate** of a request's input tokens is one token per character of its prompt plus
`FRAMING` for the chat framing: about right for Chinese text on the cl100k tokenizers, and above
the count of o200k ones (about 0.7 per character) and of any tokenizer for English (about 0.25).
Once the workspace has answers that report `prompt_tokens`, the ratio of reported to estimated
tokens over the model's last ingested files, plus a `MARGIN`, scales every estimate of that model
(`factor`): close enough to stay under a limit, and the refusal below corrects the rest.

**The budget** of a model is, first to last: `--max-enqueued-tokens MODEL=N` (remembered by the
workspace, and replaced by a later value: quotas change with usage tiers), the learned budget
(after a refusal), the provider profile's documented default (`providers.spec.Limits.enqueued_tokens`;
none documents one value today), else no budget. After a `token_limit_exceeded` refusal the
budget is lowered (`lower_after_refusal`): to 90% of the quota the message names when it names
one, else to 90% of what was enqueued plus the refused file; the refused file goes back to wait
and is created again, using up no `--retries`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping
from typing import Any

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import BATCH_LIKE
from lexpilot_batch.providers.batch import TERMINAL, quota_in_message
from lexpilot_batch.state import waves
from lexpilot_batch.state.states import FileState, RequestState
from lexpilot_batch.state.store import read_meta, write_meta
from lexpilot_batch.state.workspace import Workspace

FRAMING = 10  # tokens of chat framing per request (role markers, message boundaries)
MARGIN = 1.1  # over the measured ratio of reported to estimated tokens
MIN_MEASURED = 50  # answered requests of a model before their ratio replaces 1.0
SAFETY = 0.9  # a lowered budget keeps this share of what the provider allows
BATCH_BACKENDS = tuple(sorted(BATCH_LIKE))  # backends whose files wait at the provider as batches
_META = "token_budgets"


def request_tokens(prompt_chars: int) -> int:
    """The estimated input tokens of one request, before `factor`."""
    return prompt_chars + FRAMING


def parse_flags(values: Iterable[str]) -> dict[str, int]:
    """`--max-enqueued-tokens MODEL=N` values by model."""
    out: dict[str, int] = {}
    for item in values:
        model, sep, raw = item.rpartition("=")
        try:
            tokens = int(raw.replace(",", "").replace("_", ""))
        except ValueError:
            tokens = 0
        if not sep or not model or tokens < 1:
            raise ConfigError(
                f"--max-enqueued-tokens {item!r}: write MODEL=N, the model as given to --model (or --user-model, "
                "--judge-model) and N its enqueued-token quota, e.g. openai/gpt-4o-mini=2000000"
            )
        out[model] = tokens
    return out


def stored(db: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    raw = read_meta(db, _META)
    return json.loads(raw) if raw is not None else {}


def _store(db: sqlite3.Connection, budgets: Mapping[str, Any]) -> None:
    write_meta(db, _META, json.dumps(dict(sorted(budgets.items())), sort_keys=True))


def remember_flags(ws: Workspace, flags: Mapping[str, int]) -> list[str]:
    """Keep budgets given on the command line for every later command; returns what changed."""
    if not flags:
        return []
    changed = []
    with ws.store.transaction() as db:
        budgets = stored(db)
        for model, tokens in flags.items():
            old = budgets.get(model)
            if old is not None and old.get("flag") == tokens:
                continue
            budgets[model] = {"flag": tokens, "learned": None, "at": time.time()}
            changed.append(model)
        _store(db, budgets)
    return changed


def budget(db: sqlite3.Connection, model: str, default: int | None = None) -> int | None:
    """The budget of `model` (as registered), in provider tokens; None: none."""
    entry = stored(db).get(model) or {}
    values = [v for v in (entry.get("flag"), entry.get("learned")) if v]
    if values:
        return min(values)
    return default


def factor(db: sqlite3.Connection, model: str) -> float:
    """Reported over estimated input tokens of the model's answered requests in its last ingested
    files, times `MARGIN`; 1.0 until `MIN_MEASURED` of them have reported."""
    row = db.execute(
        f"SELECT SUM(q.prompt_tokens), SUM(q.prompt_chars), COUNT(*) FROM requests q WHERE q.status = '{RequestState.ANSWERED}'"
        f" AND q.prompt_tokens > 0 AND q.file_pk IN (SELECT pk FROM files WHERE model = ? AND status = '{FileState.INGESTED}'"
        " ORDER BY pk DESC LIMIT 8)",
        (model,),
    ).fetchone()
    reported, chars, n = row
    if not n or n < MIN_MEASURED:
        return 1.0
    return max(0.1, min(3.0, reported / (chars + FRAMING * n) * MARGIN))


def file_cap(budget_tokens: int | None, scale: float) -> int | None:
    """Estimated tokens (before `factor`) one file of a model with this budget may hold."""
    if not budget_tokens:
        return None
    return max(1, int(budget_tokens / 2 / scale))


def enqueued(db: sqlite3.Connection, model: str, but: int | None = None) -> int:
    """Estimated tokens (before `factor`) of the model's batches the provider may still hold,
    leaving out file `but`."""
    marks = ", ".join("?" * len(TERMINAL))
    backends = ", ".join("?" * len(BATCH_BACKENDS))
    return db.execute(
        f"SELECT COALESCE(SUM(tokens), 0) FROM files WHERE model = ? AND backend IN ({backends})"
        f" AND status IN ('{FileState.CREATING}', '{FileState.SUBMITTED}') AND COALESCE(batch_status, '') NOT IN ({marks}) AND pk != ?",
        (model, *BATCH_BACKENDS, *TERMINAL, -1 if but is None else but),
    ).fetchone()[0]


def lower_after_refusal(
    db: sqlite3.Connection, model: str, message: str, enqueued_tokens: int, refused_tokens: int, scale: float
) -> int:
    """Lower the model's budget after the provider refused a batch for its quota; returns it."""
    quota = quota_in_message(message)
    if quota is not None:
        new = int(quota * SAFETY)  # the provider said it: trust it
    else:
        new = int((enqueued_tokens + refused_tokens) * scale * SAFETY)
        current = budget(db, model)
        if current:
            new = min(new, current)
    new = max(1, new)
    budgets = stored(db)
    entry = dict(budgets.get(model) or {"flag": None})
    entry.update(learned=new, at=time.time(), why=message[:300])
    budgets[model] = entry
    _store(db, budgets)
    return new


def usage_by_model(db: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """For `status`: per model of batch files, estimated tokens queued (compiled, not yet created)
    and submitted (at the provider), and the budget."""
    out: dict[str, dict[str, Any]] = {}
    backends = ", ".join("?" * len(BATCH_BACKENDS))
    for r in db.execute(
        f"SELECT model, status, COALESCE(batch_status, '') AS batch_status, SUM(tokens) AS tokens FROM files"
        f" WHERE backend IN ({backends}) AND status NOT IN (?, ?) GROUP BY model, status, batch_status",
        (*BATCH_BACKENDS, *waves.DONE),
    ):
        entry = out.setdefault(r["model"], {"queued_tokens": 0, "submitted_tokens": 0})
        scale = factor(db, r["model"])
        tokens = int((r["tokens"] or 0) * scale)
        if r["status"] in (waves.COMPILED, waves.UPLOADED):
            entry["queued_tokens"] += tokens
        elif r["batch_status"] not in TERMINAL:
            entry["submitted_tokens"] += tokens
    budgets = stored(db)
    for model in budgets:
        out.setdefault(model, {"queued_tokens": 0, "submitted_tokens": 0})
    for model, entry in out.items():
        b = budgets.get(model) or {}
        entry["budget"] = budget(db, model)
        entry["budget_source"] = (
            "learned" if b.get("learned") and b.get("learned") == entry["budget"] else "flag" if b.get("flag") else None
        )
    return out
