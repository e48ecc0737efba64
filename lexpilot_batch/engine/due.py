"""The due-step and retry policy: what one compile asks next for a (run, case), pure, no SQL or I/O.

A thread is one task of one case of one run; its protocol says which steps are due. Here it is
decided which of those are requested now, which step is out of attempts, and when a thread fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lexpilot_batch.benchmark.protocols import PROTOCOLS
from lexpilot_batch.benchmark.protocols.base import Advance, Answer, CaseContext, Protocol, Step
from lexpilot_batch.engine.answers import INVALID, PERMANENT, REFUSAL, TRANSPORT, UNEXECUTED
from lexpilot_batch.state.states import RequestState

# Malformed, truncated or filtered content gets this many attempts whatever --retries says
# (SPEC §6); so do refusals.
INVALID_ATTEMPTS = 3
# Requests a batch never ran (expired, cancelled, lost by the provider, HTTP 429) are not failures
# of theirs and do not use up --retries; this bound only stops a provider that never runs them
# from looping.
UNEXECUTED_ATTEMPTS = 10
# A request the provider refused as such (a 4xx such as context_length_exceeded) fails its thread
# at once: sending it again cannot pass.
PERMANENT_ATTEMPTS = 1


@dataclass
class CaseDue:
    """What one compile decides for one (run, case)."""

    steps: list[Step] = field(default_factory=list)  # to request now, one per key, none out of attempts
    finished: list[tuple[tuple[Any, str, str], dict]] = field(default_factory=list)  # (thread, record)
    failed: list[tuple[tuple[Any, str, str], str]] = field(default_factory=list)  # (thread, reason)
    active: list[tuple[Any, str, str]] = field(default_factory=list)  # threads still waiting
    unused: set[str] = field(default_factory=set)  # speculative steps nobody will read


def due_for_case(
    ctx: CaseContext,
    threads: list[tuple[Any, str, str]],
    answers: dict[str, Answer],
    history: dict[str, list],
    retries: int,
    fresh_after: Mapping[Any, int] | None = None,
) -> CaseDue:
    """Advance the threads `(handle, task, variant)` of one (run, case): pure, no I/O.

    Steps shared by several threads (Interaction LJP's round 1 is LCA's) are requested once. A
    step out of attempts fails a thread only once nothing else can move it: a speculative reply
    that ran out may turn out not to be needed at all. `fresh_after` maps a thread's handle to the
    wave after which its attempts count (`lexpilot-batch retry` gave it fresh ones).
    """
    out = CaseDue()
    requested: set[str] = set()
    for thread in threads:
        protocol = PROTOCOLS[thread[1]]
        advance = protocol.advance(ctx, thread[2], answers)
        _check_reads(protocol, thread[2], advance)
        out.unused |= advance.unused
        if advance.record is not None:
            out.finished.append((thread, advance.record))
            continue
        fresh, failures = [], []
        since = fresh_after.get(thread[0], 0) if fresh_after else 0
        for step in advance.due:
            attempts = history.get(step.key, [])
            if since:
                attempts = [a for a in attempts if a["wave"] > since]
            why = exhausted(attempts, retries)
            if why is not None:
                failures.append(f"{step.key} {why}")
            elif step.key not in requested:
                fresh.append(step)
        if failures and len(failures) == len(advance.due):
            out.failed.append((thread, "; ".join(failures)))
            continue
        out.active.append(thread)
        for step in fresh:
            requested.add(step.key)
            out.steps.append(step)
    return out


def _check_reads(protocol: Protocol, variant: str, advance: Advance) -> None:
    """A step outside `reads` would be requested again every wave: its answers are never loaded."""
    if not advance.due and not advance.unused:
        return
    reads = protocol.reads(variant)
    for key in [step.key for step in advance.due] + list(advance.unused):
        if not key.startswith(reads):
            raise RuntimeError(
                f"the {protocol.task} protocol asks for step {key!r}, outside the steps it reads {reads}"
            )


def exhausted(attempts: list, retries: int) -> str | None:
    """Why a step may not be tried again, or None. Pending or answered steps are never due.

    Each kind of failure (`answers`) has its own budget: a step is out of attempts when any one
    kind has used up its own.
    """
    if not attempts:
        return None
    failed = [a for a in attempts if a["status"] == RequestState.FAILED]

    def of(*kinds: str) -> list:
        return [a for a in failed if a["error_kind"] in kinds]

    permanent = of(PERMANENT)
    if len(permanent) >= PERMANENT_ATTEMPTS:
        return f"refused by the provider, which no retry can change: {permanent[-1]['error']}"
    transport = of(TRANSPORT)
    if len(transport) >= retries:
        times = f"{len(transport)} time{'' if len(transport) == 1 else 's'}"
        return f"failed {times} at the provider (--retries {retries}); last: {transport[-1]['error']}"
    invalid = of(INVALID, REFUSAL)
    if len(invalid) >= INVALID_ATTEMPTS:
        what = "refused by the model" if invalid[-1]["error_kind"] == REFUSAL else "unusable output"
        return f"{what} {len(invalid)} times; last: {invalid[-1]['error']}"
    unexecuted = of(UNEXECUTED)
    if len(unexecuted) >= UNEXECUTED_ATTEMPTS:
        return (
            f"never run in {len(unexecuted)} batches (expired, cancelled, lost or rate-limited); "
            f"last: {unexecuted[-1]['error']}"
        )
    return None
