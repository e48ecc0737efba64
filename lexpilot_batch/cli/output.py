"""What the commands print, and how: `say` is the one way text leaves for a terminal, with every
secret redacted (`redaction`) and every control character escaped (`text.terminal_safe`), so
that a provider's error, a stored failure reason or an anomaly can neither show a key nor drive
the terminal. Also what running a study prints: a compiled wave, files left to the user, progress.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import typer

from lexpilot_batch.state.workspace import command_hint, shell_word
from lexpilot_batch.util.redaction import redact
from lexpilot_batch.util.text import terminal_safe

if TYPE_CHECKING:
    from lexpilot_batch.engine.loop import AdvanceResult, Outage, PrepareResult
    from lexpilot_batch.util.clock import ProviderWait

# A wave's file sent through the synchronous call instead of a batch (`engine.tail`).
AT_ONCE = "  (at once: --tail-sync / --tail auto, or fewer than its provider's batch minimum)"


def printable(text: str) -> str:
    """`text` as it may reach a terminal: redacted, control characters escaped, line breaks kept."""
    return terminal_safe(redact(text), keep_newlines=True)


def say(text: str, err: bool = False, nl: bool = True) -> None:
    """Print `text` (to stderr with `err`) as `printable` makes it."""
    typer.echo(printable(text), err=err, nl=nl)


def write_text_file(path: Path, text: str, encoding: str = "utf-8") -> None:
    """`--out FILE`: the text as UTF-8 (`utf-8-sig` for a CSV: `util.spreadsheet`), whole or not at
    all, whatever the console's code page."""
    from lexpilot_batch.util.fileio import write_atomic

    write_atomic(path, text.encode(encoding))


def end_progress() -> None:
    """Close every progress bar still open (a command stopped by an error or Ctrl-C in the middle
    of a wave), so that what is printed next starts on a line of its own."""
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):
        # Ctrl-C inside `tqdm.__init__`: tqdm registers a bar before it is built, and a half-built one
        # cannot close (or closes to nothing). Forget it, so that the error reported is the one printed.
        with contextlib.suppress(AttributeError):
            bar.close()
        tqdm._instances.discard(bar)


def redacting_excepthook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """`sys.excepthook` for the CLI: a traceback (a bug) is printed as Python would, through
    `printable`, since an SDK's exception can quote the provider's answer, and so an echoed key."""
    sys.stderr.write(printable("".join(traceback.format_exception(kind, exc, tb))))


def say_prepared(result: PrepareResult, root: Path | None = None, polls: bool = False) -> None:
    """What `prepare` did; `polls`: the command goes on to poll by itself (`run`), so no
    poll-and-advance is advised."""
    compiled = result.compiled
    for note in result.notes:
        say(f"Note: {note}")
    if result.lineup:
        say("Models and where their requests go:")
        width = max(len(model) for _, model, _ in result.lineup)
        for role, model, destination in result.lineup:
            say(f"  {role:<5}  {model:<{width}}  {destination}")
    models = f" of {', '.join(result.models)}" if len(result.models) > 1 else ""
    say(f"Runs: {', '.join(result.runs)}{models}; new threads: {result.new_threads}.")
    if compiled.in_flight:
        say("A wave is under way; new work joins the next wave" + ("." if polls else " (run poll-and-advance)."))
    elif compiled.compiled:
        where = Path(root if root is not None else Path.cwd()).expanduser().resolve()
        say(f"Wave {compiled.wave}: {compiled.requests} requests in {len(compiled.files)} file(s) under {where}:")
        for path in compiled.files:
            say(f"  {path}" + (AT_ONCE if path in compiled.tail_sync_files else ""))
    else:
        say("Nothing is due: every thread of these runs is finished.")
    say_manual(result.compiled.manual_files, root)


def say_results_kept(database: Path, root: Path | None = None) -> None:
    """Where a finished `run` left its results, and the commands that turn them into files."""
    say(
        f"\nResults are kept in {database} (every record and answer; nothing is lost when this window closes)."
        "\nTo get files:"
        f"\n  {command_hint('report --format html --out report.html', root)}   the page with the per-case viewer"
        f"\n  {command_hint('report --format csv --out report.csv', root)}"
        f"\n  {command_hint('export --layout cases --out results', root)}   one row per case (CSV, JSONL)"
        f"\n  {command_hint('export --layout seed --out results-seed', root)}   the original code's result files"
    )


