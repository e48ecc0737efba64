"""The `preflight` command: the providers of a study asked, before its first wave, whether they
serve its models and answer its requests (`engine.preflight`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lexpilot_batch.cli.options import PROVIDER_OPTIONS, Target, provider_options, with_options
from lexpilot_batch.cli.output import say
from lexpilot_batch.cli.run_options import RUN_OPTIONS, run_spec

if TYPE_CHECKING:
    from lexpilot_batch.study.runs import RunSpec


@with_options(PROVIDER_OPTIONS, "target", provider_options)
@with_options(RUN_OPTIONS, "spec", run_spec)
def preflight(
    spec: RunSpec,
    target: Target,
    batch: Annotated[
        bool,
        typer.Option("--batch", help="Also send one single-request batch per endpoint and walk its lifecycle."),
    ] = False,
    batch_wait: Annotated[
        float,
        typer.Option(
            "--batch-wait",
            help="Seconds to wait for that batch to end before cancelling it (a real batch may take hours).",
            min=0,
        ),
    ] = 600.0,
) -> None:
    """Ask each provider of a study, before anything costly, whether it serves the study's models and
    takes its requests: its live model listing, one short request per role and model with the exact
    body the study sends, and with --batch one single-request batch per endpoint. Takes the options
    of prepare, keeps nothing, costs cents at list price (said before it sends), and exits 1 when a
    request is refused.

    Example: lexpilot-batch preflight --model openai/gpt-4o-mini --user-model openai/gpt-4o-mini --judge-model openai/o4-mini
    """
    from lexpilot_batch.engine import preflight as checks
    from lexpilot_batch.engine.session import Session

    session = Session(None, target.options)
    try:
        targets = checks.plan(session, spec)
        endpoints = {(t.route.api, session.endpoint(t.route).base_url) for t in targets}
        batches = f", and {len(endpoints)} one-request batch(es)" if batch else ""
        say(
            f"Preflight: {len(targets)} request(s), one short question per role and model{batches}, sent now at "
            "list price (cents at most); nothing is kept."
        )
        found = checks.run(
            targets,
            session.endpoint,
            prices=target.options.prices,
            timeout=target.options.timeout,
            batch=batch,
            batch_wait=batch_wait,
            say=say,
        )
    finally:
        session.close()
    for line in checks.table(found):
        say(line)
    unlisted = [c.model for c in found.checks if c.catalogue == checks.NOT_LISTED]
    if unlisted:
        say(
            f"Not in their endpoint's listing: {', '.join(dict.fromkeys(unlisted))} (answered all the same where the "
            "call says ok: an alias the provider serves but does not list; check the name if the call failed)."
        )
    unpriced = f"; {found.unpriced} unpriced (no price for its model: --prices FILE)" if found.unpriced else ""
    say(f"{found.requests} request(s) sent; spent ${found.cost_usd:.4f} at list price{unpriced}.")
    if not found.ok:
        say("A request was refused or failed: fix it before the study's first wave.", err=True)
        raise typer.Exit(1)
