"""The `batch` backend of `vertex/` models: Vertex AI batch prediction of Gemini models
(`batchPredictionJobs`) through the official `google-genai` SDK in its Vertex mode
(`Client(vertexai=True)`, whose `batches` create, get, list and cancel these jobs), its files in
Cloud Storage (`gcs`).

- **Upload**: the workspace's `{"key", "request"}` lines (Gemini's, `google.lines`) become Vertex's
  `{"request"}` lines, the key moved into the request's `labels` (`ids`), and are stored as one
  object under the bucket's `lexpilot/input/`.
- **Create**: `batches.create(model, src=gs://..., config={display_name, dest})`; the model is
  named here (`publishers/google/models/<model>`, the SDK's `t_model`). Vertex's job create takes
  `labels` but google-genai's `CreateBatchJobConfig` does not, and a display name holds 128
  characters, fewer than the workspace's tag: the tag is written into the job's output prefix
  (`gs://bucket/lexpilot/output/ws=…/file=…/sha=…/create=…/<random>/`, `tag_path`), which the job
  keeps (`outputConfig.gcsDestination.outputUriPrefix`) and every listing shows, so a job is found
  again after a lost create answer as any other provider's batch is.
- **States**: queued and pending read `validating`; running and updating `in_progress`; succeeded
  and partially succeeded `completed` (a request that failed says so on its own line); failed,
  cancelling, cancelled and expired as themselves.
- **Results**: Vertex writes `predictions.jsonl` files (`{"status", "processed_time", "request",
  "response"}` lines) under the job's `outputInfo.gcsOutputDirectory`, and on a cancel or expiry
  "all completed rows are exported" there: every such file is downloaded, their lines saved as
  one results file.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from lexpilot_batch.errors import transient_status
from lexpilot_batch.providers.batch import BatchInfo, BatchSource
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.file_batch import FileBatchBackend, retry_after
from lexpilot_batch.providers.google.batch import JOB_STATES
from lexpilot_batch.providers.google.client import MAX_DELAY, RETRY_DELAY
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.spec import Limits
from lexpilot_batch.providers.vertex import settings
from lexpilot_batch.providers.vertex.errors import failure_of
from lexpilot_batch.providers.vertex.gcs import Gcs, split
from lexpilot_batch.providers.vertex.ids import LABEL
from lexpilot_batch.providers.vertex.spec import API_VERSION, EXTRA
from lexpilot_batch.util import clock
from lexpilot_batch.util.redaction import save_scrubbed

T = TypeVar("T")

_ENDED = frozenset({"completed", "failed", "cancelled", "expired"})
# Metadata keys as the output prefix abbreviates them.
_SHORT = {
    "lexpilot_workspace": "ws",
    "lexpilot_instance": "inst",
    "lexpilot_file": "file",
    "lexpilot_sha256": "sha",
    "lexpilot_create": "create",
}
_LONG = {v: k for k, v in _SHORT.items()}
TAGGED = "lexpilot/output/"  # where a tagged output prefix starts inside the bucket's prefix
_DISPLAY_MAX = 128  # a Vertex resource's display name, in UTF-8 characters


def tag_path(metadata: dict[str, str]) -> str:
    """The workspace's tag as path segments: `ws=…/file=…/sha=…/create=…` (each value quoted)."""
    return "/".join(f"{_SHORT.get(k, k)}={quote(v, safe='')}" for k, v in metadata.items())


def tag_of(uri: str | None) -> dict[str, str]:
    """The metadata an output prefix written by `tag_path` holds; {} for any other."""
    _, _, rest = (uri or "").partition(TAGGED)
    if not rest:
        return {}
    found = {}
    for segment in rest.split("/"):
        key, sep, value = segment.partition("=")
        if sep:
            found[_LONG.get(key, key)] = unquote(value)
    return found


