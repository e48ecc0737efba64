"""The `batch` backend of `google/` models: Gemini Batch Mode through the official `google-genai` SDK
(an optional extra: `pip install "lexpilot-batch[google]"`).

A file of `{"key", "request"}` lines (`request_lines`) is uploaded through the File API, a batch is
created for it with `batches.create(model, src=file)` (API version `v1beta`, where Batch Mode
lives), and its responses file is downloaded into `responses/` untouched, to be read by
`google.results`. Gemini batches carry no metadata but a `display_name`: the workspace's tag
is written there (`lexpilot ws=… file=… sha=… create=…`) and read back as metadata, so a batch is
found again after a lost create answer exactly as an OpenAI one is. Job states read as ours:
pending/queued `validating`, running `in_progress`, succeeded `completed`, and failed, cancelling,
cancelled and expired as themselves.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
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
from lexpilot_batch.providers.registry import parse_model
from lexpilot_batch.util.fileio import TMP_SUFFIX

T = TypeVar("T")
API_VERSION = "v1beta"
# The SDK's own retries of a call answered 408, 429 or 5xx: the first wait and its jitter, in seconds
# (the SDK's defaults; tests make them zero).
RETRY_DELAY = 1.0

_STATES = {
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
    return _STATES.get(str(state), "in_progress")


def _info(job: Any) -> BatchInfo:
    status = _state(job)
    dest = job.dest
    errors = []
    if status == "failed":
        error = getattr(job, "error", None)
        message = getattr(error, "message", None) or "the Gemini batch job failed (JOB_STATE_FAILED)"
        errors.append({"code": "batch_failed", "message": message})
    return BatchInfo(
        id=job.name,
        status=status,
        output_file_id=dest.file_name if dest is not None and dest.file_name else None,
        errors=errors,
        metadata=tag_of(job.display_name),
        created_at=job.create_time.timestamp() if job.create_time is not None else None,
    )


def transport_failure(exc: Exception) -> bool:
    """A timeout or a dropped connection of the SDK's HTTP client (httpx), which it raises as is."""
    return any(
        cls.__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2") for cls in type(exc).__mro__
    )


def http_options(types: Any, endpoint: Endpoint, timeout: float, max_retries: int) -> Any:
    """The genai client's options: the endpoint, the API version, the timeout and the SDK's retries."""
    retry = types.HttpRetryOptions(
        attempts=max_retries + 1, initial_delay=RETRY_DELAY, jitter=RETRY_DELAY, max_delay=30.0
    )
    return types.HttpOptions(
        base_url=endpoint.base_url, api_version=API_VERSION, timeout=int(timeout * 1000), retry_options=retry
    )


def google_error(errors: Any, endpoint: Endpoint, what: str, exc: Exception) -> LexpilotError:
    """The user-facing error of a `google-genai` SDK failure while doing `what` (never the key)."""
    where = endpoint.where
    if isinstance(exc, errors.APIError):
        if exc.code in (401, 403) or exc.status in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            return ConfigError(
                f"{what}: Google refused the API key for the {where} (HTTP {exc.code}); check {endpoint.key_var}"
            )
        message = f"{what}: the {where} answered HTTP {exc.code} ({exc.status}): {exc.message}"
        if transient_status(exc.code):
            return ProviderUnavailable(f"{message} (after retries); nothing was lost, run the same command again later")
        return ProviderError(message)
    if transport_failure(exc):
        return ProviderUnavailable(
            f"{what}: no answer from the {where} ({type(exc).__name__}); nothing was lost, run the same command again"
        )
    return ProviderError(f"{what}: {exc}")


