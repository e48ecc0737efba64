"""The command line: parses options and calls one library function per command.

No SQL, HTTP or metric arithmetic lives here. `application` holds the typer app and how it exits;
`options` the options commands share; `output` what running a study prints; the commands
themselves are in `running` (a study), `reading` (a workspace) and `tools`.
"""

from lexpilot_batch.cli.application import app, main

__all__ = ["app", "main"]
