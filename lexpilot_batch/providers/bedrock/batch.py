"""The `batch` backend of `bedrock/` models: Bedrock batch inference through `boto3` (botocore's
service model `bedrock/2023-04-20`; https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference.html
and its pages on input data, creating, monitoring, stopping and results; taken 2026-12-06).

- **upload**: the request file is put in S3 (`PutObject`) under `<BEDROCK_S3_URI>/input/`, named
  as the engine names uploads (its content's hash in it: the same name holds the same bytes, and a
  put sent again replaces the object with itself). A file outside a job's quotas (`bedrock.spec.LIMITS`:
  fewer than 100 records, more than 50,000, over 1 GB) is refused here, naming them: the compiler
  sends a group below the minimum through `InvokeModel` instead (`engine.tail.below_minimum`).
- **create**: `CreateModelInvocationJob` with the model, the input object, `<BEDROCK_S3_URI>/output/`,
  the role, a 24 h timeout, the workspace's tag as the job's `tags`, and a `clientRequestToken`
  made of the tag ("If this token matches a previous request, Amazon Bedrock ignores the request,
  but does not return an error"): one create sent twice is one job. Its `jobName` starts with
  `lexpilot-` and holds the workspace and the token.
- **list**: `ListModelInvocationJobs` of the jobs named `lexpilot-...`, newest first (`sortBy`
  `CreationTime`, `Descending`), pages followed by `nextToken`; a job's tags are read once
  (`ListTagsForResource`) and kept: how a job whose create answer was lost is found again by its tag.
- **poll**: `GetModelInvocationJob`; its status read as ours (`STATUSES`), its record counts as
  the batch's. **cancel**: `StopModelInvocationJob`; a stopped or expired job's results are what it
  wrote before (its file may be missing: read as no results, each request then asked again).
- **results**: `<outputUri>/<job id>/<input file name>.out`, one `{"recordId", "modelInput",
  "modelOutput"}` (or `"error": {"errorCode", "errorMessage"}`) per record, streamed from S3 into
  `responses/` (keys replaced) and read by `bedrock.results`; `manifest.json.out` beside it holds the
  job's counts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from lexpilot_batch.errors import ProviderError
from lexpilot_batch.providers.batch import BatchInfo, BatchSource, BatchStatus
from lexpilot_batch.providers.bedrock import aws
from lexpilot_batch.providers.bedrock.errors import failure_of
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.file_batch import DOWNLOAD_CHUNK, FileBatchBackend
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.spec import Limits
from lexpilot_batch.util import clock
from lexpilot_batch.util.fileio import write_atomic
from lexpilot_batch.util.redaction import save_scrubbed

# `ModelInvocationJobStatus` (botocore's service model) read as ours.
STATUSES = {
    "Submitted": BatchStatus.VALIDATING,
    "Validating": BatchStatus.VALIDATING,
    "Scheduled": BatchStatus.VALIDATING,
    "InProgress": BatchStatus.IN_PROGRESS,
    "Completed": BatchStatus.COMPLETED,
    "PartiallyCompleted": BatchStatus.COMPLETED,  # some records failed: their lines say why
    "Failed": BatchStatus.FAILED,
    "Stopping": BatchStatus.CANCELLING,
    "Stopped": BatchStatus.CANCELLED,
    "Expired": BatchStatus.EXPIRED,
}
NAME_PREFIX = "lexpilot-"  # every job this tool creates is named so (`ListModelInvocationJobs` nameContains)
PARTIAL = "partial:"  # the output "file id" of a stopped or expired job: a missing object is no results
_TAG_VALUE = re.compile(r"[a-zA-Z0-9\s._:/=+@-]{0,256}")  # botocore's `TagValue`
_ENCODED = "b32:"  # a tag value outside that pattern, base32-encoded
_KEY = re.compile(r"[^-!_*'().a-zA-Z0-9]")  # what an S3 key segment of an `S3Uri` may not hold


def token(metadata: dict[str, str]) -> str:
    """The create's `clientRequestToken`: the tag's digest (64 hex digits), the same for the same tag."""
    return hashlib.sha256(json.dumps(metadata, sort_keys=True).encode("utf-8")).hexdigest()


def job_name(metadata: dict[str, str]) -> str:
    """`lexpilot-<workspace>-<token>`, within `ModelInvocationJobName`'s 63 characters."""
    workspace = re.sub(r"[^a-zA-Z0-9]", "", metadata.get("lexpilot_workspace", "") or "x")[:12]
    return f"{NAME_PREFIX}{workspace}-{token(metadata)[:32]}"