def say_manual(paths: list[str], root: Path | None = None) -> None:
    """Tell the user exactly how to run files left to them (the `manual` backend); with a `--root`,
    the paths are given under it, so that the commands run as printed from where the user is."""
    if not paths:
        return
    say("\nThese files are yours to run (manual backend), e.g. with vLLM on a local model:")
    for path in paths:
        out = path.replace("requests/", "responses/", 1).replace(".jsonl", ".output.jsonl")
        if root is not None:
            path, out = (shell_word(Path(root, p).as_posix()) for p in (path, out))
        say(f"  python -m vllm.entrypoints.openai.run_batch -i {path} -o {out} --model MODEL")
        say(f"  {command_hint(f'ingest {out}', root)}")
    say("(or upload them in your provider's console and ingest the output and error files it gives you)")


def say_outage(outage: Outage) -> None:
    """A round of `--wait` the provider failed, and when the next one comes."""
    say(
        f"The provider failed this round ({outage.failures} in a row): {outage.error}. Trying again in "
        f"{outage.pause:.0f} s ({outage.left:.0f} s of --outage-wait left after that).",
        err=True,
    )


class ProviderWaitPrinter:
    """A line when the command begins to wait for a provider that refused (`clock.ProviderWait`):
    a wait of a second or more, and again for the same reason once `quiet` seconds have passed,
    so that a long wait is never silent and short retries do not flood the screen."""

    def __init__(self, quiet: float = 10.0) -> None:
        self.quiet = quiet
        self._last: tuple[str, float] | None = None  # the reason last told, and when

    def __call__(self, wait: ProviderWait) -> None:
        now = time.monotonic()
        if wait.pause < 1 or (
            self._last is not None and self._last[0] == wait.why and now - self._last[1] < self.quiet
        ):
            return
        self._last = (wait.why, now)
        say(
            f"Waiting for the provider: {wait.why}. Trying again in {wait.pause:.0f} s "
            f"({wait.left:.0f} s of --outage-wait left after that).",
            err=True,
        )


def pace(done: int, total: int, elapsed: float) -> str:
    """How far a wave's batches are after `elapsed` seconds at the provider: the rate of requests
    finished and when the rest should be, at that rate (batches report counts unevenly: an
    estimate, said so with `~`)."""
    age = duration(elapsed)
    if done <= 0 or elapsed <= 0:
        return f"{age} in flight, no request finished yet"
    if done >= total:
        return f"{age} in flight, all finished"
    rate = done / elapsed
    shown = f"{rate:,.1f} req/s" if rate >= 1 else f"{rate * 60:,.1f} req/min"
    return f"{age} in flight, {shown}, ~{duration((total - done) / rate)} left"


