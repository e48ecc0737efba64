"""The `batch` backend of `mistral/` models: Mistral's Batch API.

Built from Mistral's documentation (https://docs.mistral.ai/capabilities/batch) and the routes of
the official `mistralai` SDK (`mistralai/client/jobs.py`, `models/batchjob.py`):

- a request file is uploaded with `POST /v1/files`, `purpose=batch` (the same multipart form as
  OpenAI's Files API, so the `openai` SDK's files client uploads and downloads it: no extra SDK);
- a job is created with `POST /v1/batch/jobs` `{"input_files": [id], "model", "endpoint":
  "/v1/chat/completions", "metadata", "timeout_hours"}`: the model is named by the job, and the
  workspace's tag is the job's `metadata` (string pairs), found again after a lost answer exactly as
  an OpenAI batch's is;
- jobs are listed with `GET /v1/batch/jobs?page&page_size&order_by=-created` (newest first, pages
  counted from 0 up to `total`), polled with `GET /v1/batch/jobs/{id}` and cancelled with
  `POST /v1/batch/jobs/{id}/cancel`;
- a job's `status` reads as ours: `QUEUED` validating, `RUNNING` in_progress, `SUCCESS` completed,
  `FAILED` failed, `TIMEOUT_EXCEEDED` expired (its window, `timeout_hours`, ran out),
  `CANCELLATION_REQUESTED` cancelling, `CANCELLED` cancelled; its `output_file` and `error_file`
  are downloaded with `GET /v1/files/{id}/content` and read by `mistral.results`.

Every call goes through the `openai` SDK's HTTP client (its retries, timeouts and exceptions), so
the error policy is the template's and `mistral.errors` reads Mistral's error bodies
(`{"object": "error", "message", "type", "code"}`, or FastAPI's `{"detail"}` for a 422) as any.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lexpilot_batch.providers.batch import BatchInfo, BatchSource, BatchStatus
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.mistral.errors import failure_of
from lexpilot_batch.providers.openai.batch import OpenAIClientBackend
from lexpilot_batch.providers.routing.endpoints import Endpoint

JOBS = "/batch/jobs"  # under the base URL, https://api.mistral.ai/v1
PAGE_SIZE = 100
STATUSES = {
    "QUEUED": BatchStatus.VALIDATING,
    "RUNNING": BatchStatus.IN_PROGRESS,
    "SUCCESS": BatchStatus.COMPLETED,
    "FAILED": BatchStatus.FAILED,
    "TIMEOUT_EXCEEDED": BatchStatus.EXPIRED,
    "CANCELLATION_REQUESTED": BatchStatus.CANCELLING,
    "CANCELLED": BatchStatus.CANCELLED,
}


def timeout_hours(window: str) -> int:
    """A completion window (`24h`, `2d`) as the job's `timeout_hours`."""
    number, unit = window[:-1], window[-1:]
    hours = int(number) * (24 if unit == "d" else 1) if number.isdigit() and unit in "hd" else 24
    return max(1, hours)


def info(job: dict[str, Any]) -> BatchInfo:
    """A batch job object as a `BatchInfo`."""
    status = STATUSES.get(str(job.get("status")), BatchStatus.IN_PROGRESS)
    errors = [
        {"code": "batch_failed", "message": str(e.get("message"))}
        for e in job.get("errors") or []
        if isinstance(e, dict) and e.get("message")
    ]
    return BatchInfo(
        id=str(job["id"]),
        status=status,
        output_file_id=job.get("output_file") or None,
        error_file_id=job.get("error_file") or None,
        request_counts={
            "total": int(job.get("total_requests") or 0),
            "completed": int(job.get("succeeded_requests") or 0),
            "failed": int(job.get("failed_requests") or 0),
        },
        errors=errors,
        metadata={str(k): str(v) for k, v in (job.get("metadata") or {}).items()},
        created_at=job.get("created_at"),
    )


class MistralBatchBackend(OpenAIClientBackend):
    noun = "Mistral batch job"

    def hint(self, endpoint: Endpoint) -> str:
        return f"Check MISTRAL_BASE_URL ({endpoint.base_url}): it ends in /v1"

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    def _upload(self, path: Path, name: str) -> str:
        with open(path, "rb") as fh:
            return self.client.files.create(file=(name, fh), purpose="batch").id

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        """One create call, without the SDK's retries (creating is not idempotent); the job names the model."""
        if source is None:
            raise ValueError("a Mistral batch job names its model: create it from its workspace file")
        body = {
            "input_files": [input_file_id],
            "model": source.model,
            "endpoint": endpoint or self.limits.endpoint,
            "metadata": metadata,
            "timeout_hours": timeout_hours(self.limits.completion_window),
        }
        return info(self.client.with_options(max_retries=0).post(JOBS, cast_to=object, body=body))  # type: ignore[arg-type]

    def _list(self) -> Iterator[BatchInfo]:
        page, seen = 0, 0
        while True:
            query = {"page": page, "page_size": PAGE_SIZE, "order_by": "-created"}
            listing: Any = self.client.get(JOBS, cast_to=object, options={"params": query})
            jobs = [j for j in (listing.get("data") or []) if isinstance(j, dict)]
            yield from (info(j) for j in jobs)
            seen += len(jobs)
            if not jobs or seen >= int(listing.get("total") or 0):
                return
            page += 1

    def _retrieve(self, batch_id: str) -> BatchInfo:
        return info(self.client.get(f"{JOBS}/{batch_id}", cast_to=object))  # type: ignore[arg-type]

    def _cancel(self, batch_id: str) -> BatchInfo:
        return info(self.client.post(f"{JOBS}/{batch_id}/cancel", cast_to=object))  # type: ignore[arg-type]
