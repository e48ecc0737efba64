"""The commands that read a workspace without changing it: status, report and export."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lexpilot_batch.cli.options import FormatOpt, OutFileOpt, PricesOpt, RootOpt
from lexpilot_batch.cli.output import say, write_text_file
from lexpilot_batch.cli.tail_options import TailSyncOpt
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.prices import DEFAULT_BATCH_DISCOUNT, load_prices
from lexpilot_batch.report.formats import FORMATS
from lexpilot_batch.report.statistics.compare import DEFAULT_ADJUST
from lexpilot_batch.util.spreadsheet import CSV_FILE_ENCODING

if TYPE_CHECKING:
    from lexpilot_batch.estimate import Estimate
    from lexpilot_batch.report.produce import ReportOptions
    from lexpilot_batch.state.workspace import Workspace


def status(
    format_: FormatOpt = "table",
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="The full detail: every run's models and endpoints, each task, requests per role, files, "
            "failed threads, budgets, retries.",
        ),
    ] = False,
    run_id: Annotated[list[str], typer.Option("--run-id", help="Only this run id; repeatable.")] = [],  # noqa: B006
    model: Annotated[list[str], typer.Option("--model", help="Only this evaluated model; repeatable.")] = [],  # noqa: B006
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate", help="Also show the full projection of the remaining requests, tokens, waves and cost."
        ),
    ] = False,
    prices: PricesOpt = None,
    tail_sync: TailSyncOpt = None,
    root: RootOpt = None,
) -> None:
    """Where the workspace stands, on one screen: per model threads done / active / failed, tokens
    and cost so far against the projection, the batches in flight and their age, what blocks, and
    the next command to run. --verbose for every detail, --format json for scripts.

    Example: lexpilot-batch status --model openai/gpt-4o-mini
    """
    import json

    from lexpilot_batch.state.workspace import Workspace
    from lexpilot_batch.status import detail
    from lexpilot_batch.status.summary import Filters, render_summary, summarize

    if format_ not in ("table", "json"):
        raise LexpilotError("--format must be table or json")
    price_table = load_prices(prices)
    filters = Filters(tuple(run_id), tuple(model))
    from lexpilot_batch.providers.prices import refuse_misspelt_prices
    from lexpilot_batch.study.price_memory import prices_for, study_models

    with Workspace(root, writable=False) as ws:
        refuse_misspelt_prices(price_table, study_models(ws), "status")
        price_table = prices_for(ws, price_table)  # given, else those kept from prepare or run
        data = detail.collect(ws)
        projection = None
        if data["runs"]:
            try:
                projection = _estimate_workspace(ws, price_table, tail_sync)
            except LexpilotError:
                if estimate:  # asked for: its error is the answer; else the summary goes without
                    raise
        expected = (
            None
            if projection is None
            else {m: (c.expected if c else None) for m, c in projection.projection_cost_by_model.items()}
        )
        waves = None if projection is None else projection.waves_remaining
        summary = summarize(
            ws, filters, price_table, expected, waves_left=None if waves is None else (waves.min, waves.max)
        )
        where = str(ws.given_root or ws.root)
    data = detail.filtered(data, filters.keeps)
    if format_ == "json":
        data["summary"] = summary
        if estimate and projection is not None:
            data["estimate"] = projection.to_json()
        say(json.dumps(data, ensure_ascii=False, indent=2))
        return
    say(detail.render(data) if verbose else render_summary(summary, where))
    if estimate and projection is not None:
        from lexpilot_batch.estimate import render

        say("\n" + render(projection))


def _estimate_workspace(ws: Workspace, prices: dict | None, tail_sync: int | None) -> Estimate:
    from lexpilot_batch.engine.session import ProviderOptions, Session
    from lexpilot_batch.estimate import estimate_workspace

    session = Session(ws, ProviderOptions(tail_sync=tail_sync))
    try:
        return estimate_workspace(ws, session, prices)
    finally:
        session.close()


def print_report(root: Path | None, options: ReportOptions, out: Path | None = None) -> None:
    """What `report` prints (or writes to `out`), and `run` once every thread is finished."""
    from lexpilot_batch.report.produce import produce_report

    produced = produce_report(root, options)
    for warning in produced.warnings:
        say(f"Warning: {warning}", err=True)
    if options.figures is not None:
        say(f"Wrote {len(produced.figure_files)} figure file(s) under {options.figures}.", err=True)
    if out is not None:
        write_text_file(out, produced.text, CSV_FILE_ENCODING if options.format == "csv" else "utf-8")
        say(f"Wrote the report ({options.format}) to {out}.", err=True)
    elif options.format == "html":
        # A document for a browser, not for a terminal: its data are JSON in a script block (control
        # characters escaped there) and it holds records only, never a provider's error.
        typer.echo(produced.text, nl=False)
    else:
        say(produced.text)


def report(
    run_id: Annotated[str | None, typer.Option("--run-id", help="Only this run id.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this evaluated model.")] = None,
    format_: Annotated[
        str, typer.Option("--format", help=f"{', '.join(FORMATS)} (html: one self-contained page).")
    ] = "table",
    partial: Annotated[bool, typer.Option("--partial", help="Report unfinished tasks, marked as partial.")] = False,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline", help="Compare every model with this one (default: every pair of comparable models)."
        ),
    ] = None,
    adjust: Annotated[
        str,
        typer.Option(
            "--adjust",
            help="holm: Holm-adjusted p-values beside the unadjusted ones, over the report's comparisons (the "
            "headline metrics one family, the others another; family-wise 5% each); none: unadjusted only.",
        ),
    ] = DEFAULT_ADJUST,
    resamples: Annotated[
        int | None,
        typer.Option(
            "--bootstrap",
            help="Random patterns of the Monte Carlo permutation tests, where exact enumeration is too long "
            "(default 1000; 0: none, those p-values are then left out).",
            min=0,
        ),
    ] = None,
    plan: Annotated[
        float | None,
        typer.Option(
            "--plan",
            help="DELTA: also the cases needed, at 1, 3, 5 and 10 runs of each model, to detect a difference "
            "DELTA (e.g. 0.05) with 80% power in a 5% test, at the variance this report measures.",
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option("--bootstrap-seed", help="Seed of the resamples (default fixed).")] = None,
    figures: Annotated[
        Path | None,
        typer.Option(
            "--figures",
            help="Also write the figures as SVG and PNG into this folder (needs lexpilot-batch[plots]).",
            file_okay=False,
        ),
    ] = None,
    out: OutFileOpt = None,
    prices: PricesOpt = None,
    batch_discount: Annotated[
        float, typer.Option("--batch-discount", help="Discount of batch over list prices.", min=0, max=1)
    ] = DEFAULT_BATCH_DISCOUNT,
    root: RootOpt = None,
) -> None:
    """Print the benchmark's metrics per run and cause class, with mean and SD over comparable runs,
    95% intervals (exact binomial, cluster-aware), the split of their variance between cases and
    runs, and paired model comparisons (permutation tests, Holm-adjusted).

    Reads only the workspace database: no API calls, so it works offline on finished runs.

    Example: lexpilot-batch report --format html --out report.html; lexpilot-batch report --plan 0.05
    """
    from lexpilot_batch.report.produce import ReportOptions

    options = ReportOptions(
        run_id=run_id,
        model=model,
        format=format_,
        partial=partial,
        prices=load_prices(prices),
        batch_discount=batch_discount,
        baseline=baseline,
        adjust=adjust,
        resamples=resamples,
        seed=seed,
        plan=plan,
        figures=figures,
    )
    print_report(root, options, out)


def export(
    out: Annotated[Path, typer.Option("--out", help="Folder to write the result files into.", file_okay=False)],
    layout: Annotated[
        str,
        typer.Option(
            "--layout",
            "--format",
            help="'seed': the original code's result files; 'cases': one row per case (cases.csv, cases.jsonl); "
            "'inspect': one Inspect log per run, model and task, for `inspect view` (needs the extra 'inspect').",
        ),
    ] = "seed",
    run_id: Annotated[str | None, typer.Option("--run-id", help="Only this run id.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Only this evaluated model.")] = None,
    partial: Annotated[
        bool,
        typer.Option(
            "--partial",
            help="Export unfinished tasks too: --layout seed names their files *.partial.jsonl; "
            "--layout cases writes the finished threads.",
        ),
    ] = False,
    root: RootOpt = None,
) -> None:
    """Write finished records in the original benchmark code's result-file layout, one row per case,
    or as Inspect logs.

    --layout seed writes runs/, AwN_gen/, Force_ask_gen/, Force_judge_gen/ and eval_results/ under
    --out; --layout cases writes cases.csv and cases.jsonl (class, label or success, verdicts
    against gold, rounds used and stop reason of every run, model, task and case); --format inspect
    writes one Inspect log per run, model and task (messages, the judges' raw outputs, usage and
    cost per sample, the task's metrics), which `inspect view --log-dir DIR` opens. Unfinished or
    failed tasks are refused, as report refuses them, unless --partial.

    Example: lexpilot-batch export --layout cases --out results/
    """
    from lexpilot_batch.state.workspace import Workspace

    if layout == "cases":
        from lexpilot_batch.data import SAMPLE_NOTE
        from lexpilot_batch.report import results
        from lexpilot_batch.report.exports.cases import export_cases
        from lexpilot_batch.report.judge_calls import load_judge_calls

        with Workspace(root, writable=False) as ws:
            runs = results.load_run_results(ws, run_id, model)
            judges = load_judge_calls(ws.store.conn, [(r.run_id, r.model) for r in runs])
        if not partial:
            results.check_complete(runs, "export the finished threads")
        written = export_cases(runs, out, judges)
        say(f"Wrote {len(written)} file(s) under {out}.")
        notes = [f"{r.run_id} / {r.model}: {SAMPLE_NOTE}" for r in runs if r.bundled_sample]
        # --partial: the rows left out are said, as the seed layout's export.json lists them.
        notes += [f"partial: no row for {line}" for line in results.incomplete(runs)]
    elif layout == "seed":
        from lexpilot_batch.report.exports.seed import export_seed

        with Workspace(root, writable=False) as ws:
            exported = export_seed(ws, out, run_id, model, partial=partial)
        say(f"Wrote {len(exported.files)} file(s) under {out}.")
        notes = exported.notes
    elif layout == "inspect":
        from lexpilot_batch.data import SAMPLE_NOTE
        from lexpilot_batch.report.exports.inspect_logs import export_inspect

        with Workspace(root, writable=False) as ws:
            logs = export_inspect(ws, out, run_id, model, partial=partial)
            sample = [f"{r.run_id} / {r.model}: {SAMPLE_NOTE}" for r in logs.runs if r.bundled_sample]
        say(f"Wrote {len(logs.files)} Inspect log(s) under {out}; to open them: inspect view --log-dir {out}")
        notes = sample + logs.notes
    else:
        raise LexpilotError(
            "--layout must be 'seed' (the original benchmark code's result files), 'cases' (one row per case) "
            "or 'inspect' (Inspect logs)"
        )
    for note in notes:
        say(f"Note: {note}")
