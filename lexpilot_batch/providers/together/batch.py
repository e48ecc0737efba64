"""The `batch` backend of `together/` models: Together AI's Batch API.

Built from Together's documentation (https://docs.together.ai/docs/inference/batch/overview,
/tutorial and /manage; https://docs.together.ai/reference/batch-create, /batch-get) and its official
SDKs, `together` 3.x (`resources/batches.py`, `types/batch_job.py`, `types/batch_create_params.py`,
`lib/resources/files.py`: `UploadManager`) and the older `togethercomputer/together-python`
(`src/together/resources/batch.py`: `create_batch`, `get_batch`, `list_batches`;
`src/together/types/batch.py`: `BatchJobStatus`):

- a request file is uploaded the way both SDKs upload (`UploadManager.get_upload_url`, and the
  TypeScript SDK's `src/lib/upload.ts`): `POST /v1/files` with the form `purpose=batch-api`,
  `file_name`, `file_type=jsonl` and the file's SHA-256 `checksum` answers `302` with a signed
  `Location` and the new file's id in `X-Together-File-Id`; the bytes are `PUT` there, and
  `POST /v1/files/{id}/preprocess` finishes the upload. A `409` carries the `file_id` of the same
  file uploaded before (the SDK's `FileAlreadyExistsError`), which is used as it is;
- a job is created with `POST /v1/batches` `{"input_file_id", "endpoint": "/v1/chat/completions",
  "completion_window": "24h", "model_id"}`, whose answer wraps the job: `{"job": {...}, "warning"}`.
  The window "defaults to 24h and cannot be changed" (overview, "Rate limits");
- jobs are listed with `GET /v1/batches` (a plain array, no pages and no documented order), polled
  with `GET /v1/batches/{id}` and cancelled with `POST /v1/batches/{id}/cancel`;
- a job's `status` reads as ours: `VALIDATING` validating, `IN_PROGRESS` in_progress, `COMPLETED`
  completed, `FAILED` failed (its `error` string kept), `EXPIRED` expired, `CANCELLED` cancelled, and
  the older SDK's `CANCELING` cancelling; its `output_file_id` and `error_file_id` are downloaded with
  `GET /v1/files/{id}/content` and read by `together.results`.

**A job carries no metadata and no request counts** (`BatchJob`: `id`, `input_file_id`,
`file_size_bytes`, `status`, `progress` as a percentage, `model_id`, `created_at`, `job_deadline`,
the file ids, `error`), so `tags_batches = False`; but it names its `input_file_id`, which only this
workspace knows (it uploaded the file): after a lost create answer, `engine.recovery` finds the job
made from the file's own upload. The counts are left empty, so `status` shows the file's size.

Every call but the upload's `PUT` goes through the `openai` SDK's HTTP client (its retries,
timeouts and exceptions), so the error policy is the template's; `together.errors` reads them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import openai

from lexpilot_batch.errors import transient_status
from lexpilot_batch.providers.batch import (
    BatchInfo,
    BatchSource,
    BatchStatus,
    CreateUncertain,
)
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.file_batch import retry_after
from lexpilot_batch.providers.openai.batch import OpenAIClientBackend
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.sync.call import http
from lexpilot_batch.providers.together.errors import UploadRefused, failure_of
from lexpilot_batch.util import clock
from lexpilot_batch.util.fileio import file_sha256
from lexpilot_batch.util.redaction import redact_cut

PURPOSE = "batch-api"  # the Files API purpose of a batch input file
BATCHES = "/batches"  # under the base URL, https://api.together.ai/v1
STATUSES = {
    "VALIDATING": BatchStatus.VALIDATING,
    "IN_PROGRESS": BatchStatus.IN_PROGRESS,
    "COMPLETED": BatchStatus.COMPLETED,
    "FAILED": BatchStatus.FAILED,
    "EXPIRED": BatchStatus.EXPIRED,
    "CANCELLED": BatchStatus.CANCELLED,
    "CANCELING": BatchStatus.CANCELLING,  # together-python's BatchJobStatus
    "CANCELLING": BatchStatus.CANCELLING,
}


def seconds(value: Any) -> float | None:
    """A job's timestamp (RFC 3339, `2024-01-15T14:30:00Z`) in seconds since the epoch."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def info(job: dict[str, Any]) -> BatchInfo:
    """A batch job object as a `BatchInfo`."""
    error = job.get("error")
    return BatchInfo(
        id=str(job["id"]),
        status=STATUSES.get(str(job.get("status")).upper(), BatchStatus.IN_PROGRESS),
        output_file_id=job.get("output_file_id") or None,
        error_file_id=job.get("error_file_id") or None,
        errors=[{"code": "batch_failed", "message": error}] if isinstance(error, str) and error else [],
        created_at=seconds(job.get("created_at")),
        input_file_id=job.get("input_file_id") or None,
    )


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        yield from iter(lambda: fh.read(1 << 20), b"")


