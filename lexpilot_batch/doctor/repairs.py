"""Repairs: mending what `diagnose` found, each repair in one transaction, never needing a provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lexpilot_batch.doctor.diagnosis import manifest_findings
from lexpilot_batch.doctor.findings import (
    BATCH_LOST,
    MANIFEST,
    PENDING_IN_INGESTED,
    RESULT_DAMAGED,
    RESULT_MISSING,
    UNSENT_CHANGED,
    Finding,
)
from lexpilot_batch.engine.compiler import compile_wave
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.state.requests import fail_pending_of_file
from lexpilot_batch.state.waves import (
    DOWNLOADED,
    INGESTED,
    SUBMITTED,
    discard_unsent_file,
    discard_unsent_wave,
    file_at,
    forget_results,
    lost_reason,
    mark_lost,
    target_wave,
    unsent,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import load_runs, manifest_path, write_manifest_file
from lexpilot_batch.util import fileio
from lexpilot_batch.util.fileio import file_sha256

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session

PENDING_FAILED = "left pending in an ingested file; failed by `lexpilot-batch doctor --repair`"


def repair(ws: Workspace, findings: list[Finding], session: Session | None = None) -> list[str]:
    """Mend every repairable finding that still holds; returns what was done, one line each.

    With a `session`, a discarded unsent wave is compiled again at once with its endpoints and
    limits; without one, the next `poll-and-advance` compiles it.
    """
    if not ws.writable:
        raise LexpilotError("doctor --repair needs the workspace's writer lock; open it writable")
    done: list[str] = []
    wanted = [f for f in findings if f.repairable]
    changed = sorted({t for f in wanted if f.kind == UNSENT_CHANGED for t in f.targets})
    if changed:
        done += _discard_unsent(ws, changed, session)
    for target in sorted({t for f in wanted if f.kind in (RESULT_MISSING, RESULT_DAMAGED) for t in f.targets}):
        done += _forget_results(ws, target)
    for target in sorted({t for f in wanted if f.kind == PENDING_IN_INGESTED for t in f.targets}):
        done += _fail_pending(ws, target)
    for target in sorted({t for f in wanted if f.kind == BATCH_LOST for t in f.targets}):
        done += _declare_lost(ws, target)
    if any(f.kind == MANIFEST for f in wanted):
        done += _rewrite_manifests(ws)
    return done


def _declare_lost(ws: Workspace, rel: str) -> list[str]:
    with ws.store.transaction() as tx:
        row = file_at(tx, rel)
        if row is None or row["status"] != SUBMITTED or not row["not_found"]:
            return []
        assert row["batch_id"] is not None  # a submitted file's
        n = mark_lost(tx, row["pk"], lost_reason(row["batch_id"], "HTTP 404; declared lost by `doctor --repair`"))
    return [
        f"{rel}: batch {row['batch_id']} declared lost; its {n} unanswered request(s) are sent again in the next wave"
    ]


def _discard_unsent(ws: Workspace, paths: list[str], session: Session | None) -> list[str]:
    db = ws.store.conn
    rows = []
    for rel in paths:
        row = file_at(db, rel)
        # Check again: the file may have been restored, or sent, since the diagnosis.
        if row is not None and unsent(row) and file_sha256(ws.path(rel)) != row["sha256"]:
            rows.append(row)
    done = []
    recompile = False
    for wave in sorted({r["wave"] for r in rows}):
        if target_wave(db) == (wave, True):
            # Nothing of the wave has left: drop all of it, so that it is compiled again whole, into
            # the same wave, exactly as it was (compiling is deterministic).
            with ws.store.transaction() as tx:
                files = discard_unsent_wave(tx, wave)
            for rel in files:
                _set_aside(ws, rel, "discarded")
            done.append(f"discarded unsent wave {wave} ({len(files)} file(s)); it is compiled again from the database")
            recompile = True
        else:
            for row in (r for r in rows if r["wave"] == wave):
                with ws.store.transaction() as tx:
                    discard_unsent_file(tx, row["pk"])
                _set_aside(ws, row["path"], "discarded")
                if row["output_path"]:  # a sync file run in part: those answers go with it
                    _set_aside(ws, row["output_path"], "discarded")
                done.append(
                    f"discarded {row['path']}: its {row['n_requests']} requests are asked again in the next wave"
                )
    if recompile and session is not None:
        result = compile_wave(ws, session.route, session.options.retries, session.tail_policy())
        if result.compiled:
            done.append(f"compiled wave {result.wave} again: {result.requests} requests in {len(result.files)} file(s)")
    return done


def _forget_results(ws: Workspace, rel: str) -> list[str]:
    row = file_at(ws.store.conn, rel)
    if row is None or row["status"] != DOWNLOADED:
        return []
    # Damaged files are set aside before the database forgets them, so a sync run never resumes from one.
    for saved in (row["output_path"], row["error_path"]):
        if saved and ws.path(saved).exists():
            _set_aside(ws, saved, "damaged")
    with ws.store.transaction() as tx:
        forget_results(tx, row["pk"])
    return [f"{rel}: forgot its saved results; the next poll-and-advance downloads them again"]


def _fail_pending(ws: Workspace, rel: str) -> list[str]:
    with ws.store.transaction() as tx:
        row = file_at(tx, rel)
        if row is None or row["status"] != INGESTED:
            return []
        # No error_kind: `engine.due.exhausted` counts only transport and invalid failures, and this
        # one is neither, exactly as the compiler treats a request still pending when it runs.
        n = fail_pending_of_file(tx, row["pk"], PENDING_FAILED, None)
    return [f"{rel}: failed {n} request(s) left pending"] if n else []


def _rewrite_manifests(ws: Workspace) -> list[str]:
    done = []
    for finding in manifest_findings(ws):
        for run in load_runs(ws):
            if ws.relative(manifest_path(ws, run.run_id, run.model)) in finding.targets:
                write_manifest_file(ws, run)
                done.append(f"rewrote {finding.targets[0]} from the database")
    return done


def _set_aside(ws: Workspace, rel: str, why: str) -> None:
    """Keep a file the workspace no longer uses beside it (`NAME.why`), out of every glob of *.jsonl."""
    path = ws.path(rel)
    if path.exists():
        fileio.replace(path, path.with_name(f"{path.name}.{why}"))
