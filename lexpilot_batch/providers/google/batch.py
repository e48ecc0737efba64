"""The `batch` backend of `google/` models: Gemini Batch Mode through the official `google-genai` SDK
(an optional extra: `pip install "lexpilot-batch[google]"`).

A file of `{"key", "request"}` lines (`providers.lines`) is uploaded through the File API, a batch is
created for it with `batches.create(model, src=file)` (API version `v1beta`, where Batch Mode
lives), and its responses file is downloaded into `responses/` (keys replaced: `redaction.Scrubber`), to be read by
`google.results`. Gemini batches carry no metadata but a `display_name`: the workspace's tag
is written there (`lexpilot ws=… file=… sha=… create=…`) and read back as metadata, so a batch is
found again after a lost create answer exactly as an OpenAI one is. Job states read as ours:
pending/queued `validating`, running `in_progress`, succeeded `completed`, and failed, cancelling,
cancelled and expired as themselves. A job answered inline (`dest.inlined_responses`, no file)
is read too: its responses are written out as a responses file would hold them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from lexpilot_batch.errors import transient_status
from lexpilot_batch.providers.batch import BatchInfo, BatchSource
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.file_batch import FileBatchBackend, retry_after
from lexpilot_batch.providers.google import client
from lexpilot_batch.providers.google.errors import failure_of
from lexpilot_batch.providers.google.spec import EXTRA
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.spec import Limits
from lexpilot_batch.util import clock, fileio
from lexpilot_batch.util.fileio import TMP_SUFFIX
from lexpilot_batch.util.redaction import Scrubber, save_scrubbed

T = TypeVar("T")

# google-genai's JobState, the same for Gemini Batch Mode and Vertex AI's batch prediction (`vertex.batch`).
JOB_STATES = {
    "JOB_STATE_QUEUED": "validating",
    "JOB_STATE_PENDING": "validating",
    "JOB_STATE_RUNNING": "in_progress",
    "JOB_STATE_UPDATING": "in_progress",
    "JOB_STATE_PAUSED": "in_progress",
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "completed",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLING": "cancelling",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_EXPIRED": "expired",
}

# Metadata keys as they are abbreviated in a display name.
_SHORT = {"lexpilot_workspace": "ws", "lexpilot_file": "file", "lexpilot_sha256": "sha", "lexpilot_create": "create"}
_LONG = {v: k for k, v in _SHORT.items()}
_PREFIX = "lexpilot"
# The output "file" of a job whose `dest` holds `inlined_responses` (google-genai
# `types.BatchJobDestination`) instead of a responses file: the job's name after this prefix.
INLINED = "inlined:"


def inlined_lines(job: Any) -> bytes:
    """A job's inlined responses as the JSONL lines of a responses file (`{"key", "response"}` or
    `{"key", "error"}`), the key taken from each response's metadata."""
    import json

    out = []
    for item in job.dest.inlined_responses or []:
        line: dict[str, Any] = {"key": (item.metadata or {}).get("key")}
        if item.error is not None:
            line["error"] = item.error.model_dump(mode="json", by_alias=True, exclude_none=True)
        else:
            line["response"] = item.response.model_dump(mode="json", by_alias=True, exclude_none=True)
        out.append(json.dumps(line, ensure_ascii=False) + "\n")
    return "".join(out).encode("utf-8")


def display_name(metadata: dict[str, str]) -> str:
    """The workspace's tag as a batch's display name: `lexpilot ws=… file=… sha=… create=…`."""
    return " ".join([_PREFIX, *(f"{_SHORT.get(k, k)}={v}" for k, v in metadata.items())])


def tag_of(name: str | None) -> dict[str, str]:
    """The metadata a display name written by `display_name` holds; {} for any other name."""
    words = (name or "").split(" ")
    if words[0] != _PREFIX:
        return {}
    pairs = [w.partition("=") for w in words[1:]]
    return {_LONG.get(k, k): v for k, sep, v in pairs if sep}


def _state(job: Any) -> str:
    state = getattr(job.state, "value", job.state)
    return JOB_STATES.get(str(state), "in_progress")


