"""What `doctor` says of other copies of the workspace (`state.instances`): their batches left
alone, those of a copy this folder cannot be told from, and this workspace's own batches someone
else cancelled (`engine.sweep`). Reads only."""

from __future__ import annotations

from lexpilot_batch.doctor.findings import (
    CANCELLED_ELSEWHERE,
    OTHER_COPY_BATCHES,
    UNTOLD_COPY_BATCHES,
    Finding,
)
from lexpilot_batch.state.waves import OTHER_COPY, UNTOLD_COPY, cancelled_unasked
from lexpilot_batch.state.workspace import Workspace


def other_copies(ws: Workspace) -> list[Finding]:
    """Batches another copy of this workspace made for its files (`state.instances`), left alone;
    those of a copy that carries this folder's own instance; this workspace's own batches that
    someone else cancelled (`engine.sweep`)."""
    db = ws.store.conn
    rows = db.execute("SELECT path FROM other_batches WHERE why = ? ORDER BY at", (OTHER_COPY,)).fetchall()
    untold = db.execute("SELECT path FROM other_batches WHERE why = ? ORDER BY at", (UNTOLD_COPY,)).fetchall()
    cancelled = cancelled_unasked(db)
    claim = ws.command("doctor --claim-copy")
    findings = []
    if cancelled:
        findings.append(
            Finding(
                CANCELLED_ELSEWHERE,
                f"{len(cancelled)} of this workspace's own batches were cancelled at the provider, not by this "
                f"workspace (it cancels its own only past --max-wave-age or the --hedge deadline, or by `cancel`), e.g. that of {cancelled[0]}: by another "
                "copy of the workspace (one running an earlier version, or one it cannot be told from), or in the "
                "provider's console. What they finished was kept; the rest is asked again in a later wave",
                "if another copy of this folder runs, stop it, or run this version in both and "
                f"`{claim}` in the one that is the copy: copies then leave each other's batches alone",
                False,
                "warning",
                tuple(cancelled),
            )
        )
    if untold:
        findings.append(
            Finding(
                UNTOLD_COPY_BATCHES,
                f"{len(untold)} batch(es) at the provider for this workspace's files carry this folder's own "
                f"instance but are none of its own, e.g. for {untold[0]['path']}: another copy of this folder runs "
                "that could not be told from it (a cloned machine, a copy put in its place while it runs "
                "elsewhere). Left alone; but after a create whose answer is lost, either copy could take the "
                "other's batch for its own",
                f"run `{claim}` in the folder that is the copy: it gets an instance of its own",
                False,
                "warning",
                tuple(sorted({r["path"] for r in untold})),
            )
        )
    if rows:
        findings.append(
            Finding(
                OTHER_COPY_BATCHES,
                f"{len(rows)} batch(es) at the provider were made for this workspace's files by another copy of "
                f"it (a copied folder, a backup restored beside it, running too), e.g. for {rows[0]['path']}: "
                "left alone, neither cancelled nor applied here",
                "nothing to repair: each copy pays for its own batches. To pay once, run one copy only; a backup "
                "belongs in the original's folder, where it is the same copy and adopts what the original sent",
                False,
                "info",
                tuple(sorted({r["path"] for r in rows})),
            )
        )
    return findings
