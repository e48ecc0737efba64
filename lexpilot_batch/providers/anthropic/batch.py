"""The `batch` backend of `anthropic/` models: Message Batches through the official `anthropic` SDK
(an optional extra: `pip install "lexpilot-batch[anthropic]"`).

Message Batches take their requests inline, so "uploading" a file is checking it against the
API's limits (100,000 requests, 256 MB) and noting its hash; the create call sends the file's
lines, already `{"custom_id", "params"}` requests (`providers.lines`), as they are. A batch's
`processing_status` (`in_progress`, `canceling`, `ended`) reads as ours: an ended batch whose
cancel was asked is `cancelled`, one with expired requests `expired`, any other `completed`
(errored requests are lines of its results). Its results are streamed into `responses/` (keys replaced)
and read by `anthropic.results`.

Message Batches carry no metadata (`tags_batches = False`): how a batch whose create answer was
lost is found again without a tag is `engine.recovery`'s to decide.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from lexpilot_batch.errors import ProviderError
from lexpilot_batch.providers.anthropic.errors import failure_of
from lexpilot_batch.providers.anthropic.spec import EXTRA, LIMITS
from lexpilot_batch.providers.batch import BatchInfo, BatchSource
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.file_batch import FileBatchBackend, save_streamed
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.spec import Limits
from lexpilot_batch.util.fileio import file_sha256

INLINE = "inline:"  # the "file id" of a checked file: its hash, verified again when it is created
# A Message Batch's limits: the `anthropic` profile's (`anthropic.spec.LIMITS`), the one home of them.
MAX_REQUESTS, MAX_BYTES = LIMITS.max_requests, LIMITS.max_bytes


def _seconds(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _info(batch: Any) -> BatchInfo:
    counts = batch.request_counts
    if batch.processing_status == "ended":
        status = "cancelled" if batch.cancel_initiated_at else "expired" if counts.expired else "completed"
    else:
        status = {"canceling": "cancelling"}.get(batch.processing_status, "in_progress")
    return BatchInfo(
        id=batch.id,
        status=status,
        output_file_id=batch.id if batch.results_url else None,  # results are fetched by batch id
        request_counts={
            "total": counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired,
            "completed": counts.succeeded,
            "failed": counts.errored + counts.canceled + counts.expired,
        },
        created_at=_seconds(batch.created_at),
    )


class AnthropicBatchBackend(FileBatchBackend):
    tags_batches = False
    noun = "Message Batch"

    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        super().__init__(endpoint, limits, timeout, max_retries)
        self.sdk = EXTRA.require()
        self.message_batch = EXTRA.require("anthropic.types.messages").MessageBatch
        self.client = self.sdk.Anthropic(
            base_url=endpoint.base_url, api_key=endpoint.require_key(), timeout=timeout, max_retries=max_retries
        )

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(self.sdk, exc)

    def _upload(self, path: Path, name: str) -> str:
        """Nothing leaves the workspace: the file is checked against the batch limits, and its hash
        is what `create` checks again before it sends the file."""
        size, lines = path.stat().st_size, 0
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                lines += chunk.count(b"\n")
        if lines > MAX_REQUESTS or size > MAX_BYTES:
            raise ProviderError(
                f"{path.name}: {lines:,} requests / {size:,} bytes exceed a Message Batch "
                f"({MAX_REQUESTS:,} / {MAX_BYTES // (1 << 20)} MB); compile it again with --max-requests-per-file / "
                "--max-bytes-per-file within those limits"
            )
        return INLINE + (file_sha256(path) or "")[:32]

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        """One create call carrying the file's requests: its lines, streamed as the JSON array they
        make (a 256 MB file is never held whole)."""
        if source is None:
            raise ValueError("a Message Batch is created from its workspace file")
        if INLINE + (file_sha256(source.path) or "")[:32] != input_file_id:
            raise ProviderError(
                f"{source.path.name} changed on disk after it was checked for sending; it is not sent. "
                "Run `lexpilot-batch doctor --repair` (its requests are compiled again), or restore it"
            )
        batch = self.client.with_options(max_retries=0).post(
            "/v1/messages/batches",
            cast_to=self.message_batch,
            content=_requests_body(source.path),
            # Its length told, as for any upload: a body streamed without one goes chunked, which
            # not every server or proxy on the way takes.
            options={"headers": {"Content-Type": "application/json", "Content-Length": str(_body_length(source.path))}},
        )
        return _info(batch)

    def _list(self) -> Iterator[BatchInfo]:
        return (_info(b) for b in self.client.messages.batches.list(limit=100))  # newest first; pages followed

    def _retrieve(self, batch_id: str) -> BatchInfo:
        return _info(self.client.messages.batches.retrieve(batch_id))

    def download_what(self, file_id: str) -> str:
        return f"downloading the results of Message Batch {file_id}"

    def _download(self, file_id: str, dest: Path) -> int:
        """Stream the batch's results (`file_id` is the batch id) into `dest` (`file_batch.save_streamed`)."""
        stream = self.client.messages.batches.with_streaming_response.results
        return save_streamed(dest, lambda: stream(file_id), self.sdk.APIConnectionError, self.client.max_retries + 1)

    def _cancel(self, batch_id: str) -> BatchInfo:
        return _info(self.client.messages.batches.cancel(batch_id))


def _body_length(path: Path) -> int:
    """The length of `_requests_body(path)`: the file's bytes, its newlines turned to commas but the
    last one dropped, inside `{"requests":[` and `]}`."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        ends_in_newline = size > 0 and fh.seek(size - 1) >= 0 and fh.read(1) == b"\n"
    return len(b'{"requests":[') + size - int(ends_in_newline) + len(b"]}")


def _requests_body(path: Path) -> Iterator[bytes]:
    """`{"requests": [line, line, ...]}` from a file of one request per line, a megabyte at a time."""
    yield b'{"requests":['
    held = b""  # the last byte read: a newline that ends the file is no separator
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            data = held + chunk
            yield data[:-1].replace(b"\n", b",")
            held = data[-1:]
    if held not in (b"", b"\n"):
        yield held
    yield b"]}"
