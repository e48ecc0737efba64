"""The tool commands around a study: validate-data, doctor and serve-simulated."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lexpilot_batch.cli.options import (
    PROVIDER_OPTIONS,
    CategoriesOpt,
    DatasetOpt,
    SimFaultsOpt,
    SimSeedOpt,
    Target,
    provider_options,
    with_options,
)
from lexpilot_batch.cli.output import say


def validate_data(dataset: DatasetOpt = None, categories: CategoriesOpt = None) -> None:
    """Check a dataset file against the LexPilot schema and print a summary.

    Exits 0 when valid, 1 with every problem (case and field named) when not. A Hugging Face
    dataset (hf://datasets/OWNER/NAME[@REVISION][/FILE]) is downloaded into its cache first.

    Example: lexpilot-batch validate-data --dataset hf://datasets/Medivvv/LexPilot
    """
    from lexpilot_batch import data

    summary = data.validate_file(data.dataset_source(dataset), categories)
    say(summary.render())


@with_options(PROVIDER_OPTIONS, "target", provider_options)
def doctor(
    target: Target,
    repair: Annotated[bool, typer.Option("--repair", help="Fix what is safe to fix.")] = False,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also read every compacted file back against its recorded digest (slow).")
    ] = False,
) -> None:
    """Check the workspace: schema, changed or missing files, interrupted submits, stuck threads.

    Each finding says how to repair it; --repair does what is safe (recompiling an unsent wave,
    downloading results again, re-queuing what a damaged ingest left behind).

    Example: lexpilot-batch doctor --repair
    """
    from lexpilot_batch.doctor import check, render_report

    root, options = target
    report = check(root, repair, options, deep)
    say(render_report(report, root))
    raise typer.Exit(report.exit_code)


def serve_simulated(
    host: Annotated[
        str, typer.Option("--host", help="Loopback address to bind (nothing else is allowed).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port; 0 picks a free one.", min=0, max=65535)] = 0,
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Folder keeping its files and batches across restarts.", file_okay=False)
    ] = Path("state/simulated"),
    sim_faults: SimFaultsOpt = None,
    sim_seed: SimSeedOpt = 0,
    forget_batches: Annotated[
        bool,
        typer.Option("--forget-batches", help="Start as a provider whose restart lost every batch (files stay)."),
    ] = False,
) -> None:
    """Serve the simulated Batch APIs on loopback until stopped: OpenAI's, Anthropic's Message
    Batches and Gemini's Batch Mode, on one port.

    Point any client at the printed base URLs with any API key (OPENAI_BASE_URL ends in /v1;
    ANTHROPIC_BASE_URL and GOOGLE_GEMINI_BASE_URL are the server itself).

    Example: lexpilot-batch serve-simulated --port 8765 --state-dir sim-state
    """
    from lexpilot_batch.simulated import parse_faults, serve_forever

    serve_forever(state_dir, host, port, parse_faults(sim_faults), sim_seed, forget_batches=forget_batches)