def tag_value(value: str) -> str:
    return value if _TAG_VALUE.fullmatch(value) else _ENCODED + base64.b32encode(value.encode("utf-8")).decode("ascii")


def tag_read(value: str) -> str:
    if value.startswith(_ENCODED):
        try:
            return base64.b32decode(value[len(_ENCODED) :]).decode("utf-8")
        except ValueError:
            return value
    return value


def split_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def output_uri(job: dict[str, Any]) -> str | None:
    """Where a job's results are: `<outputUri>/<job id>/<input file name>.out`."""
    out = ((job.get("outputDataConfig") or {}).get("s3OutputDataConfig") or {}).get("s3Uri")
    source = ((job.get("inputDataConfig") or {}).get("s3InputDataConfig") or {}).get("s3Uri")
    if not out or not source:
        return None
    job_id = str(job["jobArn"]).rsplit("/", 1)[-1]
    return f"{out.rstrip('/')}/{job_id}/{PurePosixPath(split_uri(source)[1]).name}.out"


def info(job: dict[str, Any], metadata: dict[str, str] | None = None) -> BatchInfo:
    """A `GetModelInvocationJob` answer (or a listing's summary) as a `BatchInfo`."""
    said = str(job.get("status") or "Submitted")
    status = STATUSES.get(said, BatchStatus.IN_PROGRESS)
    out = output_uri(job)
    output = None
    if out and status == BatchStatus.COMPLETED:
        output = out
    elif out and status in (BatchStatus.CANCELLED, BatchStatus.EXPIRED):
        output = PARTIAL + out
    total = job.get("totalRecordCount")
    counts = {}
    if total is not None:
        succeeded, errored = int(job.get("successRecordCount") or 0), int(job.get("errorRecordCount") or 0)
        counts = {"total": int(total), "completed": succeeded, "failed": errored}
    message = job.get("message")
    errors = [{"code": "batch_failed", "message": str(message)}] if message and status == BatchStatus.FAILED else []
    submitted = job.get("submitTime")
    return BatchInfo(
        id=str(job["jobArn"]),
        status=status,
        output_file_id=output,
        request_counts=counts,
        errors=errors,
        metadata=dict(metadata or {}),
        created_at=submitted.timestamp() if isinstance(submitted, datetime) else None,
    )


