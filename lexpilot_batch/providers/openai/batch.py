"""The `batch` backend: OpenAI-compatible Files + Batches through the official `openai` SDK.

The same code talks to OpenAI, to providers that copy its API, and to our simulated provider; it
knows nothing of which one it is. Errors that retrying will not fix become `ConfigError` /
`ProviderError` naming the role and endpoint (never the key); transient ones are left to the
SDK's own retries, and then reported so that the command can simply be run again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import openai

from lexpilot_batch.providers.base import (
    BatchBackend,
    BatchInfo,
    BatchNotFound,
    BatchSource,
    CreateUncertain,
    RateLimited,
    retry_after,
)
from lexpilot_batch.providers.endpoints import Endpoint, Limits
from lexpilot_batch.providers.errors import translate
from lexpilot_batch.util.fileio import write_atomic

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
        created_at=getattr(batch, "created_at", None),
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
            raise self._error(what, exc) from None

    def _error(self, what: str, exc: openai.APIError) -> Exception:
        """The user-facing error for `exc` while doing `what` (the exception itself when unmapped)."""
        error = translate(
            exc,
            what,
            self.endpoint,
            not_found_hint=f"If this endpoint has no Batch API, use --{self.endpoint.role}-backend sync",
        )
        return exc if error is None else error

    def upload(self, path: Path) -> str:
        def go() -> str:
            with open(path, "rb") as fh:
                return self.client.files.create(file=(path.name, fh), purpose="batch").id

        return self._call(f"uploading {path.name}", go)

    def create(
        self,
        input_file_id: str,
        metadata: dict[str, str],
        endpoint: str | None = None,
        source: BatchSource | None = None,
    ) -> BatchInfo:
        """One create call: the SDK's blind retries are off here (creating is not idempotent, and
        the SDK sends no idempotency key); `batches` looks for the tagged batch before another."""
        client = self.client.with_options(max_retries=0)
        try:
            return _info(
                client.batches.create(
                    input_file_id=input_file_id,
                    endpoint=(endpoint or self.limits.endpoint),  # type: ignore[arg-type]
                    completion_window=self.limits.completion_window,  # type: ignore[arg-type]
                    metadata=metadata,
                )
            )
        except openai.RateLimitError as exc:  # refused before anything was created
            raise RateLimited(self._message("creating a batch", exc), retry_after(exc)) from None
        except (openai.APITimeoutError, openai.APIConnectionError, openai.InternalServerError) as exc:
            raise CreateUncertain(self._message("creating a batch", exc)) from None
        except openai.APIError as exc:
            raise self._error("creating a batch", exc) from None

    def _message(self, what: str, exc: openai.APIError) -> str:
        error = translate(exc, what, self.endpoint)
        return str(error) if error is not None else f"{what}: {exc}"

    def batches(self, since: float | None = None) -> Iterator[BatchInfo]:
        def page() -> list[BatchInfo]:
            found = []
            for batch in self.client.batches.list(limit=100):  # newest first; the SDK follows pages
                info = _info(batch)
                if since is not None and info.created_at is not None and info.created_at < since:
                    break
                found.append(info)
            return found

        yield from self._call("listing batches", page)

    def retrieve(self, batch_id: str) -> BatchInfo:
        try:
            return _info(self.client.batches.retrieve(batch_id))
        except openai.NotFoundError as exc:
            raise BatchNotFound(self._message(f"polling batch {batch_id}", exc)) from None
        except openai.APIError as exc:
            raise self._error(f"polling batch {batch_id}", exc) from None

    def download(self, file_id: str, dest: Path) -> None:
        data = self._call(f"downloading file {file_id}", lambda: self.client.files.content(file_id).read())
        write_atomic(dest, data)

    def cancel(self, batch_id: str) -> BatchInfo:
        return _info(self._call(f"cancelling batch {batch_id}", lambda: self.client.batches.cancel(batch_id)))
