"""The wave engine: where protocols (what to ask) meet providers (how to send it).

`prepare` registers runs and compiles the open wave; `submit` sends compiled files;
`poll_and_advance` polls, saves, ingests, advances every thread and compiles the next wave.
All runs, tasks and models of a workspace move together, one wave at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.data import open_dataset
from lexpilot_batch.engine.compiler import CompileResult, compile_wave
from lexpilot_batch.engine.hedge import max_age
from lexpilot_batch.engine.poll import PollResult, poll_files
from lexpilot_batch.engine.rearm import RetryResult, RetrySelection, retry_failed
from lexpilot_batch.engine.session import Session
from lexpilot_batch.engine.submit import SubmitResult, TamperedFile, submit_files
from lexpilot_batch.errors import ProviderUnavailable
from lexpilot_batch.providers.backends import SIMULATED
from lexpilot_batch.providers.prices import refuse_misspelt_prices
from lexpilot_batch.state.compaction import CompactStats
from lexpilot_batch.state.waves import check_compiled_files, close_finished_waves, latest_wave_started, work_left
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.choices_memory import with_categories_named, with_remembered_choices
from lexpilot_batch.study.dataset_memory import refuse_if_changed, with_remembered_dataset
from lexpilot_batch.study.lineup import not_applied_notes, plan_runs
from lexpilot_batch.study.price_memory import study_models
from lexpilot_batch.study.runs import RunSpec, add_threads, check_run_id, protocol_variants, register_run
from lexpilot_batch.util import clock
from lexpilot_batch.util.text import counted


@dataclass
class PrepareResult:
    runs: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)  # the evaluated models, as registered
    new_threads: int = 0
    compiled: CompileResult = field(default_factory=CompileResult)
    notes: list[str] = field(default_factory=list)  # what the user should know of how it was read
    # (role, model, where its requests go) of every role of every evaluated model, each once
    lineup: list[tuple[str, str, str]] = field(default_factory=list)


def prepare(ws: Workspace, session: Session, spec: RunSpec) -> PrepareResult:
    """Register each run of `spec` (every run id of every evaluated model), create its threads for
    the stage, compile what is due.

    Every model's route and request body is decided first (`lineup.plan_runs`), so that a mistake
    is refused before anything is registered. The dataset is validated in one pass over the file
    that keeps no case in memory; its cases are read again only to copy them into a workspace that
    does not have them yet.
    """
    spec, note, remembered = with_remembered_dataset(ws.store.conn, spec)
    spec, choices = with_remembered_choices(ws.store.conn, spec)
    refuse_misspelt_prices(session.options.prices, study_models(ws, spec), "prepare")
    tasks = spec.tasks
    plans = plan_runs(spec, session)
    run_ids = [check_run_id(raw) for raw in spec.run_ids]
    dataset = with_categories_named(
        ws.store.conn, spec, lambda: open_dataset(spec.dataset, spec.categories, variants=protocol_variants(tasks))
    )
    refuse_if_changed(ws.store.conn, remembered, dataset)
    templates = prompts.load_templates(spec.prompts)
    result = PrepareResult(notes=([note] if note else []) + choices + not_applied_notes(plans, spec.settings))
    if spec.limit is not None and spec.limit > len(dataset):
        result.notes.append(
            f"--limit {spec.limit}: the dataset has only {counted(len(dataset), 'case')}, so all are used."
        )
    for plan in plans:
        result.models.append(plan.model)
        for role in plan.requests:
            line = (role, plan.settings.model_for(role, plan.model), plan.destinations.get(role, plan.endpoints[role]))
            if line not in result.lineup:
                result.lineup.append(line)
        for run_id in run_ids:
            run = register_run(ws, run_id, plan, dataset, spec.limit, templates, spec.speculate)
            result.new_threads += add_threads(ws, run, tasks, dataset)
            if run_id not in result.runs:
                result.runs.append(run_id)
    session.remember()
    result.compiled = _compile(ws, session)
    return result


def _compile(ws: Workspace, session: Session) -> CompileResult:
    """Compile what is due into the open wave, as this command's session says (routes, --retries,
    --tail-sync)."""
    return compile_wave(ws, session.route, session.options.retries, session.tail_policy(), session.settled)


def retry(ws: Workspace, session: Session, selection: RetrySelection) -> tuple[RetryResult, CompileResult]:
    """Make the selected failed threads due again (`retry`) and, unless a wave is under way,
    compile their requests at once, as `prepare` compiles new threads'."""
    result = retry_failed(ws, selection)
    compiled = _compile(ws, session) if result.threads else CompileResult()
    return result, compiled