class GoogleBatchBackend(BatchBackend):
    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        genai = require_sdk("google.genai", "google", "Gemini")
        self.errors = require_sdk("google.genai.errors", "google", "Gemini")
        self.types = require_sdk("google.genai.types", "google", "Gemini")
        self.endpoint = endpoint
        self.limits = limits
        self.timeout = timeout
        self.max_retries = max_retries
        self.client = genai.Client(
            vertexai=False,
            api_key=endpoint.require_key(),
            http_options=self._options(timeout, max_retries),
        )

    def _options(self, timeout: float, max_retries: int) -> Any:
        return http_options(self.types, self.endpoint, timeout, max_retries)

    def _error(self, what: str, exc: Exception) -> LexpilotError:
        return google_error(self.errors, self.endpoint, what, exc)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except Exception as exc:
            if isinstance(exc, self.errors.APIError) or transport_failure(exc):
                raise self._error(what, exc) from None
            raise

    def upload(self, path: Path) -> str:
        def go() -> str:
            uploaded = self.client.files.upload(file=path, config={"mime_type": "jsonl", "display_name": path.name})
            return str(uploaded.name)

        return self._call(f"uploading {path.name}", go)

    def create(
        self,
        input_file_id: str,
        metadata: dict[str, str],
        endpoint: str | None = None,
        source: BatchSource | None = None,
    ) -> BatchInfo:
        """One create call, without the SDK's retries (creating is not idempotent), tagged in its
        display name."""
        if source is None:
            raise ValueError("a Gemini batch names its model: create it from its workspace file")
        model = parse_model(source.model).sent
        no_retry = self._options(self.timeout, 0)
        config = {"display_name": display_name(metadata), "http_options": no_retry}
        try:
            return _info(self.client.batches.create(model=model, src=input_file_id, config=config))
        except self.errors.APIError as exc:
            if exc.code == 429:  # refused before anything was created (Google's enqueued-token limits too)
                raise RateLimited(str(self._error("creating a Gemini batch", exc)), retry_after(exc)) from None
            if isinstance(exc, self.errors.ServerError) or exc.code in (408, 409):
                raise CreateUncertain(str(self._error("creating a Gemini batch", exc))) from None
            raise self._error("creating a Gemini batch", exc) from None
        except Exception as exc:
            if transport_failure(exc):
                raise CreateUncertain(str(self._error("creating a Gemini batch", exc))) from None
            raise

    def batches(self, since: float | None = None) -> Iterator[BatchInfo]:
        def listing() -> list[BatchInfo]:
            found = [_info(job) for job in self.client.batches.list(config={"page_size": 100})]
            return [b for b in found if since is None or b.created_at is None or b.created_at >= since]

        yield from self._call("listing Gemini batches", listing)

    def retrieve(self, batch_id: str) -> BatchInfo:
        try:
            return _info(self.client.batches.get(name=batch_id))
        except self.errors.APIError as exc:
            if exc.code == 404:
                raise BatchNotFound(str(self._error(f"polling Gemini batch {batch_id}", exc))) from None
            raise self._error(f"polling Gemini batch {batch_id}", exc) from None
        except Exception as exc:
            if transport_failure(exc):
                raise self._error(f"polling Gemini batch {batch_id}", exc) from None
            raise

    def download(self, file_id: str, dest: Path) -> None:
        """Save the responses file, untouched, at `dest`: streamed into a temporary file beside it,
        which then replaces it whole."""
        part = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
        dest.parent.mkdir(parents=True, exist_ok=True)

        def save() -> None:
            try:
                self._again(lambda: self.client.files.download(file=file_id, destination=str(part)))
                with open(part, "rb+") as fh:
                    os.fsync(fh.fileno())
                os.replace(part, dest)
            finally:
                part.unlink(missing_ok=True)

        self._call(f"downloading file {file_id}", save)

    def _again(self, fn: Callable[[], T]) -> T:
        """`fn`, tried again after a 408, 429 or 5xx answer or a dropped connection: the SDK retries
        its JSON calls itself, not a file's download (an idempotent GET)."""
        for attempt in range(self.max_retries + 1):
            try:
                return fn()
            except Exception as exc:
                transient = transport_failure(exc) or (
                    isinstance(exc, self.errors.APIError) and (exc.code in (408, 429) or (exc.code or 0) >= 500)
                )
                if not transient or attempt == self.max_retries:
                    raise
                wait = retry_after(exc)
                time.sleep(wait if wait is not None else RETRY_DELAY * 2**attempt)
        raise AssertionError("unreachable")

    def cancel(self, batch_id: str) -> BatchInfo:
        self._call(f"cancelling Gemini batch {batch_id}", lambda: self.client.batches.cancel(name=batch_id))
        return self.retrieve(batch_id)
