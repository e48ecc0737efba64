"""OpenAI-compatible Files + Batches through the official `openai` SDK: OpenAI, and every provider
that copies its API (Azure, DashScope, a generic one) and our simulated provider. It knows nothing of
which one it is; the policy around each call is the template's (`file_batch.FileBatchBackend`). Where
the profile says so (`Limits.file_expiry`: Azure's), uploads carry `expires_after` and batches
`output_expires_after` (the SDK's `files.create` and `batches.create` parameters).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai

from lexpilot_batch.providers.batch import (
    BatchInfo,
    BatchSource,
    BatchStatus,
    Upload,
    epoch_seconds,
)
from lexpilot_batch.providers.errors import Failure, unversioned_base_url
from lexpilot_batch.providers.file_batch import FileBatchBackend, save_streamed
from lexpilot_batch.providers.openai.errors import failure_of
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.spec import Limits

# Statuses of OpenAI-shaped APIs that are not OpenAI's words: SiliconFlow's `in_queue` (its create
# answer's status, https://docs.siliconflow.cn/cn/api-reference/batch/create-batch); an upper-cased
# word (VALIDATING, IN_PROGRESS...) is read as OpenAI's.
_ALIASES = {"in_queue": BatchStatus.VALIDATING, "queued": BatchStatus.VALIDATING}


def status_of(word: object) -> str:
    """A batch status as OpenAI's word."""
    text = str(word or "").lower()
    return _ALIASES.get(text, text)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def request_counts(batch: object) -> dict[str, int]:
    """A Batch object's request counts, in either shape its publishers show: OpenAI's nested object
    (`request_counts: {total, completed, failed}`: openai-openapi `Batch`, the `openai` and `zhipuai`
    SDKs' `BatchRequestCounts`), or Zhipu BigModel's REST reference's, where `request_counts` is an
    integer and `total`, `completed` and `failed` stand beside it at the top level
    (docs.bigmodel.cn, 批处理 API, 获取批处理任务详情). {} when the object holds neither."""
    counts = getattr(batch, "request_counts", None)
    if counts is not None and not isinstance(counts, (int, float, str)):
        return {k: _count(getattr(counts, k, None)) for k in ("total", "completed", "failed")}
    flat = {k: getattr(batch, k, None) for k in ("total", "completed", "failed")}
    if any(isinstance(v, int) and not isinstance(v, bool) for v in flat.values()):
        return {k: _count(v) for k, v in flat.items()}
    return {}


def info(batch: object) -> BatchInfo:
    """A Batch object of the `openai` SDK (any OpenAI-shaped API's) as a `BatchInfo`."""
    errors = getattr(batch, "errors", None)
    return BatchInfo(
        id=batch.id,  # type: ignore[attr-defined]
        status=status_of(batch.status),  # type: ignore[attr-defined]
        output_file_id=getattr(batch, "output_file_id", None) or None,
        error_file_id=getattr(batch, "error_file_id", None) or None,
        request_counts=request_counts(batch),
        errors=[e.model_dump() for e in (getattr(errors, "data", None) or [])] if errors else [],
        metadata=dict(getattr(batch, "metadata", None) or {}),
        created_at=epoch_seconds(getattr(batch, "created_at", None)),
    )


class OpenAIClientBackend(FileBatchBackend):
    """The file-batch template over the `openai` SDK's client: the client at the endpoint, its
    exceptions read as failures, a file's content streamed into `responses/`. OpenAI's Files +
    Batches build on it, and so do the APIs that keep OpenAI's files routes under their own batch
    jobs (Mistral's, Together's: `mistral.batch`, `together.batch`), overriding the calls they change."""

    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        super().__init__(endpoint, limits, timeout, max_retries)
        self.not_found_hint = self.hint(endpoint)
        self.client = openai.OpenAI(
            base_url=endpoint.base_url, api_key=endpoint.require_key(), timeout=timeout, max_retries=max_retries
        )

    def hint(self, endpoint: Endpoint) -> str:
        """The advice a 404 adds (`not_found_hint`): a base URL without its `/v1` first, the likely
        cause, before the sync backend, which moves the study to list price."""
        cause = unversioned_base_url(endpoint.base_url)
        if cause:
            return f"{cause}; only if this endpoint has no Batch API at all, use --{endpoint.role}-backend sync (at list price)"
        return f"If this endpoint has no Batch API, use --{endpoint.role}-backend sync"

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    def _download(self, file_id: str, dest: Path) -> int:
        stream = self.client.files.with_streaming_response.content
        return save_streamed(dest, lambda: stream(file_id), openai.APIConnectionError, self.client.max_retries + 1)


class OpenAIBatchBackend(OpenAIClientBackend):
    lists_uploads = True

    def _upload(self, path: Path, name: str) -> str:
        # The SDK's blind retries are off: an upload whose answer was lost is looked for first.
        expiry = self.limits.file_expiry
        more: dict = {"expires_after": {"anchor": "created_at", "seconds": expiry}} if expiry else {}
        with open(path, "rb") as fh:
            return self.client.with_options(max_retries=0).files.create(file=(name, fh), purpose="batch", **more).id

    def _uploads(self) -> Iterator[Upload]:
        # `GET /files?purpose=batch&order=desc` (the SDK's `files.list`: `order` sorts by `created_at`,
        # `limit` 1 to 10,000): newest first, the SDK following the `after` cursor.
        # One retry at most: a listing that does not answer is no reason to wait (`batch.BatchBackend.uploads`).
        listing = self.client.with_options(max_retries=1).files.list(purpose="batch", order="desc", limit=1000)
        return (Upload(f.id, f.filename, f.bytes, epoch_seconds(f.created_at)) for f in listing)

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        # The SDK's blind retries are off: it sends no idempotency key.
        expiry = self.limits.file_expiry
        more: dict = {"output_expires_after": {"anchor": "created_at", "seconds": expiry}} if expiry else {}
        batch = self.client.with_options(max_retries=0).batches.create(
            input_file_id=input_file_id,
            endpoint=(endpoint or self.limits.endpoint),  # type: ignore[arg-type]
            completion_window=self.limits.completion_window,  # type: ignore[arg-type]
            metadata=metadata,
            **more,
        )
        return info(batch)

    def _list(self) -> Iterator[BatchInfo]:
        return (info(b) for b in self.client.batches.list(limit=100))  # newest first; the SDK follows pages

    def _retrieve(self, batch_id: str) -> BatchInfo:
        return info(self.client.batches.retrieve(batch_id))

    def _cancel(self, batch_id: str) -> BatchInfo:
        return info(self.client.batches.cancel(batch_id))

    def _delete_file(self, file_id: str) -> bool:
        return bool(self.client.files.delete(file_id).deleted)