def vertex_line(raw: bytes) -> bytes:
    """One workspace `{"key", "request"}` line as Vertex's `{"request"}` line, the key in its
    request's labels (`ids`); b"" for a blank line."""
    if not raw.strip():
        return b""
    line = json.loads(raw)
    request = dict(line.get("request") or {})
    request["labels"] = {**(request.get("labels") or {}), LABEL: line["key"]}
    return (json.dumps({"request": request}, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def vertex_lines(data: bytes) -> bytes:
    """The workspace's lines as Vertex's (`vertex_line`)."""
    return b"".join(vertex_line(raw) for raw in data.splitlines())


def _state(job: Any) -> str:
    state = getattr(job.state, "value", job.state)
    return JOB_STATES.get(str(state), "in_progress")


def _info(job: Any) -> BatchInfo:
    status = _state(job)
    dest = getattr(job.dest, "gcs_uri", None) if job.dest is not None else None
    errors = []
    if status == "failed":
        message = getattr(job.error, "message", None)
        errors.append({"code": "batch_failed", "message": message or "the Vertex batch job failed (JOB_STATE_FAILED)"})
    output = None
    if status in _ENDED:
        output = getattr(job.output_info, "gcs_output_directory", None) or dest
    src = getattr(job.src, "gcs_uri", None) if job.src is not None else None
    return BatchInfo(
        id=str(job.name),
        status=status,
        output_file_id=output,
        errors=errors,
        metadata=tag_of(dest),
        created_at=job.create_time.timestamp() if job.create_time is not None else None,
        input_file_id=src[0] if src else None,
    )


class VertexBatchBackend(FileBatchBackend):
    noun = "Vertex batch job"
    newest_first = False  # the listing's order is not documented: every page is read

    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        super().__init__(endpoint, limits, timeout, max_retries)
        genai = EXTRA.require()
        self.errors = EXTRA.require("google.genai.errors")
        self.types = EXTRA.require("google.genai.types")
        self.where = settings.settings_of(endpoint)
        creds = settings.credentials(endpoint)
        self.client = genai.Client(
            vertexai=True,
            project=self.where.project,
            location=self.where.location,
            credentials=creds,
            http_options=self._options(timeout, max_retries),
        )
        from google.auth.transport.requests import AuthorizedSession

        self.gcs = Gcs(AuthorizedSession(creds), self.where.storage_url, timeout)

    def _options(self, timeout: float, max_retries: int) -> Any:
        retry = self.types.HttpRetryOptions(
            attempts=max_retries + 1, initial_delay=RETRY_DELAY, jitter=RETRY_DELAY, max_delay=MAX_DELAY
        )
        return self.types.HttpOptions(
            base_url=self.where.vertex_url, api_version=API_VERSION, timeout=int(timeout * 1000), retry_options=retry
        )

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(self.errors, exc)

    def _upload(self, path: Path, name: str) -> str:
        """The file's lines as Vertex's (`vertex_line`), written a line at a time into a temporary
        file and streamed from there (an input file may hold 1 GB), stored once under a name of
        its own."""
        object_name = f"{self.where.prefix}lexpilot/input/{uuid.uuid4().hex[:12]}/{Path(name).name}"
        with tempfile.TemporaryDirectory(prefix="lexpilot-vertex-") as folder:
            converted = Path(folder) / "input.jsonl"
            with open(path, "rb") as source, open(converted, "wb") as out:
                for raw in source:
                    out.write(vertex_line(raw))
            with open(converted, "rb") as fh:
                return self.gcs.upload(self.where.bucket, object_name, fh)

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        """One create call, without the SDK's retries; the tag in the output prefix (module docstring)."""
        if source is None:
            raise ValueError("a Vertex batch job names its model: create it from its workspace file")
        tagged = "".join(f"{segment}/" for segment in [tag_path(metadata)] if segment)
        dest = f"gs://{self.where.bucket}/{self.where.prefix}{TAGGED}{tagged}{uuid.uuid4().hex[:12]}/"
        name = " ".join(["lexpilot", *(f"{_SHORT.get(k, k)}={v}" for k, v in metadata.items())])
        config = {
            "display_name": name[:_DISPLAY_MAX],
            "dest": dest,
            "http_options": self._options(self.timeout, 0),
        }
        return _info(self.client.batches.create(model=source.model, src=input_file_id, config=config))

    def _list(self) -> Iterator[BatchInfo]:
        return (_info(job) for job in self.client.batches.list(config={"page_size": 100}))

    def _retrieve(self, batch_id: str) -> BatchInfo:
        return _info(self.client.batches.get(name=batch_id))

    def _cancel(self, batch_id: str) -> BatchInfo:
        self.client.batches.cancel(name=batch_id)
        return self._retrieve(batch_id)

    def _download(self, file_id: str, dest: Path) -> int:
        """Every `predictions*.jsonl` under the output directory `file_id`, in name order, saved as
        one file, whole or not at all, through a `redaction.Scrubber`; a listing or a body that
        breaks off is fetched again from the start. What the files hold is checked by the
        engine's download check, as every API's results are (a damaged file is fetched again
        there, and counted). Returns how many secrets were replaced."""
        bucket, prefix = split(file_id)
        prefix = prefix.rstrip("/") + "/" if prefix else ""

        def fetch() -> int:
            found = sorted(o.name for o in self.gcs.objects(bucket, prefix) if _predictions(o.name))

            def chunks() -> Iterator[bytes]:
                for name in found:
                    yield from self.gcs.chunks(bucket, name)

            return save_scrubbed(dest, chunks())  # streamed: whole or not at all

        return self._again(fetch)

    def _again(self, fn: Callable[[], T]) -> T:
        """`fn`, tried again after a 408, 429 or 5xx answer or a dropped connection (Cloud Storage's
        calls are idempotent GETs here)."""
        for attempt in range(self.max_retries + 1):
            try:
                return fn()
            except Exception as exc:
                failure = self.failure(exc)
                transient = failure is not None and (failure.status is None or transient_status(failure.status))
                if not transient or attempt == self.max_retries:
                    raise
                clock.pause(clock.Backoff(RETRY_DELAY, MAX_DELAY).wait(attempt, retry_after(exc)))
        raise AssertionError("unreachable")


def _predictions(name: str) -> bool:
    """A results file of a Gemini batch job: `.../predictions.jsonl` (or a numbered shard of it)."""
    base = name.rsplit("/", 1)[-1]
    return base.startswith("predictions") and base.endswith(".jsonl")
