"""Producing a report from a workspace: what `report` prints and `run` prints at its end.

Reads the workspace's finished records, refuses unfinished tasks (unless partial), builds the
report, writes the figure files asked for, gathers the HTML viewer's data, and renders: the
caller (the CLI) parses options and prints or writes what comes back, nothing more.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from lexpilot_batch.benchmark.prompts import render_key_details
from lexpilot_batch.data import stored_case
from lexpilot_batch.providers.prices import DEFAULT_BATCH_DISCOUNT, Prices, unused_prices
from lexpilot_batch.report import results
from lexpilot_batch.report.build import build_report
from lexpilot_batch.report.formats import check_format, render
from lexpilot_batch.report.formats.viewer import CaseFacts, viewer_data
from lexpilot_batch.report.judge_calls import load_judge_calls
from lexpilot_batch.report.statistics import compare
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.price_memory import prices_for


@dataclass
class ReportOptions:
    """What `report` was asked for (its options, parsed)."""

    run_id: str | None = None
    model: str | None = None
    format: str = "table"
    partial: bool = False
    prices: Prices | None = None
    batch_discount: float = DEFAULT_BATCH_DISCOUNT
    baseline: str | None = None
    adjust: str = compare.DEFAULT_ADJUST  # `--adjust`: holm over the report's comparisons, or none
    resamples: int | None = None
    seed: int | None = None
    plan: float | None = None  # `--plan DELTA`
    figures: Path | None = None


@dataclass
class ProducedReport:
    text: str  # the rendered report, in `ReportOptions.format`
    warnings: list[str] = field(default_factory=list)
    figure_files: list[Path] = field(default_factory=list)


def produce_report(root: Path | None, options: ReportOptions) -> ProducedReport:
    """The report of the workspace at `root` as `options` ask, rendered."""
    check_format(options.format)
    html = options.format == "html"
    with Workspace(root, writable=False) as ws:
        prices = prices_for(ws, dict(options.prices) if options.prices is not None else None)
        # The HTML page's per-case viewer shows whole records; every other format reads scores only.
        runs = results.load_run_results(ws, options.run_id, options.model, texts=html)
        keys = [(r.run_id, r.model) for r in runs]
        facts = _case_facts(ws.store.conn, keys) if html else None
        judges = load_judge_calls(ws.store.conn, keys) if html else None
    if not options.partial:
        results.check_complete(runs, "report what is scored", root)
    built = build_report(
        runs,
        prices,
        batch_discount=options.batch_discount,
        resamples=compare.DEFAULT_RESAMPLES if options.resamples is None else options.resamples,
        seed=compare.DEFAULT_SEED if options.seed is None else options.seed,
        baseline=options.baseline,
        adjust=options.adjust,
        plan=options.plan,
    )
    produced = ProducedReport("")
    if options.figures is not None:
        from lexpilot_batch.report.formats.plots import save_figures

        produced.figure_files, produced.warnings = save_figures(built, options.figures)
    if options.run_id is None and options.model is None:  # (a filtered report sees only some models)
        served = {m for r in runs for m in (r.model, r.user_model, r.judge_model)}
        for name in unused_prices(prices, served):
            produced.warnings.append(
                f"--prices names {name!r}, which is no model of this workspace's runs ({', '.join(sorted(served))}); "
                "its price is not used (a misspelt name? the model it meant is priced from the bundled table)"
            )
    viewer = viewer_data(runs, built, facts, judges) if html else None
    produced.text = render(built, options.format, viewer)
    return produced


def _case_facts(db: sqlite3.Connection, runs: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, CaseFacts]]:
    """Per (run id, model), each case's focal points and key details: what the DCG judge and the
    User Model were shown, for the researcher auditing them (never part of an `eval` prompt)."""
    wanted = set(runs)
    datasets: dict[str, list[tuple[str, str]]] = {}
    for run_id, model, dataset in db.execute("SELECT run_id, model, dataset FROM runs"):
        if (run_id, model) in wanted:
            datasets.setdefault(dataset, []).append((run_id, model))
    out: dict[tuple[str, str], dict[str, CaseFacts]] = {key: {} for key in wanted}
    for dataset, keys in datasets.items():
        of_case: dict[str, CaseFacts] = {}
        for number, data in db.execute("SELECT case_number, data FROM cases WHERE dataset = ?", (dataset,)):
            case = stored_case(data)
            of_case[number] = CaseFacts(tuple(case.focal_points), render_key_details(case.key_details))
        for key in keys:
            out[key] = of_case
    return out
