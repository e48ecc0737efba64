"""The commands that run a study: prepare, submit, poll-and-advance, run and ingest."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lexpilot_batch.cli.options import (
    PROVIDER_OPTIONS,
    CompactOpt,
    ModelFilterOpt,
    PollIntervalOpt,
    RootOpt,
    RunIdFilterOpt,
    Target,
    TaskFilterOpt,
    VerboseOpt,
    provider_options,
    with_options,
)
from lexpilot_batch.cli.output import (
    ProviderWaitPrinter,
    progress_printer,
    say,
    say_manual,
    say_outage,
    say_prepared,
    say_rebuilt,
    say_results_kept,
)
from lexpilot_batch.cli.reading import print_report
from lexpilot_batch.cli.run_options import RUN_OPTIONS, run_spec
from lexpilot_batch.state.queries import failed_threads
from lexpilot_batch.state.store import DB_NAME
from lexpilot_batch.state.workspace import command_hint

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session
    from lexpilot_batch.state.workspace import Workspace
    from lexpilot_batch.study.runs import RunSpec


@contextlib.contextmanager
def _session(target: Target, create: bool = False) -> Iterator[tuple[Workspace, Session]]:
    """The writable workspace and a provider session for it, both closed on the way out.

    Only `create` (prepare, run) makes a workspace of a folder that holds none. When the command
    fails or is interrupted, one it made is taken away again only if it records nothing yet (a
    dataset refused before any run was registered): once anything is recorded it stays, and the
    same command resumes it (`Workspace.abandon`).
    """
    from lexpilot_batch.engine.session import Session
    from lexpilot_batch.state.workspace import Workspace

    root, options = target
    ws = Workspace(root, create=create)
    with ws:
        try:
            session = Session(ws, options)
            try:
                yield ws, session
            finally:
                session.close()
        except BaseException:
            ws.abandon()
            raise


@with_options(PROVIDER_OPTIONS, "target", provider_options)
@with_options(RUN_OPTIONS, "spec", run_spec)
def prepare(
    spec: RunSpec,
    target: Target,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Show what would be compiled and a projection for the whole run; write nothing."
        ),
    ] = False,
    format_: Annotated[str, typer.Option("--format", help="Dry-run output: table or json.")] = "table",
) -> None:
    """Register runs and compile the requests now due into the open wave's batch files.

    Running it again with the same settings compiles nothing new; different settings for the same
    run id are refused, naming every difference.

    Example: lexpilot-batch prepare --stage lca --run-id run1 --model openai/gpt-4o-mini \
        --user-model openai/gpt-4o-mini --judge-model openai/o4-mini
    """
    from lexpilot_batch.engine.loop import prepare as do_prepare

    if dry_run:
        _dry_run(spec, target, target.options.prices, format_)
        return
    with _session(target, create=True) as (ws, session):
        result = do_prepare(ws, session, spec)
    say_prepared(result, target.root)
    _say_prices_kept(target)


def _say_prices_kept(target: Target) -> None:
    """`prepare` and `run` keep a `--prices` for the workspace (`engine.session.Session.remember`)."""
    if target.options.prices is not None:
        say(
            "--prices kept for this workspace: status, report, estimates and later commands price the study "
            "with them (a --prices given again replaces them)."
        )


def _dry_run(spec: RunSpec, target: Target, prices: dict | None, format_: str) -> None:
    """Nothing is written, not even a new workspace's database."""
    import json

    from lexpilot_batch.estimate import dry_run_prepare, open_readonly, render
    from lexpilot_batch.study.price_memory import prices_for

    root, options = target
    with open_readonly(root, options) as (ws, session):
        kept = prices if ws is None else prices_for(ws, prices)
        estimate = dry_run_prepare(ws, session, spec, prices=kept)
    typer.echo(json.dumps(estimate.to_json(), ensure_ascii=False, indent=2) if format_ == "json" else render(estimate))


