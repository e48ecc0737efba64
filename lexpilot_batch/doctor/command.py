"""The `lexpilot-batch doctor [--repair]` command: diagnose, repair, and render what was found and done."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lexpilot_batch.doctor.diagnosis import diagnose, schema_blockers
from lexpilot_batch.doctor.findings import DOWNLOAD_HELD, SEVERITIES, DoctorReport, Finding
from lexpilot_batch.doctor.repairs import repair
from lexpilot_batch.errors import LexpilotError, ReadOnlyWorkspace, WorkspaceBusy
from lexpilot_batch.state.queries import snapshot
from lexpilot_batch.state.store import DB_NAME, open_for_reading
from lexpilot_batch.state.workspace import Workspace, command_hint

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import ProviderOptions


def check(
    root: Path | None = None,
    do_repair: bool = False,
    options: ProviderOptions | None = None,
    deep: bool = False,
    accept_damaged: bool = False,
    claim_copy: bool = False,
) -> DoctorReport:
    """`lexpilot-batch doctor [--repair [--accept-damaged]] [--deep] [--claim-copy]`: diagnose (and
    repair) the workspace at `root`; `deep` also reads every compacted file back
    (`diagnosis.diagnose`); `accept_damaged` ingests held batches' damaged results as they are
    (`repairs.repair`); `claim_copy` first makes this folder a copy of its own
    (`state.instances.claim_copy`).

    Holds the writer lock throughout, so no other command changes the workspace under it. While
    another command holds it, the diagnosis still runs, read-only, on one committed state (a
    snapshot of the database, `queries.snapshot`) and says so (`DoctorReport.writer_running`);
    `do_repair` is then refused, clearly, since a repair needs the workspace to itself. A database written by a newer
    version is reported, never opened for writing.
    """
    from lexpilot_batch.engine.session import ProviderOptions as Options
    from lexpilot_batch.engine.session import Session

    base = Path(root if root is not None else Path.cwd()).resolve()
    db_path = base / "state" / DB_NAME
    if not db_path.is_file():
        raise LexpilotError(f"{base}: no lexpilot-batch workspace here (no state/{DB_NAME}); pass --root")
    raw = open_for_reading(db_path)
    try:
        early = schema_blockers(raw)
    finally:
        raw.close()
    if early:
        return DoctorReport(early, [], early)
    with _opened(root, do_repair or claim_copy) as (ws, writer_running):
        if writer_running:
            with snapshot(ws.store.conn):
                found = diagnose(ws, deep)
            return DoctorReport(found, [], found, writer_running=True)
        claimed = _claim_copy(ws) if claim_copy else None
        found = diagnose(ws, deep)
        accepting = accept_damaged and any(f.kind == DOWNLOAD_HELD for f in found)
        if not do_repair or not (accepting or any(f.repairable for f in found)):
            return DoctorReport(found, [], found, claimed=claimed)
        session = Session(ws, options or Options())
        try:
            done = repair(ws, found, session, accept_damaged)
        finally:
            session.close()
        return DoctorReport(found, done, diagnose(ws, deep), claimed=claimed)


def _claim_copy(ws: Workspace) -> str:
    """This folder is a copy the workspace could not tell (a clone of a whole machine, a copy put in
    the original's place while the original runs elsewhere): an instance of its own, said in words."""
    was, now = ws.claim_copy()
    return (
        f"This folder is now a copy of its own (instance {now}, was {was or 'none'}): the batches it creates from "
        "now on carry it, and the other copy's are left alone here, never cancelled or adopted"
    )


@contextlib.contextmanager
def _opened(root: Path | None, do_repair: bool) -> Iterator[tuple[Workspace, bool]]:
    """The workspace with its writer lock, and False; without it when it is read-only and only
    checked (an archive: nothing can change it under us), and False; without it while another
    command holds it and it is only checked, and True (`check`)."""
    writer_running = False
    try:
        ws = Workspace(root, create=False).__enter__()
    except ReadOnlyWorkspace:
        if do_repair:
            raise
        ws = Workspace(root, writable=False).__enter__()
    except WorkspaceBusy as busy:
        if do_repair:
            raise WorkspaceBusy(
                f"{busy}. `doctor --repair` needs the workspace to itself; "
                f"`{command_hint('doctor', root)}` (without --repair) diagnoses it now, read-only"
            ) from None
        ws = Workspace(root, writable=False).__enter__()
        writer_running = True
    try:
        yield ws, writer_running
    finally:
        ws.__exit__()


WRITER_RUNNING = (
    "Another lexpilot-batch command is writing to this workspace: this diagnosis read its last "
    "committed state without the writer's lock, and what that command is doing now may show as a "
    "finding. `{repair}` needs the lock: run it (or doctor again) once that command has finished."
)


def render(findings: list[Finding], root: Path | None = None) -> str:
    """The findings for the terminal: kind, what and where, what to do (hints repeat `root`)."""
    if not findings:
        return "No problems found."
    counts = Counter(f.severity for f in findings)
    head = ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s])
    lines = [f"{len(findings)} finding(s): {head}"]
    for i, f in enumerate(findings, 1):
        lines.append(f"\n{i}. [{f.severity}] {f.kind}: {f.detail}")
        lines.append(f"   what to do: {f.fix}")
        if f.repairable:
            lines.append(f"   `{command_hint('doctor --repair', root)}` does this.")
    return "\n".join(lines)


def render_report(report: DoctorReport, root: Path | None = None) -> str:
    """What `doctor` prints: the findings, and after `--repair` what was done and what is left;
    first, when another command was writing, that this was a read-only diagnosis, or what
    `--claim-copy` made of the folder."""
    if report.writer_running:
        note = WRITER_RUNNING.format(repair=command_hint("doctor --repair", root))
        return note + "\n\n" + render(report.found, root)
    head = [report.claimed, ""] if report.claimed else []
    if not report.repaired:
        return "\n".join([*head, render(report.found, root)])
    lines = [*head, "Repaired:", *(f"  - {line}" for line in report.repaired), ""]
    lines.append("After repair: " + render(report.remaining, root))
    return "\n".join(lines)
