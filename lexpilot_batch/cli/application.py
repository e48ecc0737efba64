"""The typer application: its commands in the order `--help` lists them, and how it exits.

`LexpilotError`s become one clean message and a non-zero exit; Ctrl-C exits 130 (state stays
consistent because every write is transactional). Messages and tracebacks are printed through
`output.printable`: no key, no control character.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from lexpilot_batch import __version__
from lexpilot_batch.cli import (
    INTERRUPTED,
    INTERRUPTED_EXIT,
    TERMINATED,
    TERMINATED_EXIT,
    Terminated,
    cancel,
    end_body,
    preflight,
    reading,
    running,
    start_body,
    stopped_in_body,
    tools,
)
from lexpilot_batch.cli.output import end_progress, redacting_excepthook, say
from lexpilot_batch.cli.repeats import CheckedCommand
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.state.workspace import is_disk_full
from lexpilot_batch.util import fileio
from lexpilot_batch.util.text import utf8_streams

F = TypeVar("F", bound=Callable[..., Any])


class _Typer(typer.Typer):
    """Commands here exit 130 on Ctrl-C and 143 on SIGTERM, after saying how to resume; SIGTERM
    interrupts only their bodies (`cli.start_body`)."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[F], F]:
        kwargs.setdefault("cls", CheckedCommand)  # a single-value option given twice is refused
        register = super().command(*args, **kwargs)

        def decorator(func: F) -> F:
            @functools.wraps(func)
            def wrapper(*a: Any, **kw: Any) -> Any:
                terminated = False
                try:
                    try:
                        start_body()
                        return func(*a, **kw)
                    finally:
                        terminated = stopped_in_body()
                        end_body()
                except KeyboardInterrupt as stop:
                    _stopped(isinstance(stop, Terminated))
                except Exception as error:  # (typer.Exit included: a command's own answer stands)
                    if isinstance(error, typer.Exit) or not terminated:
                        raise
                    _stopped(True)  # a library turned the SIGTERM raised inside it into its own error

            register(wrapper)
            return func

        return decorator


def _stopped(terminated: bool) -> None:
    """End a command stopped by Ctrl-C or SIGTERM: progress closed, how to resume, 130 or 143."""
    end_progress()
    typer.echo(TERMINATED if terminated else INTERRUPTED, err=True)
    raise typer.Exit(TERMINATED_EXIT if terminated else INTERRUPTED_EXIT) from None


app = _Typer(
    name="lexpilot-batch",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


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

    Example: lexpilot-batch run --stage all --provider simulated --run-id demo --model sim-eval --root demo
    """


app.command("validate-data")(tools.validate_data)
app.command()(running.prepare)
app.command()(preflight.preflight)
app.command()(running.submit)
app.command("poll-and-advance")(running.poll_and_advance)
app.command()(reading.status)
app.command()(reading.report)
app.command()(running.run)
app.command()(reading.export)
app.command()(running.ingest)
app.command()(running.retry)
app.command()(cancel.cancel)
app.command()(tools.doctor)
app.command("serve-simulated")(tools.serve_simulated)


def main() -> None:
    """The application's part of `cli.main` (which handles SIGTERM from the first instruction)."""
    sys.excepthook = redacting_excepthook  # a bug's traceback may quote a provider's answer
    utf8_streams()
    try:
        # Typer runs every argument through expanduser, expandvars and glob when os.name == "nt"
        # (typer.core._main: click's _expand_args), as no shell does: `--run-id run-%USERNAME%`
        # became `run-me`, and a --model-arg holding `*`, `?` or `[` could become file names. The
        # arguments are taken as the shell passed them, on Windows as elsewhere.
        app(windows_expand_args=False)
    except LexpilotError as exc:
        end_progress()
        say(f"Error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        # Outside a workspace's own writes (which say so themselves): an --out folder, a file given.
        end_progress()
        say(f"Error: {os_error_message(exc)}", err=True)
        sys.exit(1)
    except Exception:
        # A bug: its traceback printed here, redacted. Left to the interpreter it would reach
        # typer's hook, which typer puts in place of ours when the app is called and which prints
        # through Python's own, unredacted.
        end_progress()
        redacting_excepthook(*sys.exc_info())
        sys.exit(1)


def os_error_message(exc: OSError) -> str:
    """One line for an operating-system error: what failed, on which file, and what to do."""
    name = _file_named(exc)
    where = f" {name}" if name else ""
    if is_disk_full(exc):
        return f"no space left on the device holding{where or ' the output'}; free space and run the same command again"
    if fileio.held_open(exc):
        # Not "permission denied; choose a folder you can write to": the folder is fine.
        return f"{name or 'the file'} is open in another program; {fileio.HELD_OPEN_ADVICE}"
    if isinstance(exc, PermissionError):
        return f"permission denied:{where}; choose a folder you can write to (or fix its permissions)"
    if isinstance(exc, (FileExistsError, NotADirectoryError)) and name and Path(name).is_file():
        # Making an output's folder where a file of that name stands (`report --out afile/x.csv`).
        return f"{name} is a file, not a folder; choose an output path whose folders are folders"
    return f"{exc.strerror or exc}:{where} ({type(exc).__name__}); check the path and run the same command again"


def _file_named(exc: OSError) -> str | None:
    """The file an error is about, as the user knows it: for `os.replace(tmp, target)` the target
    (`filename2`), and for a file written whole (`fileio.temp_path`) the file asked for, never the
    temporary name it was written under."""
    name = exc.filename2 if exc.filename2 is not None else exc.filename
    if name is None:
        return None
    text = os.fsdecode(name) if isinstance(name, (str, bytes, os.PathLike)) else str(name)
    target = fileio.temp_target(Path(text))
    return str(target) if target is not None else text
