"""The `batch` backend of `anthropic/` models: Message Batches through the official `anthropic` SDK
(an optional extra: `pip install "lexpilot-batch[anthropic]"`).

Message Batches take their requests inline, so "uploading" a file is checking it against the
API's limits (100,000 requests, 256 MB) and noting its hash; the create call sends the file's
lines, already `{"custom_id", "params"}` requests (`request_lines`), as they are. A batch's
`processing_status` (`in_progress`, `canceling`, `ended`) reads as ours: an ended batch whose
cancel was asked is `cancelled`, one with expired requests `expired`, any other `completed`
(errored requests are lines of its results). Its results are streamed into `responses/` untouched
and read by `anthropic.results`.

Message Batches carry no metadata (`tags_batches = False`): how a batch whose create answer was
lost is found again without a tag is `batches`' to decide.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from lexpilot_batch.errors import ConfigError, LexpilotError, ProviderError, ProviderUnavailable, transient_status
from lexpilot_batch.providers.base import (
    BatchBackend,
    BatchInfo,
    BatchNotFound,
    BatchSource,
    CreateUncertain,
    RateLimited,
    require_sdk,
    retry_after,
)
from lexpilot_batch.providers.endpoints import Endpoint, Limits
from lexpilot_batch.util.fileio import file_sha256, write_atomic

T = TypeVar("T")
INLINE = "inline:"  # the "file id" of a checked file: its hash, verified again when it is created
MAX_REQUESTS, MAX_BYTES = 100_000, 256 * 1024 * 1024  # per Message Batch
_AGAIN = " (after retries); nothing was lost, run the same command again later"


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


class AnthropicBatchBackend(BatchBackend):
    tags_batches = False

    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        sdk = require_sdk("anthropic", "anthropic", "Anthropic")
        self.sdk = sdk
        self.message_batch = require_sdk("anthropic.types.messages", "anthropic", "Anthropic").MessageBatch
        self.endpoint = endpoint
        self.limits = limits
        self.client = sdk.Anthropic(
            base_url=endpoint.base_url, api_key=endpoint.require_key(), timeout=timeout, max_retries=max_retries
        )

    def _error(self, what: str, exc: Exception) -> LexpilotError:
        return anthropic_error(self.sdk, self.endpoint, what, exc)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except self.sdk.APIError as exc:
            raise self._error(what, exc) from None

    def upload(self, path: Path) -> str:
        """Nothing leaves the workspace: the file is checked against the batch limits, and its hash
        is what `create` checks again before it sends the file."""
        size, lines = path.stat().st_size, 0
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                lines += chunk.count(b"\n")
        if lines > MAX_REQUESTS or size > MAX_BYTES:
            raise ProviderError(
                f"{path.name}: {lines:,} requests / {size:,} bytes exceed a Message Batch (100,000 / 256 MB); "
                "compile it again with --max-requests-per-file / --max-bytes-per-file within those limits"
            )
        return INLINE + (file_sha256(path) or "")[:32]

    def create(
        self,
        input_file_id: str,
        metadata: dict[str, str],
        endpoint: str | None = None,
        source: BatchSource | None = None,
    ) -> BatchInfo:
        """One create call carrying the file's requests: its lines, streamed as the JSON array they
        make (a 256 MB file is never held whole). The SDK's blind retries are off (creating is not
        idempotent)."""
        if source is None:
            raise ValueError("a Message Batch is created from its workspace file")
        if INLINE + (file_sha256(source.path) or "")[:32] != input_file_id:
            raise ProviderError(
                f"{source.path.name} changed on disk after it was checked for sending; it is not sent. "
                "Run `lexpilot-batch doctor --repair` (its requests are compiled again), or restore it"
            )
        client = self.client.with_options(max_retries=0)
        sdk = self.sdk
        try:
            batch = client.post(
                "/v1/messages/batches",
                cast_to=self.message_batch,
                content=_requests_body(source.path),
                options={"headers": {"Content-Type": "application/json"}},
            )
        except sdk.RateLimitError as exc:  # refused before anything was created
            raise RateLimited(str(self._error("creating a Message Batch", exc)), retry_after(exc)) from None
        except (sdk.APIConnectionError, sdk.InternalServerError) as exc:  # timeouts included; 5xx and 529
            raise CreateUncertain(str(self._error("creating a Message Batch", exc))) from None
        except sdk.APIError as exc:
            raise self._error("creating a Message Batch", exc) from None
        return _info(batch)

    def batches(self, since: float | None = None) -> Iterator[BatchInfo]:
        def listing() -> list[BatchInfo]:
            found = []
            for batch in self.client.messages.batches.list(limit=100):  # newest first; pages followed
                info = _info(batch)
                if since is not None and info.created_at is not None and info.created_at < since:
                    break
                found.append(info)
            return found

        yield from self._call("listing Message Batches", listing)

    def retrieve(self, batch_id: str) -> BatchInfo:
        try:
            return _info(self.client.messages.batches.retrieve(batch_id))
        except self.sdk.NotFoundError as exc:
            raise BatchNotFound(str(self._error(f"polling Message Batch {batch_id}", exc))) from None
        except self.sdk.APIError as exc:
            raise self._error(f"polling Message Batch {batch_id}", exc) from None

    def download(self, file_id: str, dest: Path) -> None:
        """Stream the batch's results (`file_id` is the batch id) into `dest`, untouched."""

        def save() -> None:
            with self.client.messages.batches.with_streaming_response.results(file_id) as response:
                write_atomic(dest, response.iter_bytes())

        self._call(f"downloading the results of Message Batch {file_id}", save)

    def cancel(self, batch_id: str) -> BatchInfo:
        return _info(
            self._call(f"cancelling Message Batch {batch_id}", lambda: self.client.messages.batches.cancel(batch_id))
        )


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


def anthropic_error(sdk: Any, endpoint: Endpoint, what: str, exc: Exception) -> LexpilotError:
    """The user-facing error of an `anthropic` SDK failure while doing `what` (never the key)."""
    where = endpoint.where
    if isinstance(exc, sdk.AuthenticationError):
        return ConfigError(
            f"{what}: Anthropic rejected the API key for the {where} (HTTP 401); check {endpoint.key_var}"
        )
    if isinstance(exc, sdk.APIStatusError):
        message = f"{what}: the {where} answered HTTP {exc.status_code}: {error_text(exc)}"
        if transient_status(exc.status_code):
            return ProviderUnavailable(message + _AGAIN)
        return ProviderError(message)
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderUnavailable(f"{what}: could not reach the {where}; nothing was lost, run the same command again")
    return ProviderError(f"{what}: {exc}")


def error_text(exc: Any) -> str:
    """The provider's own message in an error answer."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", exc))
