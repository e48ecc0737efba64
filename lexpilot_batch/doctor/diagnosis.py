"""Diagnosis: every check `doctor` makes, reading the database and the files it names, changing nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from lexpilot_batch.doctor.findings import (
    ANOMALIES,
    BATCH_LOST,
    CANCELLED_ELSEWHERE,
    COMPACTED_DAMAGED,
    COMPACTED_MISSING,
    INTERRUPTED_SUBMIT,
    MANIFEST,
    OTHER_COPY_BATCHES,
    PENDING_IN_INGESTED,
    RESULT_DAMAGED,
    RESULT_MISSING,
    SCHEMA,
    SENT_CHANGED,
    SEVERITIES,
    THREADS_WAITING,
    UNSENT_CHANGED,
    UNTOLD_COPY_BATCHES,
    Finding,
)
from lexpilot_batch.engine.ingest import file_normaliser
from lexpilot_batch.engine.result_lines import result_lines
from lexpilot_batch.providers.results import Normalise
from lexpilot_batch.state.compaction import SUFFIX, missing, verify
from lexpilot_batch.state.states import RequestState, ThreadState
from lexpilot_batch.state.store import MIGRATIONS
from lexpilot_batch.state.waves import (
    CREATING,
    DOWNLOADED,
    INGESTED,
    LOST_AFTER,
    OPEN,
    OTHER_COPY,
    SUBMITTED,
    UNTOLD_COPY,
    UPLOADED,
    cancelled_unasked,
    files_in,
    has_open_files,
    target_wave,
    unsent,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import load_runs, manifest_path
from lexpilot_batch.util.fileio import file_sha256


def schema_blockers(db: sqlite3.Connection) -> list[Finding]:
    """What makes the database unsafe for this version to open: not ours, or written by a newer one."""
    try:
        done = {row[0] for row in db.execute("SELECT name FROM migrations")}
    except sqlite3.DatabaseError as exc:
        return [
            Finding(
                SCHEMA,
                f"the state database has no migrations table ({exc})",
                "this is not a lexpilot-batch workspace database; check --root",
                False,
            )
        ]
    unknown = sorted(done - {name for name, _ in MIGRATIONS})
    if not unknown:
        return []
    return [
        Finding(
            SCHEMA,
            f"the workspace database has migrations this version does not know ({', '.join(unknown)}): "
            "a newer lexpilot-batch wrote it",
            "upgrade lexpilot-batch (pip install -U lexpilot-batch) before using this workspace; "
            "this version must not write to it",
            False,
        )
    ]


def schema_findings(db: sqlite3.Connection) -> list[Finding]:
    """Migrations recorded that this version does not know, or known ones not applied."""
    blockers = schema_blockers(db)
    if blockers:
        return blockers
    done = {row[0] for row in db.execute("SELECT name FROM migrations")}
    missing = [name for name, _ in MIGRATIONS if name not in done]
    if not missing:
        return []
    return [
        Finding(
            SCHEMA,
            f"the workspace database lacks migrations {', '.join(missing)}",
            "open the workspace with any lexpilot-batch command: migrations are applied when it opens",
            False,
        )
    ]


def diagnose(ws: Workspace, deep: bool = False) -> list[Finding]:
    """Everything wrong or pending in the workspace, most serious kinds first. Changes nothing.
    `deep` also reads every compacted file back against the digest recorded when it was packed."""
    findings = [
        *schema_findings(ws.store.conn),
        *_request_files(ws),
        *_result_files(ws),
        *_pending_in_ingested(ws),
        *_interrupted_submits(ws),
        *_lost_batches(ws),
        *_other_copies(ws),
        *_waiting_threads(ws),
        *manifest_findings(ws),
        *_compacted_missing(ws),
        *(_compacted_damaged(ws) if deep else ()),
        *_anomalies(ws),
    ]
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))


def _request_files(ws: Workspace) -> list[Finding]:
    """Request files whose bytes are not what was compiled (ingested files are not read again)."""
    findings = []
    db = ws.store.conn
    open_wave = target_wave(db)
    for row in files_in(db, OPEN):
        actual = file_sha256(ws.path(row["path"]))
        if actual == row["sha256"]:
            continue
        what = (
            "is gone" if actual is None else f"changed on disk (sha256 {actual[:12]}…, compiled {row['sha256'][:12]}…)"
        )
        if unsent(row):
            if open_wave == (row["wave"], True):
                fix = (
                    f"discard wave {row['wave']} (nothing of it was sent); the next `{ws.command('poll-and-advance --submit')}` "
                    "compiles it again from the database, the same requests byte for byte. "
                    "`doctor --repair` discards it; `submit` also recompiles it by itself"
                )
            else:
                fix = (
                    f"part of wave {row['wave']} is already with the provider, so this file cannot be rebuilt "
                    f"in place: discard it (`doctor --repair`) and its {row['n_requests']} requests are asked "
                    "again in the next wave; or restore the file from a backup"
                )
            findings.append(
                Finding(
                    UNSENT_CHANGED,
                    f"{row['path']} {what} after it was compiled, before it was sent ({row['n_requests']} requests)",
                    fix,
                    True,
                    "error",
                    (row["path"],),
                )
            )
        else:
            findings.append(
                Finding(
                    SENT_CHANGED,
                    f"{row['path']} {what} after it was sent (batch {row['batch_id'] or 'not yet recorded'})",
                    "nothing to repair: the provider received the file as compiled, so no result is affected and "
                    "nothing reads it again; the copy on disk just no longer shows what was sent. Restore it from "
                    "a backup if you keep the workspace as a record",
                    False,
                    "info",
                    (row["path"],),
                )
            )
    return findings


def _result_damage(path: Path, expected: set[str], normalise: Normalise | None = None) -> str | None:
    """Why a saved result file cannot be what the provider sent, or None when it looks whole."""
    for number, line, raw, _flaw in result_lines(path, normalise):
        if line is None or not isinstance(line.get("custom_id"), str):
            return f"line {number} is not a result object ({raw[:40]!r})"
        if line["custom_id"] not in expected:
            return f"line {number} answers {line['custom_id'][:64]!r}, which is not a request of this file"
    return None


def _result_files(ws: Workspace) -> list[Finding]:
    """Downloaded, not yet ingested: the saved result files must be there and readable."""
    findings = []
    db = ws.store.conn
    for row in files_in(db, (DOWNLOADED,)):
        ids = {r[0] for r in db.execute("SELECT custom_id FROM requests WHERE file_pk = ?", (row["pk"],))}
        fix = (
            f"forget the saved results (`doctor --repair`): nothing of {row['path']} was ingested yet, so the "
            "next `poll-and-advance` downloads them again from the provider (a sync file is run again)"
        )
        for column in ("output_path", "error_path"):
            rel = row[column]
            if not rel:
                continue
            path = ws.path(rel)
            if not path.exists():
                findings.append(
                    Finding(
                        RESULT_MISSING,
                        f"{rel} is gone: the saved results of {row['path']} (batch {row['batch_id']}), not yet ingested",
                        fix,
                        True,
                        "error",
                        (row["path"],),
                    )
                )
                continue
            why = _result_damage(path, ids, file_normaliser(ws, row))
            if why is not None:
                findings.append(
                    Finding(
                        RESULT_DAMAGED,
                        f"{rel} is damaged ({why}): the saved results of {row['path']} (batch {row['batch_id']}), "
                        "not yet ingested",
                        fix + "; the damaged file is kept beside it as .damaged",
                        True,
                        "error",
                        (row["path"],),
                    )
                )
    return findings


def _pending_in_ingested(ws: Workspace) -> list[Finding]:
    return [
        Finding(
            PENDING_IN_INGESTED,
            f"{r['path']} is ingested but {r['n']} of its requests are still pending: no result will ever answer "
            "them (the next compile asks their steps again as new attempts, but these stay pending in `status` "
            "and in every count of requests)",
            "mark them failed (`doctor --repair`); it does not count against --retries, as nothing was asked of "
            "the provider that failed",
            True,
            "warning",
            (r["path"],),
        )
        for r in ws.store.conn.execute(
            "SELECT f.path, COUNT(*) AS n FROM requests q JOIN files f ON f.pk = q.file_pk"
            f" WHERE f.status = ? AND q.status = '{RequestState.PENDING}' GROUP BY f.pk ORDER BY f.pk",
            (INGESTED,),
        )
    ]


def _interrupted_submits(ws: Workspace) -> list[Finding]:
    findings = []
    for row in files_in(ws.store.conn, (UPLOADED, CREATING)):
        if row["status"] == CREATING:
            detail = (
                f"{row['path']}: a submit stopped between creating its batch and recording it; the provider "
                "may hold a batch the workspace does not know yet"
            )
            fix = (
                f"run `{ws.command('submit')}` (or `poll-and-advance --submit`): it finds that batch by its "
                "metadata tag and adopts it, never creating a second one"
            )
        else:
            detail = f"{row['path']}: uploaded, but a submit stopped before creating its batch"
            fix = f"run `{ws.command('submit')}` (or `poll-and-advance --submit`): it creates the batch"
        findings.append(Finding(INTERRUPTED_SUBMIT, detail, fix, False, "action", (row["path"],)))
    return findings


def _lost_batches(ws: Workspace) -> list[Finding]:
    """Batches the provider answered 404 for at the last polls: it no longer knows them."""
    findings = []
    for row in files_in(ws.store.conn, (SUBMITTED,)):
        if not row["not_found"]:
            continue
        pending = ws.store.conn.execute(
            f"SELECT COUNT(*) FROM requests WHERE file_pk = ? AND status = '{RequestState.PENDING}'", (row["pk"],)
        ).fetchone()[0]
        findings.append(
            Finding(
                BATCH_LOST,
                f"{row['path']}: the provider answered HTTP 404 for its batch {row['batch_id']} at the last "
                f"{row['not_found']} poll(s): it no longer knows the batch (a restart, a purge, another account)",
                f"declare it lost (`{ws.command('doctor --repair')}`; `poll-and-advance` does so by itself after "
                f"{LOST_AFTER} such answers in a row, when the provider's listing does not show it either): its "
                f"{pending} requests not yet answered are sent again in the next wave, using up none of --retries. "
                "If the batch was sent to another endpoint or with another key than now set, restore those first",
                True,
                "error",
                (row["path"],),
            )
        )
    return findings


def _other_copies(ws: Workspace) -> list[Finding]:
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


def _waiting_threads(ws: Workspace) -> list[Finding]:
    """Active threads with nothing open or in flight and no pending request: nothing will move them."""
    db = ws.store.conn
    if has_open_files(db):
        return []  # a wave is open or in flight: threads wait for it
    n = db.execute(
        f"SELECT COUNT(*) FROM threads t WHERE t.status = '{ThreadState.ACTIVE}' AND NOT EXISTS (SELECT 1 FROM requests q"
        f" WHERE q.run_pk = t.run_pk AND q.case_idx = t.case_idx AND q.status = '{RequestState.PENDING}')"
    ).fetchone()[0]
    if not n:
        return []
    return [
        Finding(
            THREADS_WAITING,
            f"{n} active thread(s) wait with no wave open or in flight: their next requests are not compiled yet "
            "(a command stopped between ingesting a wave and compiling the next, or `prepare` ran while a wave "
            "was in flight)",
            f"run `{ws.command('poll-and-advance --submit')}`: it compiles their next requests",
            False,
            "action",
        )
    ]


def manifest_findings(ws: Workspace) -> list[Finding]:
    findings = []
    for run in load_runs(ws):
        path = manifest_path(ws, run.run_id, run.model)
        rel = ws.relative(path)
        try:
            on_disk = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            problem = "is gone"
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            problem = "cannot be read as JSON"
        else:
            if on_disk == run.manifest:
                continue
            problem = "differs from the manifest the database holds"
        findings.append(
            Finding(
                MANIFEST,
                f"{rel}, the manifest of run {run.run_id!r} of model {run.model!r}, {problem}",
                "rewrite it from the database (`doctor --repair`, or any `prepare` of this run); the database "
                "copy is the one every resume is checked against",
                True,
                "warning",
                (rel,),
            )
        )
    return findings


def _compacted_missing(ws: Workspace) -> list[Finding]:
    """Files of finished waves kept compressed (`compaction`) that are gone, compressed or plain."""
    gone = missing(ws)
    if not gone:
        return []
    return [
        Finding(
            COMPACTED_MISSING,
            f"{len(gone)} compacted file(s) of finished waves are gone, e.g. {gone[0]}{SUFFIX}",
            "nothing to repair: no result depends on them (their requests were sent and their answers "
            "ingested), but the workspace no longer keeps a record of what was sent or received; restore "
            "them from a backup if you keep the workspace as that record",
            False,
            "warning",
            tuple(gone),
        )
    ]


def _anomalies(ws: Workspace) -> list[Finding]:
    counts = {
        r["kind"]: r["n"]
        for r in ws.store.conn.execute("SELECT kind, COUNT(*) AS n FROM anomalies GROUP BY kind ORDER BY kind")
    }
    if not counts:
        return []
    total = sum(counts.values())
    by_kind = ", ".join(f"{n} {kind}" for kind, n in counts.items())
    return [
        Finding(
            ANOMALIES,
            f"{total} ingest anomal{'y' if total == 1 else 'ies'} recorded: {by_kind}",
            "nothing to repair: each was reported when it was ingested, and none changed a result (a line of another "
            "workspace, of another file, for another prompt or of no request here is not applied; of two different "
            "results for one request the first is kept; a request whose line could not be read is failed and asked "
            "again). Foreign lines mean a result file of another workspace was ingested here",
            False,
            "info",
        )
    ]


def _compacted_damaged(ws: Workspace) -> list[Finding]:
    """Compacted files whose bytes are not those recorded when they were packed (`compaction.verify`;
    a file that is gone is `_compacted_missing`'s)."""
    damaged = [line for line in verify(ws) if not line.endswith(" is gone")]
    if not damaged:
        return []
    return [
        Finding(
            COMPACTED_DAMAGED,
            f"{len(damaged)} compacted file(s) do not hold what was packed, e.g. {damaged[0]}",
            "nothing to repair: no result depends on them (their answers were ingested before they were packed), "
            "but they are no longer a faithful record; restore them from a backup if you keep the workspace as that record",
            False,
            "warning",
            tuple(line.split(" ", 1)[0] for line in damaged),
        )
    ]