class BedrockBatchBackend(FileBatchBackend):
    noun = "Bedrock batch inference job"
    not_found_hint = f"Check {aws.S3_VAR} and the job's Region (AWS_DEFAULT_REGION)"

    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        super().__init__(endpoint, limits, timeout, max_retries)
        self.place = aws.place(endpoint)
        self.bedrock = aws.client(endpoint, "bedrock", timeout, max_retries + 1)
        self.creator = aws.client(endpoint, "bedrock", timeout, 1)  # creating is not retried here
        self.s3 = aws.client(endpoint, "s3", timeout, max_retries + 1)
        self._tags: dict[str, dict[str, str]] = {}  # job ARN -> its tag (tags do not change)

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    def _upload(self, path: Path, name: str) -> str:
        size, records = path.stat().st_size, 0
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                records += chunk.count(b"\n")
        low, high = self.limits.min_requests, self.limits.max_requests
        if records < low or records > high or size > self.limits.max_bytes:
            raise ProviderError(
                f"{path.name}: {records:,} records / {size:,} bytes, where a Bedrock batch inference job takes "
                f"{low:,} to {high:,} records and at most {self.limits.max_bytes // 1_000_000:,} MB (its default "
                "quotas); a smaller group goes through InvokeModel (the sync backend: --tail-sync, or on its own "
                "below the minimum), a larger one is cut with --max-requests-per-file / --max-bytes-per-file"
            )
        stem = _KEY.sub("-", name.removesuffix(".jsonl"))
        key = f"{self.place.prefix}input/{stem}.jsonl"
        with open(path, "rb") as fh:
            self.s3.put_object(Bucket=self.place.bucket, Key=key, Body=fh, ContentType="application/jsonl")
        return self.place.uri(key)

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        if source is None:
            raise ValueError("a Bedrock job names its model: create it from its workspace file")
        hours = max(24, min(168, int(self.limits.completion_window.removesuffix("h") or 24)))
        answer = self.creator.create_model_invocation_job(
            jobName=job_name(metadata),
            roleArn=self.place.role_arn,
            clientRequestToken=token(metadata),
            modelId=source.model,
            inputDataConfig={"s3InputDataConfig": {"s3Uri": input_file_id, "s3InputFormat": "JSONL"}},
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": self.place.uri(f"{self.place.prefix}output/")}},
            timeoutDurationInHours=hours,
            tags=[{"key": k, "value": tag_value(v)} for k, v in metadata.items()],
        )
        arn = str(answer["jobArn"])
        self._tags[arn] = dict(metadata)
        return BatchInfo(id=arn, status=BatchStatus.VALIDATING, metadata=dict(metadata))

    def _list(self) -> Iterator[BatchInfo]:
        query: dict[str, Any] = {
            "nameContains": NAME_PREFIX,
            "sortBy": "CreationTime",
            "sortOrder": "Descending",
            "maxResults": 100,
        }
        while True:
            page = self.bedrock.list_model_invocation_jobs(**query)
            for job in page.get("invocationJobSummaries") or []:
                yield info(job, self._tag_of(job))
            if not page.get("nextToken"):
                return
            query["nextToken"] = page["nextToken"]

    def _tag_of(self, job: dict[str, Any]) -> dict[str, str]:
        """The job's tag (read once: `ListTagsForResource`); {} for a job this tool did not name."""
        arn = str(job["jobArn"])
        if not str(job.get("jobName") or "").startswith(NAME_PREFIX):
            return {}
        if arn not in self._tags:
            tags = self.bedrock.list_tags_for_resource(resourceARN=arn).get("tags") or []
            self._tags[arn] = {str(t["key"]): tag_read(str(t["value"])) for t in tags if t.get("key")}
        return self._tags[arn]

    def _retrieve(self, batch_id: str) -> BatchInfo:
        job = self.bedrock.get_model_invocation_job(jobIdentifier=batch_id)
        return info(job, self._tags.get(batch_id))

    def _cancel(self, batch_id: str) -> BatchInfo:
        self.bedrock.stop_model_invocation_job(jobIdentifier=batch_id)
        return self._retrieve(batch_id)

    def download_what(self, file_id: str) -> str:
        return f"downloading {file_id.removeprefix(PARTIAL)}"

    def _download(self, file_id: str, dest: Path) -> int:
        """Stream the job's output object into `dest`, whole or not at all, its secrets replaced; a
        body that breaks off is fetched again from the start (`max_retries` times). A stopped or
        expired job's missing output object is no results (`PARTIAL`)."""
        bucket, key = split_uri(file_id.removeprefix(PARTIAL))
        for attempt in range(self.max_retries + 1):
            try:
                body = self.s3.get_object(Bucket=bucket, Key=key)["Body"]
                return save_scrubbed(dest, body.iter_chunks(DOWNLOAD_CHUNK))
            except Exception as exc:
                failure = self.failure(exc)
                if failure is not None and failure.status == 404 and file_id.startswith(PARTIAL):
                    write_atomic(dest, b"")
                    return 0
                if failure is None or failure.status is not None or attempt == self.max_retries:
                    raise
                clock.pause(clock.RETRY.wait(attempt))
        raise AssertionError("unreachable")  # pragma: no cover
