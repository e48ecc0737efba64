"""The command line: parses options and calls one library function per command.

No SQL, HTTP or metric arithmetic lives here. `application` holds the typer app and how it exits;
`options` the options commands share; `output` what running a study prints; the commands
themselves are in `running` (a study), `reading` (a workspace) and `tools`.

`main` imports the application itself, so that a Ctrl-C while the modules load (the first half
second of every command) ends as any other interrupt does, not in a traceback of the imports.
"""

from __future__ import annotations

import sys
from typing import Any

INTERRUPTED = "Interrupted; run the same command again to resume."
INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
TERMINATED = "Stopped (SIGTERM); run the same command again to resume."
TERMINATED_EXIT = 143  # 128 + SIGTERM: `kill`, a job scheduler's time limit, `docker stop`


def main() -> None:
    try:
        from lexpilot_batch.cli.application import main as run
    except KeyboardInterrupt:  # (nothing ran yet: nothing to resume, the same command starts it)
        print(INTERRUPTED, file=sys.stderr)
        raise SystemExit(INTERRUPTED_EXIT) from None
    run()


def __getattr__(name: str) -> Any:
    if name == "app":  # the typer app, for tests and embedding: loaded on first use
        from lexpilot_batch.cli.application import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "main"]