def duration(seconds: float) -> str:
    """`42s`, `7m05s`, `3h12m`: a span as a person reads it."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def say_rebuilt(paths: list[str]) -> None:
    """What `submit` did with request files edited by hand: they were compiled again, the edits not sent."""
    if paths:
        say(
            f"Request file(s) changed on disk since compiling: {', '.join(paths)}. Nothing of their wave had been "
            "sent, so it was compiled again from the workspace's records and sent as compiled; the edits were not "
            "sent. To change what is asked, change the run's settings or prompts and `prepare` again."
        )


def progress_printer(
    root: Path | None = None, verbose: bool = False
) -> Callable[[AdvanceResult, dict[str, int]], None]:
    """One bar per wave over its requests' provider counts, led by the whole study's progress (its
    threads finished of all of them), and a summary line per step; housekeeping (compacting
    finished waves) only with `verbose`. A tqdm bar on a terminal, plain lines in a log or a pipe
    (`util.progress.bar`)."""
    from lexpilot_batch.util.progress import Bar, bar

    state: dict[str, Any] = {"bar": None, "wave": None, "manual": set(), "unresolved": set()}

    def close_bar() -> None:
        if state["bar"] is not None:
            state["bar"].close()
            state["bar"] = None
            state["wave"] = None  # a later round of the same wave opens a fresh bar

    def on_round(outcome: AdvanceResult, left: dict[str, int]) -> None:
        poll = outcome.poll
        if poll.batches:
            wave = poll.batches[0]["wave"]
            total = sum((b["counts"] or {}).get("total") or b["requests"] for b in poll.batches)
            done = sum(
                (b["counts"] or {}).get("completed", 0) + (b["counts"] or {}).get("failed", 0) for b in poll.batches
            )
            elapsed = max(b["elapsed"] for b in poll.batches)
            # The whole study's progress leads the wave's bar: threads no longer active of all of them.
            whole = left.get("threads", 0)
            study = f"study {whole - left.get('active_threads', 0)}/{whole} threads · " if whole else ""
            if state["wave"] != wave:
                close_bar()
                # No tqdm rate: it divides the provider's counts, which jump, by the moments between
                # two polls (`3973551.16req/s`); `pace` reads them against the batches' own age.
                state["bar"] = bar(
                    total=total,
                    desc=f"{study}wave {wave}",
                    unit="req",
                    dynamic_ncols=True,
                    bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} req{postfix}",
                )
                state["wave"] = wave
            shown = state["bar"]
            shown.set_description_str(f"{study}wave {wave}", refresh=False)
            shown.total = total
            shown.n = done
            statuses = ", ".join(f"{b['path'].rsplit('/', 1)[-1].split('__')[0]}:{b['status']}" for b in poll.batches)
            # A batch's status is the provider's word: printed only as `printable` makes it.
            shown.set_postfix_str(printable(f"[{pace(done, total, elapsed)}] {statuses}"), refresh=False)
            shown.refresh()
        stats = poll.stats

        def note(text: str) -> None:  # a line above the bar, as `printable` makes it
            Bar.write(printable(text))

        if poll.finished:
            close_bar()
            note(
                f"Ingested {len(poll.finished)} file(s): {stats.answered} answered, {stats.failed} failed"
                + (f", {stats.missing} missing" if stats.missing else "")
                + (f", {len(stats.anomalies)} anomalies" if stats.anomalies else "")
            )
            for a in stats.anomalies[:5]:
                note(f"    {terminal_safe(a)}")  # one line each, whatever the line quoted
        compiled = outcome.compiled
        if compiled is not None and compiled.compiled:
            synced = (
                f", {len(compiled.tail_sync_files)} at once, through sync or flex" if compiled.tail_sync_files else ""
            )
            note(
                f"Wave {compiled.wave}: {compiled.requests} requests compiled in {len(compiled.files)} file(s)"
                f"{synced}; {compiled.done} threads finished, {compiled.failed} failed."
            )
        elif compiled is not None and (compiled.done or compiled.failed):
            note(f"{compiled.done} threads finished, {compiled.failed} failed.")
        packed = outcome.compacted
        if verbose and packed is not None and packed.files:
            note(
                f"Compacted {packed.files} file(s) of finished waves: {packed.bytes / 2**20:,.1f} MB -> "
                f"{packed.stored_bytes / 2**20:,.1f} MB (gzip)."
            )
        for path in poll.cancelled:
            note(
                f"Cancelled {path}: older than --max-wave-age or the --hedge deadline; its unfinished requests go to the next wave."
            )
        if outcome.submitted is not None and outcome.submitted.rebuilt:
            close_bar()
            say_rebuilt(outcome.submitted.rebuilt)
        for why in outcome.submitted.unresolved if outcome.submitted is not None else ():
            if why not in state["unresolved"]:  # said once: the wait may take a while
                state["unresolved"].add(why)
                note(f"Waiting: {why}.")
        new_manual = [p for p in poll.manual if p not in state["manual"]]
        if new_manual:
            state["manual"].update(new_manual)
            close_bar()
            say_manual(new_manual, root)
        if left["in_flight"] == 0:
            close_bar()

    return on_round
