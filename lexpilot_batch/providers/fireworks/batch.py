"""The `batch` backend of `fireworks/` models: Fireworks AI's batch inference jobs.

Built from Fireworks' documentation (https://docs.fireworks.ai/guides/batch-inference; the API
reference's create-dataset, upload-dataset-files, get-dataset, get-dataset-download-endpoint,
create/get/list/delete-batch-inference-job pages; firectl's `batch-inference-job` commands) and its
official SDK, `fireworks-ai` 1.2.30 (`resources/datasets.py`, `resources/batch_inference_jobs.py`,
`types/batch_inference_job.py`, `types/dataset.py`, `_client.py`; all taken 2026-12-06). Every path
is under `{FIREWORKS_BASE_URL}/v1/accounts/{account}`:

- the account is `FIREWORKS_ACCOUNT_ID`, the SDK's variable (`Fireworks(account_id=...)` reads it);
  unset, it is the one account `GET /v1/accounts` lists for the key (the SDK's `accounts.list`),
  and several are a `ConfigError` asking for the variable. Neither it nor the key is written anywhere;
- a request file becomes a dataset: `POST /datasets` `{"datasetId", "dataset": {"displayName",
  "userUploaded": {}, "exampleCount"}}`, then `POST /datasets/{id}:upload` with the file as the
  multipart `file` ("file sizes up to 150Mb": the SDK's `datasets.upload`), then `GET
  /datasets/{id}` until its `state` is `READY`. The dataset's id is a digest of the upload's name
  (`recovery.upload_name`: the workspace's tag, the copy, the content's hash, the file's name), so
  an upload whose answer was lost is the same dataset when it is sent again (409 ALREADY_EXISTS: a
  `READY` one is used as it is, another is uploaded into again);
- a job is created with `POST /batchInferenceJobs?batchInferenceJobId={id}` `{"model",
  "inputDatasetId", "displayName"}` (the model is the job's: the lines name none), the id a digest
  of the create's tag (`recovery.batch_tag`), so that the same create sent again is answered 409
  and read back, never made twice;
- jobs are listed with `GET /batchInferenceJobs` (`pageSize` up to 200, `nextPageToken`), polled
  with `GET /batchInferenceJobs/{id}`. **There is no cancel**: neither the API reference nor the
  SDK (`batch_inference_jobs`: create, list, get, delete) nor firectl has one; a job is stopped by
  deleting it (`DELETE`), after which it reads `JOB_STATE_DELETING...` and then not at all. Whether
  a deleted job's output dataset keeps what it finished is not documented, so a cancelled job here
  has no result files: its requests count as never run;
- a job's `state` (the SDK's `JobState` literal) reads as ours in `STATES`; `JOB_STATE_EXPIRED`
  keeps what it finished ("Any completed requests up to that point are saved to the output
  dataset", the guide's "Reference"), as a completed job does: both name their `outputDatasetId`,
  whose two files (results and errors) are this backend's `{dataset}#results` and
  `{dataset}#errors`, downloaded from the signed URLs `GET /datasets/{id}:getDownloadEndpoint`
  answers (`filenameToSignedUrls`; the file whose name holds "error" is the error file). A failed
  job's status message says why.

**A job carries no metadata**, so `tags_batches = False`: after a lost create answer,
`engine.recovery` finds the job made from the file's own dataset (`inputDatasetId`), which only this
workspace uploaded. Every call but the signed downloads goes through the `openai` SDK's HTTP client
(its retries, timeouts and exceptions); `fireworks.errors` reads them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import openai

from lexpilot_batch.errors import ConfigError, ProviderError, ProviderUnavailable
from lexpilot_batch.providers.batch import BatchInfo, BatchSource, BatchStatus
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.file_batch import DOWNLOAD_CHUNK, FileBatchBackend
from lexpilot_batch.providers.fireworks.errors import DownloadRefused, Unreadable, failure_of
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.spec import Limits
from lexpilot_batch.providers.sync.call import http
from lexpilot_batch.util import clock
from lexpilot_batch.util.redaction import redact_cut, save_scrubbed

ACCOUNT_VAR = "FIREWORKS_ACCOUNT_ID"  # the SDK's (`_client.py`)
DEFAULT_HOST = "https://api.fireworks.ai"  # the SDK's default base URL
JOBS = "batchInferenceJobs"
PAGE = 200  # `pageSize`: "The maximum page_size is 200"
RESULTS, ERRORS = "results", "errors"
FILE = "#"  # between a dataset and which of its files: `{dataset}#results`
READY_LOOKS = 12  # polls of a dataset until it is READY, backing off to 5 s (`READY`)
READY = clock.Backoff(0.25, 5.0)
V = BatchStatus
STATES = {
    "JOB_STATE_UNSPECIFIED": V.VALIDATING,
    "JOB_STATE_VALIDATING": V.VALIDATING,
    "JOB_STATE_CREATING_INPUT_DATASET": V.VALIDATING,
    "JOB_STATE_CREATING": V.IN_PROGRESS,
    "JOB_STATE_PENDING": V.IN_PROGRESS,
    "JOB_STATE_RUNNING": V.IN_PROGRESS,
    "JOB_STATE_RE_QUEUEING": V.IN_PROGRESS,
    "JOB_STATE_IDLE": V.IN_PROGRESS,
    "JOB_STATE_PAUSED": V.IN_PROGRESS,
    "JOB_STATE_WRITING_RESULTS": V.FINALIZING,
    "JOB_STATE_COMPLETED": V.COMPLETED,
    "JOB_STATE_FAILED": V.FAILED,
    "JOB_STATE_EXPIRED": V.EXPIRED,
    "JOB_STATE_EARLY_STOPPED": V.EXPIRED,  # stopped before the end, what it finished kept
    "JOB_STATE_CANCELLING": V.CANCELLING,
    "JOB_STATE_CANCELLED": V.CANCELLED,
    "JOB_STATE_DELETING": V.CANCELLED,  # deleted: how a job is stopped (module docstring)
    "JOB_STATE_DELETING_CLEANING_UP": V.CANCELLED,
}
_WITH_RESULTS = frozenset({V.COMPLETED, V.EXPIRED})
_FRACTION = re.compile(r"\.(\d{6})\d+")


def seconds(value: Any) -> float | None:
    """A `createTime` (RFC 3339, nanoseconds and `Z` allowed) in seconds since the epoch."""
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = datetime.fromisoformat(_FRACTION.sub(r".\1", value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).timestamp()


def short(name: Any) -> str:
    """A resource's id: the last part of its name (`accounts/a/datasets/d` -> `d`)."""
    return str(name or "").rstrip("/").rsplit("/", 1)[-1]


