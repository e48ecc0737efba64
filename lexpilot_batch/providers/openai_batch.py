"""The `batch` backend: OpenAI-compatible Files + Batches through the official `openai` SDK.

The same code talks to OpenAI, to providers that copy its API, and to our simulated provider; it
knows nothing of which one it is. Errors that retrying will not fix become `ConfigError` /
`ProviderError` naming the role and endpoint (never the key); transient ones are left to the
SDK's own retries, and then reported so that the command can simply be run again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import openai

from lexpilot_batch.config import Endpoint, Limits
from lexpilot_batch.fileio import write_atomic
from lexpilot_batch.providers.base import BatchBackend, BatchInfo
from lexpilot_batch.providers.errors import translate

T = TypeVar("T")


def _info(batch: object) -> BatchInfo:
    counts = getattr(batch, "request_counts", None)
    errors = getattr(batch, "errors", None)
    return BatchInfo(
        id=batch.id,  # type: ignore[attr-defined]
        status=batch.status,  # type: ignore[attr-defined]
        output_file_id=getattr(batch, "output_file_id", None),
        error_file_id=getattr(batch, "error_file_id", None),
        request_counts=(
            {"total": counts.total, "completed": counts.completed, "failed": counts.failed} if counts else {}
        ),
        errors=[e.model_dump() for e in (getattr(errors, "data", None) or [])] if errors else [],
        metadata=dict(getattr(batch, "metadata", None) or {}),
    )


class OpenAIBatchBackend(BatchBackend):
    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        self.endpoint = endpoint
        self.limits = limits
        self.max_retries = max_retries
        self.client = openai.OpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.require_key(),
            timeout=timeout,
            max_retries=max_retries,
        )

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except openai.APIError as exc:
            error = translate(
                exc,
                what,
                self.endpoint,
                not_found_hint=f"If this endpoint has no Batch API, use --{self.endpoint.role}-backend sync",
            )
            if error is None:
                raise
            raise error from None

    def upload(self, path: Path) -> str:
        def go() -> str:
            with open(path, "rb") as fh:
                return self.client.files.create(file=(path.name, fh), purpose="batch").id

        return self._call(f"uploading {path.name}", go)

    def create(self, input_file_id: str, metadata: dict[str, str]) -> BatchInfo:
        """Create the batch, never twice: creating is not idempotent, so the SDK's blind retries
        are off here; after an answer that may have been lost (timeout, dropped connection, 5xx)
        we look for the tagged batch before trying again."""
        client = self.client.with_options(max_retries=0)

        def go() -> BatchInfo:
            return _info(
                client.batches.create(
                    input_file_id=input_file_id,
                    endpoint=self.limits.endpoint,  # type: ignore[arg-type]
                    completion_window=self.limits.completion_window,  # type: ignore[arg-type]
                    metadata=metadata,
                )
            )

        for attempt in range(self.max_retries + 1):
            try:
                return go()
            except openai.RateLimitError as exc:  # refused before anything was created
                last: openai.APIError = exc
            except (openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError) as exc:
                last = exc
                found = self.find(metadata)
                if found is not None:
                    return found
            if attempt < self.max_retries:
                time.sleep(_backoff(last, attempt))
        return self._call("creating a batch", lambda: _raise(last))  # raises: the last error, translated

    def find(self, metadata: dict[str, str]) -> BatchInfo | None:
        def go() -> BatchInfo | None:
            for batch in self.client.batches.list(limit=100):
                meta = getattr(batch, "metadata", None) or {}
                if all(meta.get(k) == v for k, v in metadata.items()):
                    return _info(batch)
            return None

        return self._call("looking for an earlier batch", go)

    def retrieve(self, batch_id: str) -> BatchInfo:
        return _info(self._call(f"polling batch {batch_id}", lambda: self.client.batches.retrieve(batch_id)))

    def download(self, file_id: str, dest: Path) -> None:
        data = self._call(f"downloading file {file_id}", lambda: self.client.files.content(file_id).read())
        write_atomic(dest, data)

    def cancel(self, batch_id: str) -> BatchInfo:
        return _info(self._call(f"cancelling batch {batch_id}", lambda: self.client.batches.cancel(batch_id)))


def _backoff(exc: openai.APIError, attempt: int) -> float:
    """The provider's `retry-after` when it gives one, else exponential backoff (capped)."""
    response = getattr(exc, "response", None)
    headers = response.headers if response is not None else {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return min(float(value) * scale, 60.0)
        except ValueError:
            continue
    return min(0.5 * 2**attempt, 8.0)


def _raise(exc: BaseException) -> NoReturn:
    raise exc
