"""`lexpilot-batch cancel`: stop a submitted study, or part of it, at its providers
(`engine.cancel`), and say what it kept, what it had spent and what it saved."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lexpilot_batch.cli.options import (
    PROVIDER_OPTIONS,
    ModelFilterOpt,
    RunIdFilterOpt,
    Target,
    TaskFilterOpt,
    provider_options,
    with_options,
)
from lexpilot_batch.cli.output import say
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.state.workspace import command_hint

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session
    from lexpilot_batch.estimate import Estimate
    from lexpilot_batch.state.workspace import Workspace


@with_options(PROVIDER_OPTIONS, "target", provider_options)
def cancel(
    target: Target,
    run_id: RunIdFilterOpt = [],  # noqa: B006
    model: ModelFilterOpt = [],  # noqa: B006
    task: TaskFilterOpt = [],  # noqa: B006
    all_: Annotated[bool, typer.Option("--all", help="Cancel every active thread of the workspace.")] = False,
) -> None:
    """Cancel in-flight batches at their providers and stop the selected threads.

    Every answer already returned is kept (a cancelled batch's finished requests too, saved by the
    next poll); the threads become `cancelled`, not failed, and are not retried unless you run
    `retry --cancelled`. Interrupt it and run it again: it ends the same.

    Example: lexpilot-batch cancel --run-id run1
    """
    from lexpilot_batch.cli.running import _session
    from lexpilot_batch.engine.cancel import CancelSelection, cancel_study
    from lexpilot_batch.status.summary import Filters, summarize
    from lexpilot_batch.study.price_memory import prices_for

    if not (run_id or model or task or all_):
        raise ConfigError(
            "cancel needs a selection: --run-id, --model or --task (each repeatable), or --all for every active thread"
        )
    if all_ and (run_id or model or task):
        raise ConfigError("--all cancels every active thread: give it alone, or only --run-id/--model/--task")
    selection = CancelSelection(tuple(run_id), tuple(model), tuple(task))
    with _session(target) as (ws, session):
        prices = prices_for(ws, target.options.prices)
        before = _projection(ws, session, prices)
        result = cancel_study(ws, session, selection)
        after = _projection(ws, session, prices)
        models = summarize(ws, Filters(tuple(run_id), tuple(model)), prices)["models"]
    if not result.threads and not result.already:
        say("No active thread matches: nothing to cancel.")
        return
    if result.threads:
        tasks = ", ".join(f"{t} {n}" for t, n in result.by_task.items())
        say(f"Cancelled {_n(result.threads, 'thread')} ({tasks}); they are not retried.")
    if result.already:
        say(f"{_n(result.already, 'thread')} of the selection had been cancelled before.")
    for path in result.cancelled:
        say(f"  cancelled at its provider: {path}")
    for path in result.ended:
        say(f"  already ended at its provider (its answers are kept): {path}")
    for path in result.discarded:
        say(f"  never sent, set aside: {path}")
    if result.recompiled:
        say(f"  the unsent wave was compiled again for the threads still active: {result.recompiled} requests")
    for path in result.shared:
        say(f"  left running (it also carries requests of threads still active; its answers are kept): {path}")
    for path in result.manual:
        say(f"  yours to stop (manual backend): {path}")
    for path in result.creating:
        say(f"  being created: run `{command_hint('poll-and-advance', target.root)}`, then this cancel again: {path}")
    say(f"Kept: {_n(result.kept, 'answer')} of the cancelled cases; `report --partial` shows what finished.")
    if result.threads:
        say(_money(models, before, after, result.unsent_requests))
    if result.cancelled:
        say(
            "Next: "
            + command_hint("poll-and-advance --wait", target.root)
            + " (saves the answers the cancelled batches finished); `retry --cancelled` brings the threads back."
        )


def _projection(ws: Workspace, session: Session, prices: dict | None) -> Estimate | None:
    from lexpilot_batch.estimate import estimate_workspace

    try:
        return estimate_workspace(ws, session, prices)
    except LexpilotError:
        return None  # (the cancel goes on without its saving)


def _money(models: dict, before: Estimate | None, after: Estimate | None, unsent: int) -> str:
    costs = [entry["cost_usd"] for entry in models.values()]
    priced = [c for c in costs if c is not None]
    unpriced = sorted(m for m, e in models.items() if e["cost_usd"] is None)
    spent = f"${sum(priced):.2f}" if priced else "n/a"
    if unpriced:
        spent += f" (without {', '.join(unpriced)}: no price; --prices FILE prices them)"
    saved_requests = 0.0
    saved_usd: float | None = None
    if before is not None and after is not None:
        saved_requests = before.projection_requests.expected - after.projection_requests.expected
        if before.projection_cost_usd is not None and after.projection_cost_usd is not None:
            saved_usd = before.projection_cost_usd.expected - after.projection_cost_usd.expected
    saved = f"about {saved_requests:,.0f} projected requests not sent"
    if saved_usd is not None:
        saved += f", about ${saved_usd:.2f}"
    if unsent:
        saved += f" (of them {unsent} compiled but never sent)"
    return f"Spent so far on the selection: {spent}. Saved: {saved}."


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
