"""The command line: parses options and calls one library function per command.

No SQL, HTTP or metric arithmetic lives here. `LexpilotError`s become one clean message and a
non-zero exit; Ctrl-C exits 130 (state stays consistent because every write is transactional).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from lexpilot_batch import __version__
from lexpilot_batch.errors import LexpilotError, NotAvailable

class _Typer(typer.Typer):
    """Commands here exit 130 on Ctrl-C, after saying how to resume."""

    def command(self, *args, **kwargs):  # type: ignore[override]
        register = super().command(*args, **kwargs)

        def decorator(func):
            @functools.wraps(func)
            def wrapper(*a, **kw):
                try:
                    return func(*a, **kw)
                except KeyboardInterrupt:
                    typer.echo("Interrupted; run the same command again to resume.", err=True)
                    raise typer.Exit(130) from None

            register(wrapper)
            return func

        return decorator


app = _Typer(
    name="lexpilot-batch",
    help="Run the LexPilot legal-consultation benchmark through provider Batch APIs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

DatasetOpt = Annotated[
    Optional[Path],
    typer.Option("--dataset", help="Dataset JSON file (default: the bundled sample).", dir_okay=False),
]
CategoriesOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--categories",
        help="JSON object {class name: [cause of action, ...]} (default: the bundled mapping).",
        dir_okay=False,
    ),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lexpilot-batch {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
) -> None:
    """Run the LexPilot legal-consultation benchmark through provider Batch APIs.

    Example: lexpilot-batch run --stage all --provider simulated --run-id demo --model sim-eval
    """


@app.command("validate-data")
def validate_data(dataset: DatasetOpt = None, categories: CategoriesOpt = None) -> None:
    """Check a dataset file against the LexPilot schema and print a summary.

    Exits 0 when valid, 1 with every problem (case and field named) when not.

    Example: lexpilot-batch validate-data --dataset LexPilot_release_multiturn.json
    """
    from lexpilot_batch import data

    summary = data.validate_file(dataset, categories)
    typer.echo(summary.render())


def _not_yet(command: str) -> None:
    raise NotAvailable(f"`lexpilot-batch {command}` is not available in this version yet.")


@app.command()
def prepare() -> None:
    """Register a run and compile the requests now due into the open wave's batch files.

    Example: lexpilot-batch prepare --stage lca --run-id run1 --model gpt-4o-mini
    """
    _not_yet("prepare")


@app.command()
def submit() -> None:
    """Upload every compiled, unsubmitted request file and create its batch.

    Example: lexpilot-batch submit
    """
    _not_yet("submit")


@app.command("poll-and-advance")
def poll_and_advance() -> None:
    """Poll in-flight batches; save, ingest and advance finished ones; compile the next wave.

    Example: lexpilot-batch poll-and-advance --submit --wait
    """
    _not_yet("poll-and-advance")


@app.command()
def status() -> None:
    """Show threads done / in flight / failed per run and task, the wave, requests and tokens.

    Example: lexpilot-batch status --format json
    """
    _not_yet("status")


@app.command()
def report() -> None:
    """Print the benchmark's metrics per run and cause class, with mean and SD over runs.

    Example: lexpilot-batch report --format markdown
    """
    _not_yet("report")


@app.command()
def run() -> None:
    """Prepare, submit and poll until every thread is finished, then print the report.

    Example: lexpilot-batch run --stage all --provider simulated --run-id demo --model sim-eval
    """
    _not_yet("run")


@app.command()
def export() -> None:
    """Write the records in the original benchmark code's result-file layout.

    Example: lexpilot-batch export --layout seed --out results/
    """
    _not_yet("export")


@app.command()
def ingest() -> None:
    """Ingest a batch output file produced elsewhere (OpenAI or vLLM run-batch shape).

    Example: lexpilot-batch ingest vllm_output.jsonl --wave 3
    """
    _not_yet("ingest")


@app.command("serve-simulated")
def serve_simulated() -> None:
    """Serve the simulated OpenAI-compatible Batch API on loopback until stopped.

    Example: lexpilot-batch serve-simulated --port 8765 --state-dir sim-state
    """
    _not_yet("serve-simulated")


def main() -> None:
    try:
        app()
    except LexpilotError as exc:
        typer.echo(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
