"""`status` on one screen: per model, threads done / active / failed, tokens and cost so far
against the projection; the wave and the batches in flight with their age; what blocks, if
anything (failed threads, files left to the user, batches held for damaged results), and what is
only worth knowing (ingest anomalies, batches the provider lost), said as "Finished: ... with N
anomalies" once every thread is finished; and the one command to run next. `status --verbose`
shows the full detail (`detail`).

Read from the database only (and, for the projection, the estimate, which sends nothing).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.engine import off_peak
from lexpilot_batch.engine.downloads import held_advice
from lexpilot_batch.engine.tail import flex_refused
from lexpilot_batch.providers.charges import backend_cost
from lexpilot_batch.providers.prices import DEFAULT_BATCH_DISCOUNT, Prices, price_for
from lexpilot_batch.providers.prices import total as total_cost
from lexpilot_batch.providers.schedules import schedule_for, when
from lexpilot_batch.state import writer
from lexpilot_batch.state.queries import check_run_filters, measured_batch_seconds
from lexpilot_batch.state.states import FileState, ThreadState
from lexpilot_batch.state.usage import usage_by_run
from lexpilot_batch.state.waves import OPEN, files_in, work_left
from lexpilot_batch.state.workspace import LOCK_NAME, Workspace, command_hint
from lexpilot_batch.study.price_memory import TAIL_CHOICES_KEY
from lexpilot_batch.util import clock
from lexpilot_batch.util.columns import aligned
from lexpilot_batch.util.redaction import redact_cut
from lexpilot_batch.util.text import terminal_safe


@dataclass(frozen=True)
class Filters:
    run_ids: tuple[str, ...] = ()
    models: tuple[str, ...] = ()

    def keeps(self, run_id: str, model: str) -> bool:
        return (not self.run_ids or run_id in self.run_ids) and (not self.models or model in self.models)


def summarize(
    ws: Workspace,
    filters: Filters = Filters(),
    prices: Prices | None = None,
    projected: dict[str, float | None] | None = None,
    discount: float = DEFAULT_BATCH_DISCOUNT,
    waves_left: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The summary's data (`status --format json` has it as `summary`); `projected` is each
    model's projected cost of what is left (`Estimate.projection_cost_by_model`, expected)."""
    db = ws.store.conn
    check_run_filters(db, filters.run_ids, filters.models)
    runs = [
        (pk, run_id, model, json.loads(manifest))
        for pk, run_id, model, manifest in db.execute("SELECT pk, run_id, model, manifest FROM runs ORDER BY pk")
        if filters.keeps(run_id, model)
    ]
    kept = {pk for pk, *_ in runs}
    models: dict[str, dict[str, Any]] = {}
    for pk, run_id, model, _ in runs:
        entry = models.setdefault(model, _model_entry())
        entry["runs"].append(run_id)
        for status, n in db.execute("SELECT status, COUNT(*) FROM threads WHERE run_pk = ? GROUP BY status", (pk,)):
            entry["threads"][
                {ThreadState.DONE: "done", ThreadState.ACTIVE: "active", ThreadState.CANCELLED: "cancelled"}.get(
                    status, "failed"
                )
            ] += n
    # Tokens and cost so far, each model over every role it serves in the kept runs.
    role_model = {pk: {"eval": model, "user": m["user_model"], "judge": m["judge_model"]} for pk, _, model, m in runs}
    for of_run in role_model.values():  # every model the kept runs use, in each role it serves
        for role, model in of_run.items():
            roles = models.setdefault(model, _model_entry())["roles"]
            if role not in roles:
                roles.append(role)
    # Priced as the report prices them (`providers.charges`): the provider's own cost where it
    # reported all of it, and a provider pricing by the hour at the minute each answer came.
    for run_pk, by_role in usage_by_run(db).items():
        if run_pk not in kept:
            continue
        for role, by_backend in by_role.items():
            model = role_model[run_pk][role]
            entry = models.setdefault(model, _model_entry())
            price, schedule = price_for(prices, role, model), schedule_for(prices, model)
            for backend, counts in by_backend.items():
                entry["prompt_tokens"] += counts["prompt_tokens"]
                entry["completion_tokens"] += counts["completion_tokens"]
                entry["costs"].append(backend_cost(counts, price, backend, discount, schedule))
    for model, entry in models.items():
        costs = entry.pop("costs")
        entry["cost_usd"] = total_cost(costs) if costs else (0.0 if price_for(prices, "eval", model) else None)
        left = None if projected is None else projected.get(model, 0.0)  # absent: nothing left for it
        entry["projected_cost_usd"] = None if left is None or entry["cost_usd"] is None else entry["cost_usd"] + left
    left_work = work_left(ws)
    now = clock.now()
    in_flight = [
        {
            "wave": f["wave"],
            "path": f["path"],
            "backend": f["backend"],
            "batch_status": f["batch_status"],
            "age_s": round(now - f["submitted_at"]) if f["submitted_at"] else None,
            "requests": f["n_requests"],
            "request_counts": json.loads(f["request_counts"]) if f["request_counts"] else None,
        }
        for f in files_in(db, OPEN)
        if f["status"] == FileState.SUBMITTED
    ]
    waves = db.execute("SELECT COUNT(*), MIN(CASE WHEN closed_at IS NULL THEN n END) FROM waves").fetchone()
    failed = sum(e["threads"]["failed"] for e in models.values())
    blockers = _blockers(ws, left_work, failed)
    finished = bool(runs) and _finished(left_work, failed)
    anomalies = db.execute("SELECT COUNT(*) FROM anomalies").fetchone()[0]
    command, why = next_command(ws, left_work, failed, bool(runs))
    if finished and anomalies:
        why = f"every thread is finished, with {anomalies} ingest anomalies"
    return {
        "models": models,
        "waves": waves[0],
        "open_wave": waves[1],
        "in_flight": in_flight,
        "work_left": left_work,
        "blockers": blockers,
        "finished": finished,
        "anomalies": anomalies,
        "notes": _notes(ws, anomalies, finished),
        "next": command,
        "next_why": why,
        "flex_refused": flex_refused(db),
        "off_peak": off_peak.waiting(db, ws.store.meta(TAIL_CHOICES_KEY)),
        "time_left_s": time_left(db, waves_left, in_flight),
    }