def submit(ws: Workspace, session: Session, on_file: Callable[[str], None] | None = None) -> SubmitResult:
    rebuilt = _ensure_intact(ws, session)
    result = submit_files(ws, session, on_file)
    result.rebuilt = rebuilt
    if result.discarded:
        # Files larger than a lowered enqueued-token budget were discarded: their requests are
        # compiled again, cut to the budget, as soon as their wave allows (at once when nothing
        # else of it was sent), and sent.
        close_finished_waves(ws)
        if _compile(ws, session).compiled:
            again = submit_files(ws, session, on_file)
            for name in ("submitted", "adopted", "manual", "waiting", "discarded", "unresolved"):
                getattr(result, name).extend(getattr(again, name))
    return result


def _ensure_intact(ws: Workspace, session: Session) -> list[str]:
    """Compiled files must be what the database says; a wave not yet sent is simply recompiled.
    Returns the files that were changed on disk (and so compiled again)."""
    bad = check_compiled_files(ws)
    if not bad:
        return []
    if latest_wave_started(ws.store.conn):
        raise TamperedFile(
            f"request file(s) changed on disk after compiling: {', '.join(bad)}; part of this wave is already "
            f"submitted or answered, so they cannot be rebuilt safely — restore them or run `{ws.command('doctor')}`"
        )
    _compile(ws, session)
    return bad


@dataclass
class AdvanceResult:
    poll: PollResult
    compiled: CompileResult | None
    submitted: SubmitResult | None
    compacted: CompactStats | None = None


def poll_and_advance_once(ws: Workspace, session: Session, do_submit: bool, compact: bool = True) -> AdvanceResult:
    submitted = submit(ws, session) if do_submit else None
    poll = poll_files(ws, session, max_age(ws.store.conn, session.options.hedge, session.options.max_wave_age))
    compiled = None
    if poll.in_flight == 0:
        compiled = _compile(ws, session)
    # What this poll finished made room under enqueued-token budgets: files of the wave that
    # waited for it go now, as do the files of a new wave.
    if do_submit and ((compiled is not None and compiled.compiled) or poll.finished or poll.refused or poll.lost):
        submitted = submit(ws, session)
    # Last, while the next wave's batches run: the finished waves' files are not read again. They
    # are compressed on a worker thread (`compaction.Compactor`), off the critical path; what it
    # packed since the last round is recorded now, the rest when the session closes.
    compacted = session.compactor().run() if compact else None
    return AdvanceResult(poll, compiled, submitted, compacted)


# `--wait` rides out an outage: a round that fails with `ProviderUnavailable` (unreachable, timed
# out, 5xx or 429 after the SDK's retries) is tried again after a pause that doubles from the poll
# interval up to `OUTAGE_PAUSE_MAX` seconds, until the outage has lasted
# `ProviderOptions.outage_wait` seconds (`--outage-wait`), counted from its first refusal; then
# the command stops, saying that nothing was lost. The waits inside a round for a provider that
# refuses (a 429's retry-after before a create is sent again, a lost create looked for) are kept
# within the same budget (`clock.provider_waits`), so that a provider refusing for good stops the
# command within `--outage-wait` and one pause, with or without `--wait`.
OUTAGE_PAUSE_MAX = 300.0


@dataclass(frozen=True)
class Outage:
    """A round that failed for the provider, and what the loop does next (for progress displays)."""

    error: ProviderUnavailable
    failures: int  # failed rounds in a row, this one included
    pause: float  # seconds until the next round
    left: float  # seconds of `--outage-wait` left after that pause


# The simulated provider answers in a fraction of a second: polling it every 30 s (the default,
# sized for real batches) would make a rehearsal wait for nothing.
SIMULATED_POLL_INTERVAL = 0.2


