"""The command line: parses options and calls one library function per command.

No SQL, HTTP or metric arithmetic lives here. `application` holds the typer app and how it exits;
`options` the options commands share; `output` what running a study prints; the commands
themselves are in `running` (a study), `reading` (a workspace) and `tools`.

`main` is what both ways in run first (the `lexpilot-batch` script and `python -m lexpilot_batch`)
and imports the application itself, so that an interrupt while the modules load (the first half
second of every command) ends as any other does, not in a traceback of the imports.

SIGTERM (`kill`, a cluster's job time limit, `docker stop`) is handled from `main`'s first
instruction, in three phases (`Stopping`):

- start-up, until a command's body begins (the imports, typer reading the arguments): nothing has
  been done, and an exception raised there would be a traceback of whatever module was loading, so
  the signal is only noted; the command then stops before its body, saying so, with exit 143.
- the body: `Terminated` is raised where the command is, and the command ends as on Ctrl-C (a
  transaction rolled back, workers stopped), saying so, with exit 143. Raised where Python cannot
  propagate it (a finalizer, a weakref callback: "Exception ignored in ..."), it is not printed
  but delivered again a moment later (`_unraisable`), so that it is never swallowed.
- after the body: the command's own answer stands; the process was ending anyway.

Before `main` runs, in the interpreter's own start-up and the two small modules it imports first,
the system's default action ends the process (a shell reports 143): nothing was done.
"""

from __future__ import annotations

import signal
import sys

TYPE_CHECKING = False  # (not typing's: importing it would lengthen the start-up before `main`)
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any

INTERRUPTED = "Interrupted; run the same command again to resume."
INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
TERMINATED = "Stopped (SIGTERM); run the same command again to resume."
TERMINATED_EXIT = 143  # 128 + SIGTERM: `kill`, a job scheduler's time limit, `docker stop`
REDELIVER_AFTER = 0.05  # seconds: a SIGTERM swallowed by a finalizer is raised again this much later


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, as Ctrl-C is: `kill`, a cluster's job time limit
    (Slurm sends SIGTERM before SIGKILL) or `docker stop` ends the command through the same paths
    as Ctrl-C (a transaction rolled back, the compaction worker stopped, progress bars closed),
    saying how to resume, where the default action ended it at once and silently."""


class Stopping:
    """Where this process is with respect to SIGTERM (module docstring): the phase, and whether
    one was received."""

    in_body = False  # a command's body runs: the signal raises `Terminated` there
    received = False  # a SIGTERM arrived (in any phase)
    body_ended = False  # the body returned or raised: its answer stands
    in_hook = False  # `_unraisable` runs: raising there would be swallowed again
    swallowed = False  # a `Terminated` was raised where it could not propagate, and not yet again
    hook_before: Any = sys.unraisablehook  # the hook `_unraisable` stands in front of


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    Stopping.received = True
    if Stopping.in_body and not Stopping.in_hook:
        Stopping.swallowed = False  # (set again by `_unraisable` if this one is swallowed too)
        raise Terminated


def _unraisable(unraisable: Any) -> None:
    """`sys.unraisablehook`: a `Terminated` raised where it cannot propagate is not printed (no
    traceback) but raised again a moment later, once the finalizer has returned, or when the
    body ends if that comes first (`end_body`)."""
    if not isinstance(unraisable.exc_value, Terminated):
        Stopping.hook_before(unraisable)
        return
    Stopping.swallowed = True
    Stopping.in_hook = True
    try:
        import _thread
        import threading

        redeliver = threading.Timer(REDELIVER_AFTER, _thread.interrupt_main, (signal.SIGTERM,))
        redeliver.daemon = True
        redeliver.start()
    finally:
        Stopping.in_hook = False


def start_body() -> None:
    """A command's body begins: from now on SIGTERM raises `Terminated` where the command is; one
    received during start-up is raised now, before anything is done."""
    Stopping.in_body = True
    if Stopping.received:
        raise Terminated


def end_body() -> None:
    """The command's body ended (its answer given): SIGTERM no longer interrupts it. One that was
    swallowed during the body and not yet raised again is raised now."""
    Stopping.in_body = False
    Stopping.body_ended = True
    if Stopping.swallowed:
        Stopping.swallowed = False
        raise Terminated


def stopped_in_body() -> bool:
    """Whether a SIGTERM arrived while a command's body ran: an error the body ends with then is
    taken for its consequence (a library that caught the `Terminated` raised inside it and raised
    its own, as pydantic-core's schema building does: `SchemaError: ... Terminated`)."""
    return Stopping.received and not Stopping.body_ended


def stopped_before_body() -> bool:
    """Whether a SIGTERM arrived before any command's body ran (`--help`, a usage error, the
    imports): the process then ends as stopped."""
    return Stopping.received and not Stopping.body_ended


def main() -> None:
    handles = hasattr(signal, "SIGTERM")  # (Windows has it, but never sends it: `kill` is TerminateProcess)
    try:
        before = signal.signal(signal.SIGTERM, _on_sigterm) if handles else None
    except ValueError:  # not the main thread (an embedding): signals are the host's
        handles, before = False, None
    Stopping.in_body = Stopping.received = Stopping.body_ended = Stopping.swallowed = False
    Stopping.hook_before = sys.unraisablehook
    if handles:
        sys.unraisablehook = _unraisable
    try:
        _main()
    finally:
        if handles:  # (main() called in a process that goes on: a test, an embedding)
            signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)
            sys.unraisablehook = Stopping.hook_before
        Stopping.in_body = Stopping.received = Stopping.body_ended = Stopping.swallowed = False


def _main() -> None:
    try:
        from lexpilot_batch.cli.application import main as run
    except KeyboardInterrupt:  # (nothing ran yet: nothing to resume, the same command starts it)
        _stop(INTERRUPTED, INTERRUPTED_EXIT)
    if stopped_before_body():
        _stop(TERMINATED, TERMINATED_EXIT)
    try:
        run()
    finally:
        # `--help`, `--version` or a usage error: no body ran, and a SIGTERM noted in the meantime
        # ends the process as stopped.
        if stopped_before_body():
            _stop(TERMINATED, TERMINATED_EXIT)


def _stop(message: str, code: int) -> None:
    print(message, file=sys.stderr)
    raise SystemExit(code) from None


def __getattr__(name: str) -> Any:
    if name == "app":  # the typer app, for tests and embedding: loaded on first use
        from lexpilot_batch.cli.application import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["TERMINATED", "TERMINATED_EXIT", "Terminated", "app", "main"]
