"""The commands that read a workspace without changing it: status, report and export."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lexpilot_batch.cli.options import FormatOpt, PricesOpt, RootOpt
from lexpilot_batch.costs import DEFAULT_BATCH_DISCOUNT, load_prices
from lexpilot_batch.errors import LexpilotError

if TYPE_CHECKING:
    from lexpilot_batch.estimate import Estimate
    from lexpilot_batch.workspace import Workspace


def status(
    format_: FormatOpt = "table",
    estimate: Annotated[
        bool, typer.Option("--estimate", help="Also project the remaining requests, tokens, waves and cost.")
    ] = False,
    prices: PricesOpt = None,
    root: RootOpt = None,
) -> None:
    """Show threads done / in flight / failed per run and task, the wave, requests and tokens.

    Example: lexpilot-batch status --format json
    """
    import json

    from lexpilot_batch import status as status_mod
    from lexpilot_batch.workspace import Workspace

    if format_ not in ("table", "json"):
        raise LexpilotError("--format must be table or json")
    price_table = load_prices(prices)
    with Workspace(root, writable=False) as ws:
        data = status_mod.collect(ws)
        projection = _estimate_workspace(ws, price_table) if estimate else None
    if format_ == "json":
        if projection is not None:
            data["estimate"] = projection.to_json()
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    typer.echo(status_mod.render(data))
    if projection is not None:
        from lexpilot_batch.estimate import render

        typer.echo("\n" + render(projection))


def _estimate_workspace(ws: Workspace, prices: dict | None) -> Estimate:
    from lexpilot_batch.estimate import estimate_workspace
    from lexpilot_batch.providers.session import ProviderOptions, Session

    session = Session(ws, ProviderOptions())
    try:
        return estimate_workspace(ws, session, prices)
    finally:
        session.close()


def print_report(
    root: Path | None,
    run_id: str | None,
    model: str | None,
    format_: str,
    partial: bool,
    prices: dict | None = None,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
) -> None:
    """What `report` prints, and `run` once every thread is finished."""
    from lexpilot_batch import report as report_mod
    from lexpilot_batch import results
    from lexpilot_batch.workspace import Workspace

    if format_ not in report_mod.FORMATS:
        raise LexpilotError(f"--format must be one of {', '.join(report_mod.FORMATS)}")
    with Workspace(root, writable=False) as ws:
        runs = results.load_run_results(ws, run_id, model, texts=False)
    if not partial:
        results.check_complete(runs, "report what is scored", root)
    built = report_mod.build_report(runs, prices, batch_discount=batch_discount)
    typer.echo(report_mod.render(built, format_))


def report(
    run_id: Annotated[str | None, typer.Option("--run-id", help="Only this run id.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this evaluated model.")] = None,
    format_: Annotated[str, typer.Option("--format", help="table, json, csv, markdown or latex.")] = "table",
    partial: Annotated[bool, typer.Option("--partial", help="Report unfinished tasks, marked as partial.")] = False,
    prices: PricesOpt = None,
    batch_discount: Annotated[
        float, typer.Option("--batch-discount", help="Discount of batch over list prices.", min=0, max=1)
    ] = DEFAULT_BATCH_DISCOUNT,
    root: RootOpt = None,
) -> None:
    """Print the benchmark's metrics per run and cause class, with mean and SD over comparable runs.

    Reads only the workspace database: no API calls, so it works offline on finished runs.

    Example: lexpilot-batch report --format markdown
    """
    print_report(root, run_id, model, format_, partial, load_prices(prices), batch_discount)


def export(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the result files into.", file_okay=False)],
    layout: Annotated[str, typer.Option("--layout", help="Only 'seed': the original code's file layout.")] = "seed",
    run_id: Annotated[str | None, typer.Option("--run-id", help="Only this run id.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this evaluated model.")] = None,
    partial: Annotated[
        bool,
        typer.Option("--partial", help="Export unfinished tasks too, their files named *.partial.jsonl."),
    ] = False,
    root: RootOpt = None,
) -> None:
    """Write finished records in the original benchmark code's result-file layout.

    Writes runs/, AwN_gen/, Force_ask_gen/, Force_judge_gen/ and eval_results/ under --out.
    Unfinished or failed tasks are refused, as report refuses them, unless --partial.

    Example: lexpilot-batch export --layout seed --out results/
    """
    from lexpilot_batch.export import export_seed
    from lexpilot_batch.workspace import Workspace

    if layout != "seed":
        raise LexpilotError("--layout must be 'seed' (the original benchmark code's result files)")
    with Workspace(root, writable=False) as ws:
        exported = export_seed(ws, out, run_id, model, partial=partial)
    typer.echo(f"Wrote {len(exported.files)} file(s) under {out}.")
    for note in exported.notes:
        typer.echo(f"Note: {note}")