class TogetherBatchBackend(OpenAIClientBackend):
    noun = "Together batch job"
    tags_batches = False
    newest_first = False  # the listing's order is not documented: read it whole

    def hint(self, endpoint: Endpoint) -> str:
        return f"Check TOGETHER_BASE_URL ({endpoint.base_url}): it ends in /v1"

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    def _upload(self, path: Path, name: str) -> str:
        form = {"purpose": PURPOSE, "file_name": name, "file_type": "jsonl", "checksum": file_sha256(path)}
        started = self._start_upload(form)
        if isinstance(started, str):
            return started  # these very bytes, uploaded before
        location, file_id = started
        size = str(path.stat().st_size)
        put = http.put(location, content=_chunks(path), headers={"Content-Length": size}, timeout=self.timeout)
        if put.status_code != 200:
            raise UploadRefused(put.status_code, f"the signed upload URL answered HTTP {put.status_code}")
        done: Any = self.client.post(f"/files/{file_id}/preprocess", cast_to=object)
        return str(done.get("id") or file_id) if isinstance(done, dict) else file_id

    def _start_upload(self, form: dict[str, Any]) -> str | tuple[str, str]:
        """`POST /files`: the signed URL and the new file's id, or the id of the same file uploaded
        before (409). The SDK's own retries would take a 409 for a conflict to retry, so the call
        is sent without them and retried here on what may pass (no answer, 429, 5xx)."""
        options: Any = {"headers": {"Content-Type": "multipart/form-data"}, "follow_redirects": False}
        client = self.client.with_options(max_retries=0)
        for attempt in range(self.max_retries + 1):
            try:
                answer: Any = client.post("/files", cast_to=object, body=form, options=options)
            except openai.APIStatusError as exc:
                if exc.status_code == 409 and (known := _conflicting_file(exc)):
                    return known
                if exc.status_code == 302:
                    location, file_id = (
                        exc.response.headers.get("Location"),
                        exc.response.headers.get("X-Together-File-Id"),
                    )
                    if not location or not file_id:
                        raise UploadRefused(
                            302, "the upload's answer lacks its Location or X-Together-File-Id"
                        ) from None
                    return location, file_id
                if attempt == self.max_retries or not (exc.status_code == 429 or transient_status(exc.status_code)):
                    raise
                clock.pause(clock.RETRY.wait(attempt, retry_after(exc)))
            except openai.APIConnectionError:
                if attempt == self.max_retries:
                    raise
                clock.pause(clock.RETRY.wait(attempt))
            else:
                raise UploadRefused(
                    200, f"the upload was answered without a signed URL: {redact_cut(str(answer), 200)}"
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        """One create call, without the SDK's retries (creating is not idempotent). `metadata` is not
        sent: a Together job holds none (the file's upload id finds it again)."""
        body: dict[str, Any] = {
            "input_file_id": input_file_id,
            "endpoint": endpoint or self.limits.endpoint,
            "completion_window": self.limits.completion_window,
        }
        if source is not None:
            body["model_id"] = source.model
        answer: Any = self.client.with_options(max_retries=0).post(BATCHES, cast_to=object, body=body)
        job = answer.get("job") if isinstance(answer, dict) else None
        if not isinstance(job, dict) or not job.get("id"):
            # Answered, but without the job: it may exist, and is looked for by its input file.
            raise CreateUncertain(f"creating a {self.noun}: the answer holds no job ({redact_cut(str(answer), 200)})")
        return info(job)

    def _list(self) -> Iterator[BatchInfo]:
        listing: Any = self.client.get(BATCHES, cast_to=object)
        jobs = listing if isinstance(listing, list) else (listing or {}).get("data") or []
        return (info(j) for j in jobs if isinstance(j, dict) and j.get("id"))

    def _retrieve(self, batch_id: str) -> BatchInfo:
        return info(self.client.get(f"{BATCHES}/{batch_id}", cast_to=object))  # type: ignore[arg-type]

    def _cancel(self, batch_id: str) -> BatchInfo:
        return info(self.client.post(f"{BATCHES}/{batch_id}/cancel", cast_to=object))  # type: ignore[arg-type]


def _conflicting_file(exc: openai.APIStatusError) -> str | None:
    """The id a 409 names of the same file uploaded before: read from the answer's own JSON, as
    Together's SDK reads it (`e.response.json()["file_id"]`), since the openai SDK's `body` is the
    answer's `error` member where it has one."""
    try:
        raw = exc.response.json()
    except ValueError:
        raw = None
    for holder in (raw, raw.get("error") if isinstance(raw, dict) else None, exc.body):
        if isinstance(holder, dict) and isinstance(holder.get("file_id"), str) and holder["file_id"]:
            return holder["file_id"]
    return None
