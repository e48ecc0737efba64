"""Moving a wave's files through a provider: upload, create, poll, download (then `ingest`).

Each step is recorded before the next begins, so a command killed anywhere resumes where it
stopped: a file uploaded but not yet batched is batched; a batch created whose id was never
recorded is found again by its metadata tag and adopted instead of created twice; result files
are saved under `responses/` before they are ingested, and an ingested batch is never ingested
again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.fileio import file_sha256
from lexpilot_batch.ingest import IngestStats, ingest_file
from lexpilot_batch.providers.base import BatchBackend, BatchInfo
from lexpilot_batch.waves import (
    COMPILED,
    CREATING,
    DOWNLOADED,
    IN_FLIGHT,
    SUBMITTED,
    TO_SUBMIT,
    UPLOADED,
    close_finished_waves,
    file_row,
    files_in,
    set_file,
)
from lexpilot_batch.workspace import Workspace

if TYPE_CHECKING:
    from lexpilot_batch.providers.session import Session


def batch_tag(ws: Workspace, row: dict) -> dict[str, str]:
    """Metadata naming the workspace file: how a batch is found again after a crash."""
    return {
        "lexpilot_workspace": ws.workspace_id,
        "lexpilot_file": row["path"],
        "lexpilot_sha256": row["sha256"][:32],
    }


class TamperedFile(LexpilotError):
    """A compiled request file changed or vanished on disk before it was sent."""


@dataclass
class SubmitResult:
    submitted: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)  # left for the user to run elsewhere


def submit_files(ws: Workspace, session: Session, on_file: Callable[[str], None] | None = None) -> SubmitResult:
    """Send every compiled file of the workspace on its backend, recording each step."""
    result = SubmitResult()
    rows = files_in(ws.store.conn, TO_SUBMIT)
    for row in rows:
        if row["backend"] in ("sync", "manual"):
            # Nothing to upload: a sync file is executed when polled, a manual one by the user.
            set_file(
                ws,
                row["pk"],
                status=SUBMITTED,
                batch_id=row["backend"],
                batch_status="in_progress",
                submitted_at=time.time(),
            )
            (result.manual if row["backend"] == "manual" else result.submitted).append(row["path"])
            if on_file:
                on_file(row["path"])
            continue
        backend: BatchBackend = session.batch_backend(row)
        path = ws.path(row["path"])
        if row["status"] == COMPILED:
            file_id = backend.upload(path)
            set_file(ws, row["pk"], status=UPLOADED, provider_file_id=file_id)
            row.update(status=UPLOADED, provider_file_id=file_id)
        tag = batch_tag(ws, row)
        batch: BatchInfo | None = None
        if row["status"] == CREATING:
            # We may have created it and died before recording its id: find it, never duplicate it.
            batch = backend.find(tag)
            if batch is not None:
                result.adopted.append(row["path"])
        if batch is None:
            set_file(ws, row["pk"], status=CREATING)
            batch = backend.create(row["provider_file_id"], tag)
        set_file(
            ws,
            row["pk"],
            status=SUBMITTED,
            batch_id=batch.id,
            batch_status=batch.status,
            request_counts=json.dumps(batch.request_counts),
            submitted_at=time.time(),
        )
        result.submitted.append(row["path"])
        if on_file:
            on_file(row["path"])
    return result


@dataclass
class PollResult:
    in_flight: int = 0
    manual: list[str] = field(default_factory=list)  # waiting for `lexpilot-batch ingest`
    cancelled: list[str] = field(default_factory=list)  # asked to cancel: older than --max-wave-age
    finished: list[str] = field(default_factory=list)
    stats: IngestStats = field(default_factory=IngestStats)
    batches: list[dict] = field(default_factory=list)  # for progress displays


def poll_files(ws: Workspace, session: Session, max_age: float | None = None) -> PollResult:
    """Retrieve every in-flight batch; save and ingest the terminal ones; run sync files.

    A batch in flight for longer than `max_age` seconds is cancelled.
    """
    result = PollResult()
    rows = files_in(ws.store.conn, IN_FLIGHT)
    for row in rows:
        if row["status"] == SUBMITTED and row["backend"] == "manual":
            result.in_flight += 1
            result.manual.append(row["path"])
            continue
        if row["status"] == SUBMITTED and row["backend"] == "sync":
            _run_sync(ws, session, row)
            row = file_row(ws.store.conn, row["pk"])
        elif row["status"] == SUBMITTED:
            backend: BatchBackend = session.batch_backend(row)
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
                set_file(ws, row["pk"], batch_status=info.status, request_counts=json.dumps(info.request_counts))
                result.in_flight += 1
                continue
            _download(ws, backend, row, info)
            row = file_row(ws.store.conn, row["pk"])
        result.stats.add(ingest_file(ws, row))
        result.finished.append(row["path"])
    close_finished_waves(ws)
    return result


def _run_sync(ws: Workspace, session: Session, row: dict) -> None:
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
    runner = session.sync_runner(row)
    # disable=None: a bar on a terminal, silence in logs and pipes.
    with tqdm(total=row["n_requests"], desc=f"sync {Path(row['path']).name}", unit="req", disable=None) as bar:

        def progress(saved: int, total: int) -> None:
            bar.total = total
            bar.update(saved - bar.n)

        stats = runner.run(path, out, on_progress=progress)
    counts = {"total": stats.total, "completed": stats.ok, "failed": stats.failed}
    set_file(
        ws,
        row["pk"],
        status=DOWNLOADED,
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
    set_file(
        ws,
        row["pk"],
        status=DOWNLOADED,
        batch_status=info.status,
        request_counts=json.dumps(info.request_counts),
        batch_errors=json.dumps(info.errors, ensure_ascii=False),
        output_file_id=info.output_file_id,
        error_file_id=info.error_file_id,
        finished_at=time.time(),
        **paths,
    )
