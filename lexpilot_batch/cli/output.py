"""What the commands that run a study print: a compiled wave, files left to the user, progress."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from lexpilot_batch.workspace import command_hint, shell_word

if TYPE_CHECKING:
    from lexpilot_batch.engine import AdvanceResult, Outage, PrepareResult


def say_prepared(result: PrepareResult, root: Path | None = None) -> None:
    compiled = result.compiled
    models = f" of {', '.join(result.models)}" if len(result.models) > 1 else ""
    typer.echo(f"Runs: {', '.join(result.runs)}{models}; new threads: {result.new_threads}.")
    if compiled.in_flight:
        typer.echo("A wave is under way; new work joins the next wave (run poll-and-advance).")
    elif compiled.compiled:
        typer.echo(f"Wave {compiled.wave}: {compiled.requests} requests in {len(compiled.files)} file(s):")
        for path in compiled.files:
            typer.echo(f"  {path}" + ("  (sync: --tail-sync)" if path in compiled.tail_sync_files else ""))
    else:
        typer.echo("Nothing is due: every thread of these runs is finished.")
    say_manual(result.compiled.manual_files, root)


def say_manual(paths: list[str], root: Path | None = None) -> None:
    """Tell the user exactly how to run files left to them (the `manual` backend); with a `--root`,
    the paths are given under it, so that the commands run as printed from where the user is."""
    if not paths:
        return
    typer.echo("\nThese files are yours to run (manual backend), e.g. with vLLM on a local model:")
    for path in paths:
        out = path.replace("requests/", "responses/", 1).replace(".jsonl", ".output.jsonl")
        if root is not None:
            path, out = (shell_word(Path(root, p).as_posix()) for p in (path, out))
        typer.echo(f"  python -m vllm.entrypoints.openai.run_batch -i {path} -o {out} --model MODEL")
        typer.echo(f"  {command_hint(f'ingest {out}', root)}")
    typer.echo("(or upload them in your provider's console and ingest the output and error files it gives you)")


def say_outage(outage: Outage) -> None:
    """A round of `--wait` the provider failed, and when the next one comes."""
    typer.echo(
        f"The provider failed this round ({outage.failures} in a row): {outage.error}. Trying again in "
        f"{outage.pause:.0f} s ({outage.left:.0f} s of --outage-wait left after that).",
        err=True,
    )


def progress_printer(root: Path | None = None) -> Callable[[AdvanceResult, dict[str, int]], None]:
    """One tqdm bar per wave over its requests' provider counts, and a summary line per step."""
    from tqdm import tqdm

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
            if state["wave"] != wave:
                close_bar()
                state["bar"] = tqdm(total=total, desc=f"wave {wave}", unit="req", dynamic_ncols=True)
                state["wave"] = wave
            bar = state["bar"]
            bar.total = total
            bar.n = done
            statuses = ", ".join(f"{b['path'].rsplit('/', 1)[-1].split('__')[0]}:{b['status']}" for b in poll.batches)
            bar.set_postfix_str(f"{statuses} ({max(b['elapsed'] for b in poll.batches):.0f}s)")
            bar.refresh()
        stats = poll.stats
        say = tqdm.write
        if poll.finished:
            close_bar()
            say(
                f"Ingested {len(poll.finished)} file(s): {stats.answered} answered, {stats.failed} failed"
                + (f", {stats.missing} missing" if stats.missing else "")
                + (f", {len(stats.anomalies)} anomalies" if stats.anomalies else "")
            )
            for a in stats.anomalies[:5]:
                say(f"    {a}")
        compiled = outcome.compiled
        if compiled is not None and compiled.compiled:
            synced = f", {len(compiled.tail_sync_files)} through sync (--tail-sync)" if compiled.tail_sync_files else ""
            say(
                f"Wave {compiled.wave}: {compiled.requests} requests compiled in {len(compiled.files)} file(s)"
                f"{synced}; {compiled.done} threads finished, {compiled.failed} failed."
            )
        elif compiled is not None and (compiled.done or compiled.failed):
            say(f"{compiled.done} threads finished, {compiled.failed} failed.")
        packed = outcome.compacted
        if packed is not None and packed.files:
            say(
                f"Compacted {packed.files} file(s) of finished waves: {packed.bytes / 2**20:,.1f} MB -> "
                f"{packed.stored_bytes / 2**20:,.1f} MB (gzip)."
            )
        for path in poll.cancelled:
            say(f"Cancelled {path}: older than --max-wave-age; its unfinished requests go to the next wave.")
        for why in outcome.submitted.unresolved if outcome.submitted is not None else ():
            if why not in state["unresolved"]:  # said once: the wait may take a while
                state["unresolved"].add(why)
                say(f"Waiting: {why}.")
        new_manual = [p for p in poll.manual if p not in state["manual"]]
        if new_manual:
            state["manual"].update(new_manual)
            close_bar()
            say_manual(new_manual, root)
        if left["in_flight"] == 0:
            close_bar()

    return on_round