def _model_entry() -> dict[str, Any]:
    return {
        "runs": [],
        "roles": [],
        "threads": {"done": 0, "active": 0, "failed": 0, "cancelled": 0},
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "costs": [],
    }


def time_left(
    db: sqlite3.Connection, waves_left: tuple[int, int] | None, in_flight: list[dict[str, Any]]
) -> list[float] | None:
    """The study's time left, `[shortest, longest]` seconds: the waves the projection leaves (its
    fewest and most, `Estimate.waves_remaining`) at the workspace's median batch duration, plus
    what the oldest batch in flight has left of it; None before a batch was measured, or without a
    projection."""
    measured = measured_batch_seconds(db)
    if measured is None or waves_left is None:
        return None
    oldest = max((f["age_s"] or 0 for f in in_flight), default=None)
    now = 0.0 if oldest is None else max(0.0, measured - oldest)
    return [now + waves_left[0] * measured, now + waves_left[1] * measured]


def _blockers(ws: Workspace, left: dict[str, int], failed: int) -> list[str]:
    db = ws.store.conn
    out = []
    if failed:
        top = db.execute(
            f"SELECT reason, COUNT(*) AS n FROM threads WHERE status = '{ThreadState.FAILED}'"
            " GROUP BY reason ORDER BY n DESC LIMIT 1"
        ).fetchone()
        # A reason quotes the provider: one line of it, escaped, whatever it holds.
        why = f"; most often: {redact_cut(terminal_safe(str(top['reason'] or '')), 160)}" if top is not None else ""
        out.append(
            f"{failed} failed thread(s), out of attempts: the run is incomplete until "
            f"`{ws.command('retry')}` makes them due again (`{ws.command('status --verbose')}` names them){why}"
        )
    if left["waiting_manual"]:
        out.append(f"{left['waiting_manual']} file(s) wait for you to run them and `{ws.command('ingest FILE')}`")
    if left["held"]:
        out.append(held_advice(ws, left["held"]))
    return out