def _info(job: Any) -> BatchInfo:
    status = _state(job)
    dest = job.dest
    errors = []
    if status == "failed":
        error = getattr(job, "error", None)
        message = getattr(error, "message", None) or "the Gemini batch job failed (JOB_STATE_FAILED)"
        errors.append({"code": "batch_failed", "message": message})
    output = dest.file_name if dest is not None and dest.file_name else None
    if output is None and dest is not None and getattr(dest, "inlined_responses", None):
        output = INLINED + str(job.name)  # answered inline: `_download` writes them out as a file
    return BatchInfo(
        id=job.name,
        status=status,
        output_file_id=output,
        errors=errors,
        metadata=tag_of(job.display_name),
        created_at=job.create_time.timestamp() if job.create_time is not None else None,
    )


class GoogleBatchBackend(FileBatchBackend):
    noun = "Gemini batch"
    newest_first = False  # the listing's order is not documented: every page is read

    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        super().__init__(endpoint, limits, timeout, max_retries)
        genai = EXTRA.require()
        self.errors = EXTRA.require("google.genai.errors")
        self.types = EXTRA.require("google.genai.types")
        self.client = genai.Client(
            vertexai=False, api_key=endpoint.require_key(), http_options=self._options(timeout, max_retries)
        )

    def _options(self, timeout: float, max_retries: int) -> Any:
        return client.http_options(self.types, self.endpoint, timeout, max_retries)

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(self.errors, exc)

    def _upload(self, path: Path, name: str) -> str:
        uploaded = self.client.files.upload(file=path, config={"mime_type": "jsonl", "display_name": name})
        return str(uploaded.name)

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        """One create call, without the SDK's retries, tagged in its display name; the model is
        named here, not in the lines."""
        if source is None:
            raise ValueError("a Gemini batch names its model: create it from its workspace file")
        config = {"display_name": display_name(metadata), "http_options": self._options(self.timeout, 0)}
        return _info(self.client.batches.create(model=source.model, src=input_file_id, config=config))

    def _list(self) -> Iterator[BatchInfo]:
        return (_info(job) for job in self.client.batches.list(config={"page_size": 100}))

    def _retrieve(self, batch_id: str) -> BatchInfo:
        return _info(self.client.batches.get(name=batch_id))

    def _download(self, file_id: str, dest: Path) -> int:
        """Save the responses file at `dest`: streamed into a temporary file beside it, which then
        replaces it whole, through a `redaction.Scrubber` (the SDK writes each chunk to `_Scrubbed`),
        so that no key it may hold reaches the disk. Returns how many secrets were replaced."""
        part = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if file_id.startswith(INLINED):
            job = self._again(lambda: self.client.batches.get(name=file_id[len(INLINED) :]))
            return save_scrubbed(dest, [inlined_lines(job)])

        def fetch() -> int:
            scrubber = Scrubber()
            with open(part, "wb") as fh:  # each try from the start
                self.client.files.download(file=file_id, destination=_Scrubbed(fh, scrubber))
                fh.write(scrubber.close())
                fh.flush()
                os.fsync(fh.fileno())
            return scrubber.replaced

        try:
            replaced = self._again(fetch)
            fileio.replace(part, dest)
        finally:
            part.unlink(missing_ok=True)
        return replaced

    def _again(self, fn: Callable[[], T]) -> T:
        """`fn`, tried again after a 408, 429 or 5xx answer or a dropped connection: the SDK retries
        its JSON calls itself, not a file's download (an idempotent GET)."""
        for attempt in range(self.max_retries + 1):
            try:
                return fn()
            except Exception as exc:
                failure = self.failure(exc)
                transient = failure is not None and (failure.status is None or transient_status(failure.status))
                if not transient or attempt == self.max_retries:
                    raise
                clock.pause(clock.Backoff(client.RETRY_DELAY, client.MAX_DELAY).wait(attempt, retry_after(exc)))
        raise AssertionError("unreachable")

    def _cancel(self, batch_id: str) -> BatchInfo:
        self.client.batches.cancel(name=batch_id)
        return self._retrieve(batch_id)


class _Scrubbed:
    """A writable stream the SDK writes a download's chunks to: each passes through the scrubber first."""

    def __init__(self, fh: BinaryIO, scrubber: Scrubber) -> None:
        self.fh, self.scrubber = fh, scrubber

    def write(self, chunk: bytes) -> int:
        self.fh.write(self.scrubber.feed(chunk))
        return len(chunk)
