"""Diagnosis: every check `doctor` makes, reading the database and the files it names, changing nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from lexpilot_batch.doctor.copies import other_copies
from lexpilot_batch.doctor.findings import (
    ANOMALIES,
    BATCH_LOST,
    COMPACTED_DAMAGED,
    COMPACTED_MISSING,
    DOWNLOAD_HELD,
    INTERRUPTED_SUBMIT,
    MANIFEST,
    PENDING_IN_INGESTED,
    RESULT_DAMAGED,
    RESULT_MISSING,
    SCHEMA,
    SECRETS_REPLACED,
    SENT_CHANGED,
    SEVERITIES,
    THREADS_WAITING,
    UNSENT_CHANGED,
    Finding,
)
from lexpilot_batch.engine.downloads import TRIES
from lexpilot_batch.engine.ingest import file_normaliser
from lexpilot_batch.engine.result_lines import result_lines
from lexpilot_batch.providers.results import Normalise
from lexpilot_batch.state.compaction import SUFFIX, missing, verify
from lexpilot_batch.state.migrations import MIGRATIONS
from lexpilot_batch.state.states import RequestState, ThreadState
from lexpilot_batch.state.waves import (
    CREATING,
    DOWNLOADED,
    INGESTED,
    LOST_AFTER,
    OPEN,
    SUBMITTED,
    UPLOADED,
    files_in,
    has_open_files,
    held_files,
    target_wave,
    unsent,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import load_runs, manifest_path
from lexpilot_batch.util.fileio import file_sha256
from lexpilot_batch.util.redaction import redact_cut


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
        *_held_downloads(ws),
        *_pending_in_ingested(ws),
        *_interrupted_submits(ws),
        *_lost_batches(ws),
        *other_copies(ws),
        *_waiting_threads(ws),
        *manifest_findings(ws),
        *_compacted_missing(ws),
        *(_compacted_damaged(ws) if deep else ()),
        *_anomalies(ws),
        *_secrets_replaced(ws),
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
            return f"line {number} is not a result object ({redact_cut(raw, 40)!r})"
        if line["custom_id"] not in expected:
            return f"line {number} answers {redact_cut(line['custom_id'], 64)!r}, which is not a request of this file"
    return None


def _result_files(ws: Workspace) -> list[Finding]:
    """Downloaded, not yet ingested: the saved result files must be there and readable."""
    findings = []
    db = ws.store.conn
    for row in files_in(db, (DOWNLOADED,)):
        if row["held"]:
            continue  # `_held_downloads`: its damage is known
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


def _held_downloads(ws: Workspace) -> list[Finding]:
    """Batches whose results stayed damaged however often they were fetched (`engine.downloads`)."""
    findings = []
    db = ws.store.conn
    for row in held_files(db):
        unanswered = db.execute(
            f"SELECT COUNT(*) FROM requests WHERE file_pk = ? AND status = '{RequestState.PENDING}'", (row["pk"],)
        ).fetchone()[0]
        findings.append(
            Finding(
                DOWNLOAD_HELD,
                f"{row['path']}: the results of batch {row['batch_id']} came back damaged {row['damaged']} time(s) "
                f"({row['held']}); it is held: none of its {unanswered} requests is answered or asked again",
                f"run `{ws.command('poll-and-advance --submit')}` later: every command fetches it again, "
                f"{TRIES} times with backoff, and ingests it once it holds what the provider reported. If the "
                f"provider keeps sending it damaged, `{ws.command('doctor --repair --accept-damaged')}` ingests "
                "the saved download as it is: the requests it does not answer are asked again, and paid for again",
                False,
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


def _secrets_replaced(ws: Workspace) -> list[Finding]:
    """Saved result files in which keys were replaced on their way to disk (`redaction.Scrubber`)."""
    rows = ws.store.conn.execute("SELECT path, redacted FROM files WHERE redacted > 0 ORDER BY pk").fetchall()
    if not rows:
        return []
    total = sum(r["redacted"] for r in rows)
    return [
        Finding(
            SECRETS_REPLACED,
            f"{total} key(s) or key-shaped token(s) were replaced by [redacted …] in the saved results of "
            f"{len(rows)} file(s), e.g. those of {rows[0]['path']}: the provider, or a gateway on the way, "
            "echoed them into its answers",
            "nothing to repair: it is the one change made to a provider's files before they are saved (every "
            "other byte is as it came), so that no key is ever written down; check what echoes your keys",
            False,
            "info",
            tuple(r["path"] for r in rows),
        )
    ]