def _notes(ws: Workspace, anomalies: int, finished: bool) -> list[str]:
    """What is worth knowing but blocks nothing: lines never applied, batches lost and sent again."""
    out = []
    if anomalies:
        out.append(
            f"{anomalies} ingest anomalies (result lines never applied, so nothing wrong was scored): "
            f"`{ws.command('doctor')}` lists them"
        )
    lost = ws.store.conn.execute(f"SELECT COUNT(*) FROM files WHERE status = '{FileState.LOST}'").fetchone()[0]
    if lost:
        out.append(f"{lost} batch(es) lost by the provider; their requests {'were' if finished else 'are'} sent again")
    return out


def _finished(left: dict[str, int], failed: int) -> bool:
    """Every thread finished: nothing in flight, waiting, due or failed."""
    return not (left["waiting_manual"] or left["unsubmitted"] or left["in_flight"] or left["active_threads"] or failed)


def next_command(ws: Workspace, left: dict[str, int], failed: int, has_runs: bool) -> tuple[str, str]:
    """The one command that moves the workspace on from here, and why."""
    wait = ws.command("poll-and-advance --submit --wait")
    if not has_runs:
        return command_hint("prepare --stage all --run-id run1 --model M --dataset FILE", ws.given_root), "no runs yet"
    holder = writer.busy(ws.state_dir, LOCK_NAME)
    if holder is not None:  # any command that writes would be refused: none is advised
        return ws.command("status"), (
            f"{holder} is writing to this workspace; a command that writes is refused until it ends, so check "
            "again then"
        )
    if left["waiting_manual"] and left["waiting_manual"] == left["in_flight"]:
        return ws.command("ingest FILE"), "for each output of the files left to you (manual backend)"
    if left["held"] and left["held"] + left["waiting_manual"] == left["in_flight"]:
        return ws.command("doctor"), "batches are held, their results damaged: it names them and says what to do"
    if left["unsubmitted"] and not left["in_flight"]:
        return wait, f"{left['unsubmitted']} compiled file(s) wait to be submitted (or `{ws.command('submit')}` alone)"
    if left["in_flight"]:
        return wait, "batches are in flight: it polls until they finish and sends the next waves"
    if left["active_threads"]:
        return wait, "threads have requests due"
    if failed:
        return ws.command("retry"), f"failed threads are out of attempts; then `{wait}`"
    cancelled = ws.store.conn.execute(
        f"SELECT COUNT(*) FROM threads WHERE status = '{ThreadState.CANCELLED}'"
    ).fetchone()[0]
    if cancelled:
        return (
            ws.command("report --partial --format html --out report.html"),
            f"every thread is finished or cancelled ({cancelled:,} cancelled: `{ws.command('retry --cancelled')}` "
            "brings them back)",
        )
    return ws.command("report --format html --out report.html"), "every thread is finished"


def _tokens(n: int) -> str:
    for size, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _partial(values: list[float | None]) -> str:
    """A total over what is priced, marked `+` when some of it is not (named below the table);
    n/a only when nothing is."""
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    return _usd(sum(known)) + ("+" if len(known) < len(values) else "")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    return f"{s}s" if s < 60 else f"{s // 60}m{s % 60:02d}s" if s < 3600 else f"{s // 3600}h{s % 3600 // 60:02d}m"


