"""Moving a wave's files through a provider: upload, create, poll, download, ingest.

Each step is recorded before the next begins, so a command killed anywhere resumes where it
stopped: a file uploaded but not yet batched is batched; a batch created whose id was never
recorded is found again by its metadata tag and adopted instead of created twice; result files
are saved under `responses/` before they are ingested, and an ingested batch is never ingested
again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.fileio import file_sha256, write_atomic
from lexpilot_batch.ingest import IngestStats, apply_result_files, read_lines
from lexpilot_batch.providers.base import BatchBackend, BatchInfo
from lexpilot_batch.workspace import Workspace


def batch_tag(ws: Workspace, row: dict) -> dict[str, str]:
    """Metadata naming the workspace file: how a batch is found again after a crash."""
    return {
        "lexpilot_workspace": ws.workspace_id,
        "lexpilot_file": row["path"],
        "lexpilot_sha256": row["sha256"][:32],
    }


class TamperedFile(LexpilotError):
    """A compiled request file changed or vanished on disk before it was sent."""


def check_compiled_files(ws: Workspace) -> list[str]:
    """Paths of compiled, unsubmitted files whose bytes no longer match what was compiled."""
    bad = []
    for row in ws.store.conn.execute("SELECT path, sha256 FROM files WHERE status IN ('compiled', 'uploaded')"):
        if file_sha256(ws.path(row["path"])) != row["sha256"]:
            bad.append(row["path"])
    return bad


@dataclass
class SubmitResult:
    submitted: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)  # left for the user to run elsewhere


def submit_files(ws: Workspace, session: Any, on_file: Callable[[str], None] | None = None) -> SubmitResult:
    """Send every compiled file of the workspace on its backend, recording each step."""
    result = SubmitResult()
    rows = [
        dict(r)
        for r in ws.store.conn.execute(
            "SELECT * FROM files WHERE status IN ('compiled', 'uploaded', 'creating') ORDER BY pk"
        )
    ]
    for row in rows:
        if row["backend"] in ("sync", "manual"):
            # Nothing to upload: a sync file is executed when polled, a manual one by the user.
            _set(
                ws,
                row["pk"],
                status="submitted",
                batch_id=row["backend"],
                batch_status="in_progress",
                submitted_at=time.time(),
            )
            (result.manual if row["backend"] == "manual" else result.submitted).append(row["path"])
            if on_file:
                on_file(row["path"])
            continue
        backend: BatchBackend = session.backend_for(row["roles"])
        path = ws.path(row["path"])
        if row["status"] == "compiled":
            file_id = backend.upload(path)
            _set(ws, row["pk"], status="uploaded", provider_file_id=file_id)
            row.update(status="uploaded", provider_file_id=file_id)
        tag = batch_tag(ws, row)
        batch: BatchInfo | None = None
        if row["status"] == "creating":
            # We may have created it and died before recording its id: find it, never duplicate it.
            batch = backend.find(tag)
            if batch is not None:
                result.adopted.append(row["path"])
        if batch is None:
            _set(ws, row["pk"], status="creating")
            batch = backend.create(row["provider_file_id"], tag)
        _set(
            ws,
            row["pk"],
            status="submitted",
            batch_id=batch.id,
            batch_status=batch.status,
            request_counts=json.dumps(batch.request_counts),
            submitted_at=time.time(),
        )
        result.submitted.append(row["path"])
        if on_file:
            on_file(row["path"])
    return result


def _set(ws: Workspace, pk: int, **values: object) -> None:
    columns = ", ".join(f"{k} = ?" for k in values)
    with ws.store.transaction() as db:
        db.execute(f"UPDATE files SET {columns} WHERE pk = ?", (*values.values(), pk))


@dataclass
class PollResult:
    in_flight: int = 0
    manual: list[str] = field(default_factory=list)  # waiting for `lexpilot-batch ingest`
    cancelled: list[str] = field(default_factory=list)  # asked to cancel: older than --max-wave-age
    finished: list[str] = field(default_factory=list)
    stats: IngestStats = field(default_factory=IngestStats)
    batches: list[dict] = field(default_factory=list)  # for progress displays


def poll_files(ws: Workspace, session: Any, max_age: float | None = None) -> PollResult:
    """Retrieve every in-flight batch; save and ingest the terminal ones; run sync files.

    A batch in flight for longer than `max_age` seconds is cancelled.
    """
    result = PollResult()
    rows = [
        dict(r)
        for r in ws.store.conn.execute("SELECT * FROM files WHERE status IN ('submitted', 'downloaded') ORDER BY pk")
    ]
    for row in rows:
        if row["status"] == "submitted" and row["backend"] == "manual":
            result.in_flight += 1
            result.manual.append(row["path"])
            continue
        if row["status"] == "submitted" and row["backend"] == "sync":
            _run_sync(ws, session, row)
            row = dict(ws.store.conn.execute("SELECT * FROM files WHERE pk = ?", (row["pk"],)).fetchone())
        elif row["status"] == "submitted":
            backend: BatchBackend = session.backend_for(row["roles"])
            info = backend.retrieve(row["batch_id"])
            result.batches.append(
                {
                    "wave": row["wave"],
                    "path": row["path"],
                    "status": info.status,
                    "counts": info.request_counts,
                    "requests": row["n_requests"],
                    "elapsed": time.time() - (row["submitted_at"] or time.time()),
                }
            )
            if not info.terminal:
                age = time.time() - (row["submitted_at"] or time.time())
                if max_age is not None and age > max_age and info.status != "cancelling":
                    # Too old: cancel it. Its finished requests are kept when it lands as
                    # `cancelled`; the rest go back to due and are retried in the next wave.
                    info = backend.cancel(row["batch_id"])
                    result.cancelled.append(row["path"])
                _set(ws, row["pk"], batch_status=info.status, request_counts=json.dumps(info.request_counts))
                result.in_flight += 1
                continue
            _download(ws, backend, row, info)
            row = dict(ws.store.conn.execute("SELECT * FROM files WHERE pk = ?", (row["pk"],)).fetchone())
        result.stats.add(ingest_file(ws, row))
        result.finished.append(row["path"])
    _close_finished_waves(ws)
    return result


def _run_sync(ws: Workspace, session: Any, row: dict) -> None:
    """Execute a file through chat completions; its output file grows as answers arrive."""
    path = ws.path(row["path"])
    # `submit` only marked the file: it is read now, so this is the last moment to check that it
    # still holds what was compiled (an edit made since would otherwise be sent and scored).
    if file_sha256(path) != row["sha256"]:
        raise TamperedFile(
            f"request file {row['path']} changed on disk or vanished after it was compiled, so it is not sent. "
            "Run `lexpilot-batch doctor --repair` to discard it (its requests are asked again), or restore it"
        )
    out = ws.wave_dir("responses", row["wave"]) / f"{Path(row['path']).stem}.output.jsonl"
    runner = session.sync_runner_for(row["roles"])
    # disable=None: a bar on a terminal, silence in logs and pipes.
    with tqdm(total=row["n_requests"], desc=f"sync {Path(row['path']).name}", unit="req", disable=None) as bar:

        def progress(saved: int, total: int) -> None:
            bar.total = total
            bar.update(saved - bar.n)

        stats = runner.run(path, out, on_progress=progress)
    counts = {"total": stats.total, "completed": stats.ok, "failed": stats.failed}
    _set(
        ws,
        row["pk"],
        status="downloaded",
        batch_status="completed",
        request_counts=json.dumps(counts),
        output_path=ws.relative(out),
        finished_at=time.time(),
    )


def _download(ws: Workspace, backend: BatchBackend, row: dict, info: BatchInfo) -> None:
    """Save the batch's result files untouched, then record that they are saved."""
    stem = Path(row["path"]).stem
    out_dir = ws.wave_dir("responses", row["wave"])
    paths: dict[str, str | None] = {"output_path": None, "error_path": None}
    for kind, file_id in (("output", info.output_file_id), ("error", info.error_file_id)):
        if file_id:
            dest = out_dir / f"{stem}.{kind}.jsonl"
            backend.download(file_id, dest)
            paths[f"{kind}_path"] = ws.relative(dest)
    _set(
        ws,
        row["pk"],
        status="downloaded",
        batch_status=info.status,
        request_counts=json.dumps(info.request_counts),
        batch_errors=json.dumps(info.errors, ensure_ascii=False),
        output_file_id=info.output_file_id,
        error_file_id=info.error_file_id,
        finished_at=time.time(),
        **paths,
    )