def digest_id(*parts: object) -> str:
    """A resource id of ours: `lp-` and 40 hex digits (ids are lowercase letters, digits and hyphens)."""
    return "lp-" + hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:40]


def job_id_of(metadata: dict[str, str]) -> str:
    """The id of the job a create with this tag makes: the same create sent again names the same job."""
    return digest_id("job", json.dumps(metadata, sort_keys=True, ensure_ascii=False))


def info(job: Any) -> BatchInfo:
    """A `BatchInferenceJob` as a `BatchInfo`."""
    if not isinstance(job, dict) or not job.get("name"):
        raise Unreadable(f"an answer that is no batch inference job: {redact_cut(str(job), 200)}")
    status = STATES.get(str(job.get("state")), V.IN_PROGRESS)
    said: dict[str, Any] = job["status"] if isinstance(job.get("status"), dict) else {}
    message = said.get("message") if status == V.FAILED else None
    progress: dict[str, Any] = job["jobProgress"] if isinstance(job.get("jobProgress"), dict) else {}
    counts = {
        key: int(progress.get(field) or 0)
        for key, field in (
            ("total", "totalInputRequests"),
            ("completed", "successfullyProcessedRequests"),
            ("failed", "failedRequests"),
        )
    }
    output = short(job.get("outputDatasetId")) if status in _WITH_RESULTS else ""
    return BatchInfo(
        id=short(job["name"]),
        status=status,
        output_file_id=f"{output}{FILE}{RESULTS}" if output else None,
        error_file_id=f"{output}{FILE}{ERRORS}" if output else None,
        request_counts=counts if progress else {},
        errors=[{"code": str(said.get("code") or "batch_failed"), "message": str(message)}] if message else [],
        created_at=seconds(job.get("createTime")),
        input_file_id=short(job.get("inputDatasetId")) or None,
    )