@with_options(PROVIDER_OPTIONS, "target", provider_options)
def submit(target: Target) -> None:
    """Upload every compiled, unsubmitted request file and create its batch.

    Example: lexpilot-batch submit
    """
    from lexpilot_batch.engine.loop import submit as do_submit

    with _session(target) as (ws, session):
        result = do_submit(ws, session, on_file=lambda p: typer.echo(f"  submitted {p}"))
    say_rebuilt(result.rebuilt)
    if not result.submitted and not result.manual and not result.waiting:
        typer.echo("Nothing to submit.")
    elif result.submitted:
        typer.echo(
            f"Submitted {len(result.submitted)} file(s)"
            + (f", {len(result.adopted)} adopted from an interrupted submit." if result.adopted else ".")
        )
    if result.waiting:
        typer.echo(
            f"{len(result.waiting)} file(s) wait for room under the enqueued-token budget; "
            f"`{command_hint('poll-and-advance --submit --wait', target.root)}` sends them as batches finish."
        )
    for why in result.unresolved:
        say(f"Not yet sent: {why}.")  # quotes the provider
    say_manual(result.manual, target.root)


def _advance(
    ws: Workspace,
    session: Session,
    do_submit: bool,
    wait: bool,
    poll_interval: float,
    compact: bool,
    verbose: bool = False,
) -> dict[str, int]:
    from lexpilot_batch.engine.downloads import held_advice
    from lexpilot_batch.engine.loop import poll_and_advance as do_poll

    left = do_poll(
        ws,
        session,
        do_submit=do_submit,
        wait=wait,
        poll_interval=poll_interval,
        on_round=progress_printer(ws.given_root, verbose),
        on_outage=say_outage,
        on_provider_wait=ProviderWaitPrinter(),
        compact=compact,
    )
    if left["waiting_manual"]:
        typer.echo(
            f"{left['waiting_manual']} file(s) wait for you to run them and `{ws.command('ingest FILE')}` their output."
        )
    elif left["held"]:
        typer.echo(held_advice(ws, left["held"]) + ".")
    elif left["in_flight"]:
        typer.echo(
            f"{left['in_flight']} batch(es) still in flight; run `{ws.command('poll-and-advance --submit')}` again later."
        )
    elif left["unsubmitted"]:
        typer.echo(f"{left['unsubmitted']} file(s) compiled and waiting: run `{ws.command('submit')}`.")
    elif left["active_threads"] == 0:
        failed = failed_threads(ws.store.conn)
        if failed:
            typer.echo(
                f"Every thread is finished or failed ({failed} failed: `{ws.command('status --verbose')}` names them, "
                f"`{ws.command('retry')}` makes them due again); then run `{ws.command('report')}`."
            )
        else:
            typer.echo(f"Every thread is finished: run `{ws.command('report')}`.")
    return left


@with_options(PROVIDER_OPTIONS, "target", provider_options)
def poll_and_advance(
    target: Target,
    submit_: Annotated[bool, typer.Option("--submit", help="Also submit what is compiled.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Keep polling until nothing is in flight or due.")] = False,
    poll_interval: PollIntervalOpt = 30.0,
    compact: CompactOpt = True,
    verbose: VerboseOpt = False,
) -> None:
    """Poll in-flight batches; save, ingest and advance finished ones; compile the next wave.

    Example: lexpilot-batch poll-and-advance --submit --wait
    """
    with _session(target) as (ws, session):
        _advance(ws, session, submit_, wait, poll_interval, compact, verbose)


@with_options(PROVIDER_OPTIONS, "target", provider_options)
@with_options(RUN_OPTIONS, "spec", run_spec)
def run(
    spec: RunSpec,
    target: Target,
    poll_interval: PollIntervalOpt = 30.0,
    report_format: Annotated[str, typer.Option("--report-format", help="Format of the closing report.")] = "table",
    compact: CompactOpt = True,
    verbose: VerboseOpt = False,
) -> None:
    """Prepare, submit and poll until every thread is finished, then print the report.

    Interrupt it at any moment and run it again: it resumes where it stopped.

    Example: lexpilot-batch run --stage all --provider simulated --run-id demo --model sim-eval --root demo
    """
    from lexpilot_batch.engine.loop import prepare as do_prepare
    from lexpilot_batch.report.formats import check_format
    from lexpilot_batch.report.produce import ReportOptions

    check_format(report_format, "--report-format")  # (before anything is sent: the report comes hours later)

    with _session(target, create=True) as (ws, session):
        say_prepared(do_prepare(ws, session, spec), target.root, polls=True)
        _say_prices_kept(target)
        left = _advance(ws, session, True, True, poll_interval, compact, verbose)
        where = ws.state_dir / DB_NAME
    if left["active_threads"] == 0:
        print_report(target.root, ReportOptions(format=report_format))
        say_results_kept(where, target.root)