def render_summary(summary: dict[str, Any], root_text: str) -> str:
    wave = summary["open_wave"]
    lines = [
        f"Workspace {root_text}: {summary['waves']} wave(s) compiled"
        + (f", wave {wave} open" if wave else ", none open")
    ]
    if summary["models"]:
        rows = [["model", "runs", "done", "active", "failed", "tokens in/out", "cost so far", "projected"]]
        totals = {"done": 0, "active": 0, "failed": 0, "p": 0, "c": 0}
        costs, projected = [], []
        for model, e in summary["models"].items():
            t = e["threads"]
            rows.append(
                [
                    terminal_safe(model),
                    ",".join(e["runs"]) or "as " + "/".join(e["roles"]),
                    *((f"{t['done']:,}", f"{t['active']:,}", f"{t['failed']:,}") if e["runs"] else ("-", "-", "-")),
                    f"{_tokens(e['prompt_tokens'])} / {_tokens(e['completion_tokens'])}",
                    _usd(e["cost_usd"]),
                    _usd(e["projected_cost_usd"]),
                ]
            )
            for k in ("done", "active", "failed"):
                totals[k] += t[k]
            totals["p"] += e["prompt_tokens"]
            totals["c"] += e["completion_tokens"]
            costs.append(e["cost_usd"])
            projected.append(e["projected_cost_usd"])
        rows.append(
            [
                "total",
                "",
                f"{totals['done']:,}",
                f"{totals['active']:,}",
                f"{totals['failed']:,}",
                f"{_tokens(totals['p'])} / {_tokens(totals['c'])}",
                _partial(costs),
                _partial(projected),
            ]
        )
        lines.append("")
        lines += aligned(rows, "llrrrrrr")
        lines.append("  (threads per model over its runs; tokens and cost over every role the model serves)")
        unpriced = [terminal_safe(m) for m, e in summary["models"].items() if e["cost_usd"] is None]
        if unpriced and len(unpriced) < len(summary["models"]):
            lines.append(
                f"  (+: the total leaves out {', '.join(unpriced)}, which no price covers; --prices FILE prices them)"
            )
        cancelled = sum(e["threads"]["cancelled"] for e in summary["models"].values())
        if cancelled:
            lines.append(f"  {cancelled:,} thread(s) cancelled by `cancel`: `retry --cancelled` brings them back")
    flying = summary["in_flight"]
    if flying:
        oldest = max((f["age_s"] or 0 for f in flying), default=0)
        lines.append(
            f"\nIn flight: {len(flying)} batch file(s) of wave {flying[0]['wave']}, the oldest {_age(oldest)}:"
        )
        for f in flying[:6]:
            counts = f["request_counts"] or {}
            done = counts.get("completed", 0) + counts.get("failed", 0)
            status = terminal_safe(f["batch_status"] or f["backend"])  # the provider's word: one line
            lines.append(f"  {f['path']}  {status}  {done}/{counts.get('total') or f['requests']}  {_age(f['age_s'])}")
        if len(flying) > 6:
            lines.append(f"  ... and {len(flying) - 6} more")
    for held in summary.get("off_peak") or []:  # `--off-peak` (`engine.off_peak`)
        until = (
            "its off-peak window is open: the next poll sends them"
            if held["until"] is None
            else (f"they wait for its off-peak window, from {when(held['until'])}")
        )
        lines.append(f"\nOff-peak: {held['requests']:,} request(s) of {terminal_safe(held['model'])}: {until}")
    refused = summary.get("flex_refused") or []
    if refused:
        names = ", ".join(terminal_safe(m) for m in refused)
        lines.append(
            f"\nFlex: {names} kept refusing flex calls and travel by batch from now on "
            f"(--flex {terminal_safe(refused[0])}=on on a later command tries flex again)"
        )
    for blocker in summary["blockers"]:
        lines.append(f"\nBlocked: {blocker}")
    notes = summary.get("notes") or []
    if summary.get("finished") and notes:
        lines.append(f"\nFinished: every thread is finished, with {'; '.join(notes)}")
    else:
        lines += [f"\nNote: {note}" for note in notes]
    left = summary.get("time_left_s")
    if left is not None and (left[1] > 0 or flying):
        span = _age(left[0]) if round(left[0]) == round(left[1]) else f"{_age(left[0])} to {_age(left[1])}"
        lines.append(f"\nTime left: about {span} (the waves projected, at this workspace's median batch time)")
    lines.append(f"\nNext: {summary['next']}   ({summary['next_why']})")
    return "\n".join(lines)