def host_of(base_url: str) -> str:
    """`FIREWORKS_BASE_URL` as the SDK takes it, the host (`https://api.fireworks.ai`), also when
    given with the inference API's `/inference/v1` or the control plane's `/v1`."""
    return base_url.rstrip("/").removesuffix("/inference/v1").removesuffix("/v1")


class FireworksBatchBackend(FileBatchBackend):
    noun = "Fireworks batch inference job"
    tags_batches = False
    newest_first = False  # listed by `create_time` ascending: read whole

    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        super().__init__(endpoint, limits, timeout, max_retries)
        self.not_found_hint = f"Check FIREWORKS_BASE_URL ({endpoint.base_url}, the host) and {ACCOUNT_VAR}"
        self.client = openai.OpenAI(
            base_url=host_of(endpoint.base_url) + "/v1",
            api_key=endpoint.require_key(),
            timeout=timeout,
            max_retries=max_retries,
        )
        self._account: str | None = None

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    # --- the account ----------------------------------------------------------------------------

    @property
    def base(self) -> str:
        """`/accounts/{account}`, the account read once (module docstring)."""
        if self._account is None:
            given = os.environ.get(ACCOUNT_VAR, "").strip()
            if not given:
                page: Any = self.call(
                    "listing the Fireworks accounts of the key", lambda: self.client.get("/accounts", cast_to=object)
                )
                listed = page.get("accounts") if isinstance(page, dict) else None
                names = sorted({short(a.get("name")) for a in listed or [] if isinstance(a, dict) and a.get("name")})
                if len(names) != 1:
                    reach = f"the key reaches {', '.join(names)}" if names else "the key lists no account"
                    raise ConfigError(
                        f"set {ACCOUNT_VAR} to your Fireworks account id ({reach}); `firectl whoami` shows it"
                    )
                given = names[0]
            self._account = given
        return f"/accounts/{self._account}"

    # --- datasets -------------------------------------------------------------------------------

    def _upload(self, path: Path, name: str) -> str:
        size, lines = path.stat().st_size, 0
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                lines += chunk.count(b"\n")
        if size > self.limits.max_bytes or lines > self.limits.max_requests:
            raise ProviderError(
                f"{path.name}: {lines:,} requests / {size:,} bytes exceed a Fireworks dataset upload "
                f"({self.limits.max_requests:,} / {self.limits.max_bytes // 1_000_000} MB); compile it again with "
                "--max-requests-per-file / --max-bytes-per-file within those limits"
            )
        dataset = digest_id("dataset", name)
        body = {
            "datasetId": dataset,
            "dataset": {"displayName": name[:63], "userUploaded": {}, "exampleCount": str(lines)},
        }
        try:
            self.client.post(f"{self.base}/datasets", cast_to=object, body=body)
        except openai.APIStatusError as exc:
            if exc.status_code != 409:
                raise
            if self._state(dataset) == "READY":  # these very bytes, uploaded before
                return dataset
        with open(path, "rb") as fh:
            self.client.post(
                f"{self.base}/datasets/{dataset}:upload",
                cast_to=object,
                body={},
                files=[("file", (name, fh, "application/jsonl"))],
                options={"headers": {"Content-Type": "multipart/form-data"}},
            )
        for attempt in range(READY_LOOKS):
            if self._state(dataset) == "READY":
                return dataset
            clock.pause(READY.wait(attempt))
        raise ProviderUnavailable(
            f"Fireworks dataset {dataset} is not READY after its upload; run the same command again (it is not uploaded twice)"
        )

    def _state(self, dataset: str) -> str:
        answer: Any = self.client.get(f"{self.base}/datasets/{dataset}", cast_to=object)
        return str(answer.get("state")) if isinstance(answer, dict) else ""

    # --- jobs -----------------------------------------------------------------------------------

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        """One create call, without the SDK's retries; sent again with the same tag (a lost answer),
        the same job is answered 409 and read back."""
        if source is None:
            raise ValueError("a Fireworks job names its model: it is created from its workspace file")
        job = job_id_of(metadata)
        body = {
            "model": source.model,
            "inputDatasetId": f"{self.base.lstrip('/')}/datasets/{input_file_id}",
            "displayName": Path(metadata.get("lexpilot_file", job)).stem[:63],
        }
        try:
            answer: Any = self.client.with_options(max_retries=0).post(
                f"{self.base}/{JOBS}", cast_to=object, body=body, options={"params": {"batchInferenceJobId": job}}
            )
        except openai.APIStatusError as exc:
            if exc.status_code != 409:
                raise
            return self._retrieve(job)  # this very create, made before its answer was lost
        return info(answer)

    def _list(self) -> Iterator[BatchInfo]:
        token: str | None = None
        while True:
            query: dict[str, Any] = {"pageSize": PAGE, **({"pageToken": token} if token else {})}
            page: Any = self.client.get(f"{self.base}/{JOBS}", cast_to=object, options={"params": query})
            if not isinstance(page, dict):  # not a listing: never read as an empty one
                raise Unreadable(f"an answer that is no list of batch inference jobs: {redact_cut(str(page), 200)}")
            jobs = page.get(JOBS)
            yield from (info(j) for j in jobs or [] if isinstance(j, dict) and j.get("name"))
            token = page.get("nextPageToken")
            if not jobs or not token:
                return

    def _retrieve(self, batch_id: str) -> BatchInfo:
        return info(self.client.get(f"{self.base}/{JOBS}/{batch_id}", cast_to=object))

    def _cancel(self, batch_id: str) -> BatchInfo:
        """`DELETE` (the only way to stop a job), then the job as it reads now: gone at once, cancelled."""
        self.client.delete(f"{self.base}/{JOBS}/{batch_id}", cast_to=object)
        try:
            return self._retrieve(batch_id)
        except openai.NotFoundError:
            return BatchInfo(id=batch_id, status=V.CANCELLED)

    # --- results --------------------------------------------------------------------------------

    def download_what(self, file_id: str) -> str:
        dataset, _, kind = file_id.partition(FILE)
        return f"downloading the {kind} file of Fireworks dataset {dataset}"

    def _download(self, file_id: str, dest: Path) -> int:
        """The dataset's results (or error) file, from fresh signed URLs each try, written whole or
        not at all, its secrets replaced (`redaction.Scrubber`). A body broken off part-way, or a
        signed URL refused (expired: they last minutes), is tried again; an error file the dataset
        does not hold is an empty one."""
        dataset, _, kind = file_id.partition(FILE)
        tries = self.max_retries + 1
        for attempt in range(tries):
            try:
                return save_scrubbed(dest, self._bytes(dataset, kind))
            except (http.TransportError, DownloadRefused) as exc:
                refused = isinstance(exc, DownloadRefused) and exc.status not in (
                    None,
                    403,
                    408,
                    429,
                    500,
                    502,
                    503,
                    504,
                )
                if refused or attempt + 1 >= tries:
                    raise
                clock.pause(clock.RETRY.wait(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def _bytes(self, dataset: str, kind: str) -> Iterator[bytes]:
        answer: Any = self.client.get(f"{self.base}/datasets/{dataset}:getDownloadEndpoint", cast_to=object)
        urls = answer.get("filenameToSignedUrls") if isinstance(answer, dict) else None
        if not isinstance(urls, dict):
            raise DownloadRefused(None, f"an answer without signed URLs: {redact_cut(str(answer), 200)}")
        files = sorted(n for n in urls if ("error" in short(n).lower()) == (kind == ERRORS))
        if not files and kind == RESULTS:
            raise DownloadRefused(
                404, f"Fireworks dataset {dataset} holds no results file ({', '.join(sorted(urls)) or 'no file'})"
            )
        ended = True
        for name in files:
            if not ended:
                yield b"\n"
            with http.stream("GET", str(urls[name]), timeout=self.timeout) as response:  # no key: the URL is signed
                if response.status_code != 200:
                    raise DownloadRefused(
                        response.status_code, f"the signed URL of {short(name)} answered HTTP {response.status_code}"
                    )
                for chunk in response.iter_bytes(DOWNLOAD_CHUNK):
                    if chunk:
                        ended = chunk.endswith(b"\n")
                        yield chunk