def poll_interval_for(session: Session, requested: float) -> float:
    """The seconds between polls: as requested, but at most `SIMULATED_POLL_INTERVAL` when every
    role is on the simulated provider (`--provider simulated`)."""
    return min(requested, SIMULATED_POLL_INTERVAL) if session.provider == SIMULATED else requested


def poll_and_advance(
    ws: Workspace,
    session: Session,
    *,
    do_submit: bool,
    wait: bool,
    poll_interval: float,
    on_round: Callable[[AdvanceResult, dict[str, int]], None] | None = None,
    on_outage: Callable[[Outage], None] | None = None,
    on_provider_wait: Callable[[clock.ProviderWait], None] | None = None,
    compact: bool = True,
) -> dict[str, int]:
    """One poll round, or with `wait` rounds until nothing is in flight or due.

    With `compact`, the files of finished waves are compressed (`compaction`). With `wait`, a
    provider outage is waited out for `--outage-wait` seconds: every round is a resumable step, so
    one that failed half-way is simply done again. With or without `wait`, the waits inside a
    round for a refusing provider end within that budget (`on_provider_wait` is told of each).
    """
    with clock.provider_waits(session.options.outage_wait, on_provider_wait) as waits:
        return _rounds(
            ws, session, waits, do_submit, wait, poll_interval_for(session, poll_interval), on_round, on_outage, compact
        )


def _rounds(
    ws: Workspace,
    session: Session,
    waits: clock.ProviderWaits,
    do_submit: bool,
    wait: bool,
    poll_interval: float,
    on_round: Callable[[AdvanceResult, dict[str, int]], None] | None,
    on_outage: Callable[[Outage], None] | None,
    compact: bool,
) -> dict[str, int]:
    failures = 0
    refused: ProviderUnavailable | None = None  # what the last failed round was refused
    while True:
        waits.round_begins()
        try:
            outcome = poll_and_advance_once(ws, session, do_submit, compact)
        except clock.OutOfTime as exc:
            # What was refused: the round before's error (this round's wait may only be a
            # consequence of it: a refused create's batch looked for), else what this one waited on.
            raise ProviderUnavailable(
                f"{refused or exc.why} (the provider has refused for {exc.waited:.0f} s, all that "
                f"--outage-wait allows ({exc.budget:.0f} s); a larger --outage-wait keeps trying longer)"
            ) from None
        except ProviderUnavailable as exc:
            refused = exc
            failures += 1
            now = time.monotonic()
            since = waits.began(now)
            left = session.options.outage_wait - (now - since)
            if not wait or left <= 0:
                if failures > 1:
                    raise ProviderUnavailable(
                        f"{exc} (the provider failed {failures} rounds in a row over {now - since:.0f} s; "
                        "--outage-wait sets how long to keep trying)"
                    ) from None
                raise
            wait_s = min(clock.Backoff(max(poll_interval, 0.05), OUTAGE_PAUSE_MAX).wait(failures - 1), left)
            if on_outage:
                on_outage(Outage(exc, failures, wait_s, left - wait_s))
            clock.pause(wait_s)
            continue
        failures, refused = 0, None
        waits.clear()
        left_work = work_left(ws)
        if on_round:
            on_round(outcome, left_work)
        if not wait:
            return left_work
        waiting = left_work["waiting_manual"] + left_work["held"]
        if left_work["in_flight"] == waiting and (left_work["unsubmitted"] == 0 or not do_submit):
            return left_work  # done, or only the user can move it on (manual files), or a later command (held)
        sent = outcome.submitted
        held = outcome.poll.off_peak
        if (
            held
            and outcome.poll.in_flight == len(held)
            and not (sent is not None and (sent.unresolved or sent.waiting))
        ):
            # Only files `--off-peak` holds: wait for the first window to open (`off_peak`).
            clock.pause(max(poll_interval, min(held.values()) - clock.now()))
        elif outcome.poll.in_flight or (sent is not None and (sent.unresolved or sent.waiting)):
            clock.pause(poll_interval)  # a file waiting for room (a quota refusal) is not re-sent in a tight loop