def ingest_file(ws: Workspace, row: dict) -> IngestStats:
    """Apply a downloaded batch's results in one transaction; the file is then `ingested`."""
    paths = [ws.path(row[k]) for k in ("output_path", "error_path") if row[k]]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise LexpilotError(
            f"saved result file(s) missing: {', '.join(missing)}; they were downloaded for batch "
            f"{row['batch_id']} — restore them, or run `lexpilot-batch doctor` to download them again"
        )
    reason = f"not in the results of batch {row['batch_id']} ({row['batch_status']})"
    # Requests an expired or cancelled batch never reached were not tried; neither were those of
    # a batch refused for the enqueued-token limit. Any other failed batch counts as a failure.
    kind = "unexecuted" if row["batch_status"] in ("expired", "cancelled") else "transport"
    errors = json.loads(row["batch_errors"] or "[]")
    if row["batch_status"] == "failed" and errors:
        first = errors[0]
        reason = f"batch {row['batch_id']} failed: {first.get('code')}: {first.get('message')}"
        if first.get("code") == "token_limit_exceeded":
            kind = "unexecuted"
    with ws.store.transaction() as db:
        current = db.execute("SELECT status FROM files WHERE pk = ?", (row["pk"],)).fetchone()
        if current["status"] == "ingested":
            return IngestStats()
        stats = apply_result_files(db, [row["pk"]], paths, reason, kind)
        db.execute("UPDATE files SET status = 'ingested' WHERE pk = ?", (row["pk"],))
    return stats