def ingest(
    file: Annotated[
        Path, typer.Argument(help="A batch output or error file, or vLLM run-batch's output.", dir_okay=False)
    ],
    wave: Annotated[int | None, typer.Option("--wave", help="Only apply it to this wave's files.", min=1)] = None,
    root: RootOpt = None,
) -> None:
    """Ingest a batch output file produced elsewhere (OpenAI output/error shape or vLLM run-batch).

    The file is saved under responses/ first; ingesting it again changes nothing. Run
    poll-and-advance afterwards to compile the next wave.

    Example: lexpilot-batch ingest responses/w0003/eval__llama-3-8b-1a2b3c4d__000.output.jsonl --wave 3
    """
    from lexpilot_batch.engine.ingest import ingest_external
    from lexpilot_batch.state.workspace import Workspace

    with Workspace(root, create=False) as ws:
        stats, done = ingest_external(ws, file, wave)
    typer.echo(
        f"{file}: {stats.answered} answered, {stats.failed} failed"
        + (f", {stats.duplicates} already ingested" if stats.duplicates else "")
        + (f", {stats.conflicts} conflicting" if stats.conflicts else "")
        + (f", {stats.unknown} not of its request files" if stats.unknown else "")
        + (f", {stats.bad_lines} unreadable lines" if stats.bad_lines else "")
        + (
            f", {stats.coming} not applied: their batches still run, and their answers are taken"
            if stats.coming
            else ""
        )
        + "."
    )
    for anomaly in stats.anomalies[:5]:  # recorded (see status); never applied
        typer.echo(f"    {anomaly}")
    for path in done:
        typer.echo(f"  complete: {path}")
    typer.echo(f"Next: {command_hint('poll-and-advance --submit', root)}")


@with_options(PROVIDER_OPTIONS, "target", provider_options)
def retry(
    target: Target,
    run_id: RunIdFilterOpt = [],  # noqa: B006
    model: ModelFilterOpt = [],  # noqa: B006
    task: TaskFilterOpt = [],  # noqa: B006
    case: Annotated[list[str], typer.Option("--case", help="Only this case number; repeatable.")] = [],  # noqa: B006
    cancelled: Annotated[
        bool, typer.Option("--cancelled", help="The threads `cancel` stopped, instead of the failed ones.")
    ] = False,
) -> None:
    """Make failed threads due again with fresh attempts, under the same run id and manifest.

    Each thread resumes from the answers it has; what was retried is recorded and shown by
    `status`. Then run poll-and-advance --submit --wait.

    Example: lexpilot-batch retry --run-id run1 --task lca
    """
    from lexpilot_batch.engine.loop import retry as do_retry
    from lexpilot_batch.engine.rearm import RetrySelection

    selection = RetrySelection(tuple(run_id), tuple(model), tuple(task), tuple(case), cancelled)
    which = "cancelled" if cancelled else "failed"
    with _session(target) as (ws, session):
        result, compiled = do_retry(ws, session, selection)
    if result.cancelled_left:
        typer.echo(
            f"{result.cancelled_left} cancelled thread(s) left as they are (`{command_hint('retry --cancelled', target.root)}` "
            "brings them back)."
        )
    if not result.threads:
        left = f" ({result.failed_left} {which} thread(s) do not match the filters)" if result.failed_left else ""
        typer.echo(f"No {which} thread to retry{left}.")
        return
    tasks = ", ".join(f"{task} {n}" for task, n in result.by_task.items())
    typer.echo(f"Retrying {result.threads} {which} thread(s) ({tasks}) with fresh attempts.")
    if compiled.compiled:
        typer.echo(f"Wave {compiled.wave}: {compiled.requests} requests in {len(compiled.files)} file(s).")
    elif compiled.in_flight:
        typer.echo("A wave is under way; they join the next wave.")
    typer.echo(f"Next: {command_hint('poll-and-advance --submit --wait', target.root)}")
