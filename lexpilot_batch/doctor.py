"""Checking a workspace for what crashes, hand edits and bugs can leave behind, and mending it.

`diagnose` only reads: the database, and the files the database names. `repair` mends what can be
mended without guessing, each repair in one transaction, and says what it did; everything else is
reported with what to do in words. `check` is the whole `lexpilot-batch doctor` command.

Repairs never need a provider. A changed request file nobody has received yet is discarded from
the database, and the next command that compiles (`poll-and-advance`) asks for its requests again,
with that command's own provider settings; a lost or damaged result file of a batch nothing was
ingested from is forgotten, and the next poll downloads it again. A repair never re-asks a
request whose answer was ingested, so a repaired run ends with the records an untouched one has.

What is checked:

| kind | severity | repair |
| --- | --- | --- |
| `schema` — migrations this version does not know (a newer version wrote it) | error | no: upgrade |
| `unsent_request_file_changed` — compiled, not yet sent, bytes differ or gone | error | discard: asked again |
| `sent_request_file_changed` — already with the provider, bytes on disk differ | info | no: explained |
| `result_file_missing` / `result_file_damaged` — downloaded, not ingested | error | download again |
| `interrupted_submit` — uploaded or creating: a submit stopped half-way | action | no: run `submit` |
| `pending_in_ingested_file` — requests left pending in an ingested file | warning | fail them |
| `threads_waiting` — active threads, nothing open, nothing pending | action | no: `poll-and-advance` |
| `ingest_anomalies` — unknown / duplicate custom_ids, bad lines, by kind | info | no: explained |
| `manifest_file` — `runs/.../manifest.json` gone or not what the database holds | warning | rewrite it |

The database keeps no hash of downloaded result files, so a "damaged" one is one that can be seen
to be damaged: a line that is not a result object, or a custom_id that is not one of the file's
requests. A file cut exactly between two lines looks whole; its missing requests fail at ingest
and are retried, so nothing wrong is ever scored.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lexpilot_batch.compiler import compile_wave, target_wave
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.fileio import file_sha256
from lexpilot_batch.ingest import read_lines
from lexpilot_batch.runs import load_runs, manifest_path, write_manifest_file
from lexpilot_batch.store import DB_NAME, MIGRATIONS
from lexpilot_batch.workspace import Workspace

if TYPE_CHECKING:
    from lexpilot_batch.providers.session import ProviderOptions, Session

SCHEMA = "schema"
UNSENT_CHANGED = "unsent_request_file_changed"
SENT_CHANGED = "sent_request_file_changed"
RESULT_MISSING = "result_file_missing"
RESULT_DAMAGED = "result_file_damaged"
INTERRUPTED_SUBMIT = "interrupted_submit"
PENDING_IN_INGESTED = "pending_in_ingested_file"
THREADS_WAITING = "threads_waiting"
ANOMALIES = "ingest_anomalies"
MANIFEST = "manifest_file"

# error: results are at risk or the workspace cannot move on; warning: something a user reads is
# wrong; action: nothing is wrong, a command is due; info: worth knowing, nothing to do.
SEVERITIES = ("error", "warning", "action", "info")
PENDING_FAILED = "left pending in an ingested file; failed by `lexpilot-batch doctor --repair`"


@dataclass(frozen=True)
class Finding:
    """One thing found: what (`kind`), where and how bad (`detail`), what to do (`fix`)."""

    kind: str
    detail: str
    fix: str
    repairable: bool
    severity: str = "error"
    targets: tuple[str, ...] = field(default=(), compare=False)  # workspace-relative paths concerned


@dataclass
class DoctorReport:
    """What `check` found, what it repaired, and what is left."""

    found: list[Finding]
    repaired: list[str]
    remaining: list[Finding]

    @property
    def exit_code(self) -> int:
        """1 while an error or warning remains; `action` and `info` findings need no repair."""
        return 1 if any(f.severity in ("error", "warning") for f in self.remaining) else 0


# --- diagnosis ----------------------------------------------------------------------------------


def _schema_blockers(db: sqlite3.Connection) -> list[Finding]:
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
    blockers = _schema_blockers(db)
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


def diagnose(ws: Workspace) -> list[Finding]:
    """Everything wrong or pending in the workspace, most serious kinds first. Changes nothing."""
    findings = [
        *schema_findings(ws.store.conn),
        *_request_files(ws),
        *_result_files(ws),
        *_pending_in_ingested(ws),
        *_interrupted_submits(ws),
        *_waiting_threads(ws),
        *_manifests(ws),
        *_anomalies(ws),
    ]
    return sorted(findings, key=lambda f: SEVERITIES.index(f.severity))


def _unsent(row: Any) -> bool:
    """Whether nobody has read the file yet: a sync file is only read when it is polled."""
    return row["status"] in ("compiled", "uploaded") or (row["status"] == "submitted" and row["backend"] == "sync")


def _request_files(ws: Workspace) -> list[Finding]:
    """Request files whose bytes are not what was compiled (ingested files are not read again)."""
    findings = []
    db = ws.store.conn
    open_wave = target_wave(db)
    for row in db.execute(
        "SELECT * FROM files WHERE status IN ('compiled', 'uploaded', 'creating', 'submitted', 'downloaded')"
        " ORDER BY pk"
    ).fetchall():
        actual = file_sha256(ws.path(row["path"]))
        if actual == row["sha256"]:
            continue
        what = (
            "is gone" if actual is None else f"changed on disk (sha256 {actual[:12]}…, compiled {row['sha256'][:12]}…)"
        )
        if _unsent(row):
            if open_wave == (row["wave"], True):
                fix = (
                    f"discard wave {row['wave']} (nothing of it was sent); the next `lexpilot-batch poll-and-advance "
                    "--submit` compiles it again from the database, the same requests byte for byte. "
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


def _result_damage(path: Path, expected: set[str]) -> str | None:
    """Why a saved result file cannot be what the provider sent, or None when it looks whole."""
    for number, line, raw in read_lines(path):
        if line is None or not isinstance(line.get("custom_id"), str):
            return f"line {number} is not a result object ({raw[:40]!r})"
        if line["custom_id"] not in expected:
            return f"line {number} answers {line['custom_id'][:64]!r}, which is not a request of this file"
    return None


def _result_files(ws: Workspace) -> list[Finding]:
    """Downloaded, not yet ingested: the saved result files must be there and readable."""
    findings = []
    db = ws.store.conn
    for row in db.execute("SELECT * FROM files WHERE status = 'downloaded' ORDER BY pk").fetchall():
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
            why = _result_damage(path, ids)
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
            " WHERE f.status = 'ingested' AND q.status = 'pending' GROUP BY f.pk ORDER BY f.pk"
        )
    ]


def _interrupted_submits(ws: Workspace) -> list[Finding]:
    findings = []
    for row in ws.store.conn.execute(
        "SELECT path, status FROM files WHERE status IN ('uploaded', 'creating') ORDER BY pk"
    ):
        if row["status"] == "creating":
            detail = (
                f"{row['path']}: a submit stopped between creating its batch and recording it; the provider "
                "may hold a batch the workspace does not know yet"
            )
            fix = (
                "run `lexpilot-batch submit` (or `poll-and-advance --submit`): it finds that batch by its "
                "metadata tag and adopts it, never creating a second one"
            )
        else:
            detail = f"{row['path']}: uploaded, but a submit stopped before creating its batch"
            fix = "run `lexpilot-batch submit` (or `poll-and-advance --submit`): it creates the batch"
        findings.append(Finding(INTERRUPTED_SUBMIT, detail, fix, False, "action", (row["path"],)))
    return findings


def _waiting_threads(ws: Workspace) -> list[Finding]:
    """Active threads with nothing open or in flight and no pending request: nothing will move them."""
    db = ws.store.conn
    if db.execute("SELECT 1 FROM files WHERE status != 'ingested' LIMIT 1").fetchone():
        return []  # a wave is open or in flight: threads wait for it
    n = db.execute(
        "SELECT COUNT(*) FROM threads t WHERE t.status = 'active' AND NOT EXISTS (SELECT 1 FROM requests q"
        " WHERE q.run_pk = t.run_pk AND q.case_idx = t.case_idx AND q.status = 'pending')"
    ).fetchone()[0]
    if not n:
        return []
    return [
        Finding(
            THREADS_WAITING,
            f"{n} active thread(s) wait with no wave open or in flight: their next requests are not compiled yet "
            "(a command stopped between ingesting a wave and compiling the next, or `prepare` ran while a wave "
            "was in flight)",
            "run `lexpilot-batch poll-and-advance --submit`: it compiles their next requests",
            False,
            "action",
        )
    ]


def _manifests(ws: Workspace) -> list[Finding]:
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
            "nothing to repair: each was reported when it was ingested, and none changed a result (a duplicate is "
            "not applied twice, an unknown custom_id is not applied at all, and a request a bad line should have "
            "answered is failed and asked again). Unknown custom_ids usually mean a result file of another "
            "workspace was ingested here",
            False,
            "info",
        )
    ]


# --- repair -------------------------------------------------------------------------------------


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
    if any(f.kind == MANIFEST for f in wanted):
        done += _rewrite_manifests(ws)
    return done


def _discard_unsent(ws: Workspace, paths: list[str], session: Session | None) -> list[str]:
    db = ws.store.conn
    rows = []
    for rel in paths:
        row = db.execute("SELECT * FROM files WHERE path = ?", (rel,)).fetchone()
        # Check again: the file may have been restored, or sent, since the diagnosis.
        if row is not None and _unsent(row) and file_sha256(ws.path(rel)) != row["sha256"]:
            rows.append(row)
    done = []
    recompile = False
    for wave in sorted({r["wave"] for r in rows}):
        if target_wave(db) == (wave, True):
            # Nothing of the wave has left: drop all of it, so that it is compiled again whole, into
            # the same wave, exactly as it was (compiling is deterministic).
            with ws.store.transaction() as tx:
                files = [r["path"] for r in tx.execute("SELECT path FROM files WHERE wave = ?", (wave,))]
                tx.execute("DELETE FROM requests WHERE wave = ?", (wave,))
                tx.execute("DELETE FROM files WHERE wave = ?", (wave,))
                tx.execute("DELETE FROM waves WHERE n = ?", (wave,))
            for rel in files:
                _set_aside(ws, rel, "discarded")
            done.append(f"discarded unsent wave {wave} ({len(files)} file(s)); it is compiled again from the database")
            recompile = True
        else:
            for row in (r for r in rows if r["wave"] == wave):
                with ws.store.transaction() as tx:
                    tx.execute("DELETE FROM requests WHERE file_pk = ?", (row["pk"],))
                    tx.execute("DELETE FROM files WHERE pk = ?", (row["pk"],))
                _set_aside(ws, row["path"], "discarded")
                if row["output_path"]:  # a sync file run in part: those answers go with it
                    _set_aside(ws, row["output_path"], "discarded")
                done.append(
                    f"discarded {row['path']}: its {row['n_requests']} requests are asked again in the next wave"
                )
    if recompile and session is not None:
        result = compile_wave(ws, session.endpoints, session.limits, session.options.retries)
        if result.compiled:
            done.append(f"compiled wave {result.wave} again: {result.requests} requests in {len(result.files)} file(s)")
    return done


def _forget_results(ws: Workspace, rel: str) -> list[str]:
    row = ws.store.conn.execute("SELECT * FROM files WHERE path = ?", (rel,)).fetchone()
    if row is None or row["status"] != "downloaded":
        return []
    # Damaged files are set aside before the database forgets them, so a sync run never resumes from one.
    for column in ("output_path", "error_path"):
        if row[column] and ws.path(row[column]).exists():
            _set_aside(ws, row[column], "damaged")
    with ws.store.transaction() as tx:
        tx.execute(
            "UPDATE files SET status = 'submitted', output_path = NULL, error_path = NULL, output_file_id = NULL,"
            " error_file_id = NULL, finished_at = NULL WHERE pk = ? AND status = 'downloaded'",
            (row["pk"],),
        )
    return [f"{rel}: forgot its saved results; the next poll-and-advance downloads them again"]


def _fail_pending(ws: Workspace, rel: str) -> list[str]:
    with ws.store.transaction() as tx:
        row = tx.execute("SELECT pk, status FROM files WHERE path = ?", (rel,)).fetchone()
        if row is None or row["status"] != "ingested":
            return []
        n = tx.execute(
            # No error_kind: `compiler.exhausted` counts only transport and invalid failures, and this
            # one is neither, exactly as the compiler treats a request still pending when it runs.
            "UPDATE requests SET status = 'failed', error = ?, error_kind = NULL"
            " WHERE file_pk = ? AND status = 'pending'",
            (PENDING_FAILED, row["pk"]),
        ).rowcount
    return [f"{rel}: failed {n} request(s) left pending"] if n else []


def _rewrite_manifests(ws: Workspace) -> list[str]:
    done = []
    for finding in _manifests(ws):
        for run in load_runs(ws):
            if ws.relative(manifest_path(ws, run.run_id, run.model)) in finding.targets:
                write_manifest_file(ws, run)
                done.append(f"rewrote {finding.targets[0]} from the database")
    return done


def _set_aside(ws: Workspace, rel: str, why: str) -> None:
    """Keep a file the workspace no longer uses beside it (`NAME.why`), out of every glob of *.jsonl."""
    path = ws.path(rel)
    if path.exists():
        path.replace(path.with_name(f"{path.name}.{why}"))


# --- the command --------------------------------------------------------------------------------


def check(root: Path | None = None, do_repair: bool = False, options: ProviderOptions | None = None) -> DoctorReport:
    """`lexpilot-batch doctor [--repair]`: diagnose (and repair) the workspace at `root`.

    Holds the writer lock throughout, so no other command changes the workspace under it (and a
    running one makes this refuse, clearly). A database written by a newer version is reported,
    never opened for writing.
    """
    from lexpilot_batch.providers.session import ProviderOptions as Options
    from lexpilot_batch.providers.session import Session

    base = Path(root if root is not None else Path.cwd()).resolve()
    db_path = base / "state" / DB_NAME
    if not db_path.is_file():
        raise LexpilotError(f"{base}: no lexpilot-batch workspace here (no state/{DB_NAME}); pass --root")
    raw = sqlite3.connect(db_path)
    try:
        early = _schema_blockers(raw)
    finally:
        raw.close()
    if early:
        return DoctorReport(early, [], early)
    with Workspace(base) as ws:
        found = diagnose(ws)
        if not do_repair or not any(f.repairable for f in found):
            return DoctorReport(found, [], found)
        session = Session(ws, options or Options())
        try:
            done = repair(ws, found, session)
        finally:
            session.close()
        return DoctorReport(found, done, diagnose(ws))


def render(findings: list[Finding]) -> str:
    """The findings for the terminal: kind, what and where, what to do."""
    if not findings:
        return "No problems found."
    counts = Counter(f.severity for f in findings)
    head = ", ".join(f"{counts[s]} {s}" for s in SEVERITIES if counts[s])
    lines = [f"{len(findings)} finding(s): {head}"]
    for i, f in enumerate(findings, 1):
        lines.append(f"\n{i}. [{f.severity}] {f.kind}: {f.detail}")
        lines.append(f"   what to do: {f.fix}")
        if f.repairable:
            lines.append("   `lexpilot-batch doctor --repair` does this.")
    return "\n".join(lines)


def render_report(report: DoctorReport) -> str:
    """What `doctor` prints: the findings, and after `--repair` what was done and what is left."""
    if not report.repaired:
        return render(report.found)
    lines = ["Repaired:", *(f"  - {line}" for line in report.repaired), ""]
    lines.append("After repair: " + render(report.remaining))
    return "\n".join(lines)