def _close_finished_waves(ws: Workspace) -> None:
    with ws.store.transaction() as db:
        db.execute(
            "UPDATE waves SET closed_at = ? WHERE closed_at IS NULL AND NOT EXISTS"
            " (SELECT 1 FROM files WHERE files.wave = waves.n AND files.status != 'ingested')"
            " AND EXISTS (SELECT 1 FROM files WHERE files.wave = waves.n)",
            (time.time(),),
        )


def ingest_external(ws: Workspace, source: Path, wave: int | None = None) -> tuple[IngestStats, list[str]]:
    """Ingest a result file produced elsewhere (OpenAI output/error shape, or vLLM `run-batch`).

    The file is first saved untouched under `responses/`, then applied in one transaction to the
    request files its custom_ids belong to (only files of `wave` when given). A request file all
    of whose requests are answered or failed is then done; the others stay in flight for a
    further file. Ingesting the same file again changes nothing.
    """
    if not source.is_file():
        raise LexpilotError(f"{source}: no such file to ingest")
    data = source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    ids: set[str] = set()
    for _number, line, _raw in read_lines(source):
        if line is not None and isinstance(line.get("custom_id"), str):
            ids.add(line["custom_id"])
    if not ids:
        raise LexpilotError(
            f"{source}: no result lines with a custom_id; expected the batch output shape "
            '{"custom_id": ..., "response": {...}, "error": ...} one JSON object per line'
        )
    db = ws.store.conn
    found: dict[int, dict] = {}
    for chunk in _chunks(sorted(ids), 500):
        marks = ",".join("?" * len(chunk))
        for r in db.execute(
            f"SELECT DISTINCT f.* FROM requests q JOIN files f ON f.pk = q.file_pk WHERE q.custom_id IN ({marks})",
            chunk,
        ):
            found[r["pk"]] = dict(r)
    targets = [f for f in found.values() if wave is None or f["wave"] == wave]
    if not targets:
        where = f" of wave {wave}" if wave is not None else ""
        raise LexpilotError(
            f"{source}: none of its {len(ids)} custom_ids belong to a request file{where} of this workspace; "
            "check --root and --wave"
        )
    first = min(f["wave"] for f in targets)
    saved = ws.wave_dir("responses", first) / f"ingested-{digest[:12]}-{source.name}"
    if not saved.exists():
        write_atomic(saved, data)
    with ws.store.transaction() as tx:
        stats = apply_result_files(tx, [f["pk"] for f in targets], [saved], None)
        done = []
        for f in targets:
            pending = tx.execute(
                "SELECT COUNT(*) FROM requests WHERE file_pk = ? AND status = 'pending'", (f["pk"],)
            ).fetchone()[0]
            if pending == 0 and f["status"] != "ingested":
                tx.execute(
                    "UPDATE files SET status = 'ingested', batch_status = 'completed', output_path = ?,"
                    " finished_at = ? WHERE pk = ?",
                    (ws.relative(saved), time.time(), f["pk"]),
                )
                done.append(f["path"])
    _close_finished_waves(ws)
    return stats, done


def _chunks(items: list[str], size: int):
    for i in range(0, len(items), size):
        yield items[i : i + size]
