"""The command line: parses options and calls one library function per command.

No SQL, HTTP or metric arithmetic lives here. `application` holds the typer app and how it exits;
`options` the options commands share; `output` what running a study prints; the commands
themselves are in `running` (a study), `reading` (a workspace) and `tools`.
"""

from lexpilot_batch.cli.application import app, main

# bench/run_bench.py times the report exactly as `lexpilot-batch report` prints it, by this name.
from lexpilot_batch.cli.reading import print_report as _print_report  # noqa: F401

__all__ = ["app", "main"]
