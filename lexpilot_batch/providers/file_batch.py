"""The file-batch template: what every batch API's backend shares, written once (`FileBatchBackend`),
and what its calls share: a listing cut at a time (`_since`), the `retry-after` of an SDK's error
(`retry_after`), a result file streamed to disk whole or not at all (`save_streamed`). A provider's
folder fills the template with a few one-call methods (`openai.batch`, `anthropic.batch`, ...);
what the engine needs of any backend is `batch.BatchBackend`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from lexpilot_batch.errors import transient_status
from lexpilot_batch.providers.batch import (
    TOKEN_LIMIT,
    BatchBackend,
    BatchInfo,
    BatchNotFound,
    BatchSource,
    CreateUncertain,
    QuotaRefused,
    RateLimited,
    Upload,
    UploadUncertain,
)
from lexpilot_batch.providers.errors import Failure, provider_error
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.spec import Limits
from lexpilot_batch.util import clock
from lexpilot_batch.util.redaction import save_scrubbed

T = TypeVar("T")


class FileBatchBackend(BatchBackend):
    """The file-batch template: what every batch API's backend shares, written once.

    A provider's folder supplies a few small methods, each one call of its SDK (`_upload`,
    `_create`, `_list`, `_retrieve`, `_download`, `_cancel`) and how its SDK's exceptions read
    (`failure`); the template gives them the error policy (`providers.errors`), the rules of a
    create whose answer may be lost (429: `RateLimited`, nothing created; no answer, 408, 409 or
    5xx: `CreateUncertain`, a batch may exist), the 404 of a batch the provider does not know
    (`BatchNotFound`), and the listing cut at `since`.
    """

    noun = "batch"  # what messages call one of its batches ("Message Batch", "Gemini batch")
    newest_first = True  # whether `_list` yields newest first (then the listing stops at `since`)
    uploads_newest_first = True  # the same of `_uploads`
    not_found_hint = ""  # the advice a 404 on another call than a poll adds

    def __init__(self, endpoint: Endpoint, limits: Limits, timeout: float = 120.0, max_retries: int = 5) -> None:
        self.endpoint = endpoint
        self.limits = limits
        self.timeout = timeout
        self.max_retries = max_retries

    # --- what a provider's folder supplies ------------------------------------------------------

    @abstractmethod
    def failure(self, exc: BaseException) -> Failure | None:
        """What an exception of its SDK says; None for one that is not its SDK's (a bug: raised as is)."""

    @abstractmethod
    def _upload(self, path: Path, name: str) -> str: ...

    def _uploads(self) -> Iterable[Upload]:
        """Every request file of the account, newest first when `newest_first`, pages followed
        lazily; a backend that lists them (`lists_uploads`) overrides it."""
        return ()

    @abstractmethod
    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        """One create call, without the SDK's retries (creating is not idempotent)."""

    @abstractmethod
    def _list(self) -> Iterable[BatchInfo]:
        """Every batch of the account, newest first when `newest_first`, pages followed lazily."""

    @abstractmethod
    def _retrieve(self, batch_id: str) -> BatchInfo: ...

    @abstractmethod
    def _download(self, file_id: str, dest: Path) -> int:
        """Save a result file at `dest`, its secrets replaced (`redaction.Scrubber`); how many were."""

    @abstractmethod
    def _cancel(self, batch_id: str) -> BatchInfo: ...

    # --- the template -----------------------------------------------------------------------------

    def error(self, what: str, exc: BaseException, hint: str | None = None) -> BaseException:
        """The user-facing error of `exc` while doing `what` (`exc` itself when not its SDK's)."""
        failure = self.failure(exc)
        if failure is None:
            return exc
        return provider_error(failure, what, self.endpoint, self.not_found_hint if hint is None else hint)

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """`fn()`, its SDK's failures raised as the user-facing error of doing `what`."""
        try:
            return fn()
        except Exception as exc:
            if self.failure(exc) is None:
                raise
            raise self.error(what, exc) from None

    def upload(self, path: Path, name: str | None = None) -> str:
        what = f"uploading {path.name}"
        try:
            return self._upload(path, name or path.name)
        except Exception as exc:
            failure = self.failure(exc)
            if failure is None:
                raise
            if self.lists_uploads:  # the upload is looked for before it is sent again
                message = str(provider_error(failure, what, self.endpoint))
                if failure.status == 429:
                    raise RateLimited(message, retry_after(exc)) from None
                if failure.status is None or transient_status(failure.status):
                    raise UploadUncertain(message) from None
            raise self.error(what, exc) from None

    def uploads(self, since: float | None = None) -> Iterator[Upload]:
        try:
            found = _since(self._uploads(), since, self.uploads_newest_first)
        except (AttributeError, TypeError, KeyError, ValueError):
            # An answer the SDK cannot read as a listing (an OpenAI-compatible server answering
            # `GET /files` with something else): as good as none. The listing only saves a copy.
            return
        except Exception as exc:
            if self.failure(exc) is None:
                raise
            # Refused (404, 405: an OpenAI-compatible server without the listing; 400: one that
            # takes none of its parameters) or unavailable: the file cannot be looked for now, and
            # is uploaded again. A copy left at the provider costs storage; a command stopped by
            # the listing of a provider that is slow to list would stop the run.
            return
        yield from found

    def create(
        self,
        input_file_id: str,
        metadata: dict[str, str],
        endpoint: str | None = None,
        source: BatchSource | None = None,
    ) -> BatchInfo:
        what = f"creating a {self.noun}"
        try:
            return self._create(input_file_id, metadata, endpoint, source)
        except Exception as exc:
            failure = self.failure(exc)
            if failure is None:
                raise
            message = str(provider_error(failure, what, self.endpoint))
            if failure.status == 429:  # refused before anything was created (enqueued-token limits too)
                raise RateLimited(message, retry_after(exc)) from None
            if failure.status == 400 and (failure.code == TOKEN_LIMIT or TOKEN_LIMIT in failure.message):
                raise QuotaRefused(message) from None
            if failure.status is None or transient_status(failure.status):  # the answer was lost
                raise CreateUncertain(message) from None
            raise self.error(what, exc) from None

    def batches(self, since: float | None = None) -> Iterator[BatchInfo]:
        yield from self.call(self._listing_what(), lambda: _since(self._list(), since, self.newest_first))

    def _listing_what(self) -> str:
        return f"listing {self.noun}es" if self.noun.endswith("ch") else f"listing {self.noun}s"

    def latest_created_at(self) -> float | None:
        # Listed newest first, the first batch's time (one page read); else every batch's newest.
        def newest() -> float | None:
            stamps = (b.created_at for b in self._list() if b.created_at is not None)
            return next(stamps, None) if self.newest_first else max(stamps, default=None)

        return self.call(self._listing_what(), newest)

    def retrieve(self, batch_id: str) -> BatchInfo:
        what = f"polling {self.noun} {batch_id}"
        try:
            return self._retrieve(batch_id)
        except Exception as exc:
            failure = self.failure(exc)
            if failure is None:
                raise
            if failure.status == 404:
                raise BatchNotFound(str(provider_error(failure, what, self.endpoint))) from None
            raise self.error(what, exc) from None

    def download(self, file_id: str, dest: Path) -> int:
        return self.call(self.download_what(file_id), lambda: self._download(file_id, dest))

    def download_what(self, file_id: str) -> str:
        """What messages say a download of `file_id` is."""
        return f"downloading file {file_id}"

    def cancel(self, batch_id: str) -> BatchInfo:
        return self.call(f"cancelling {self.noun} {batch_id}", lambda: self._cancel(batch_id))

    def _delete_file(self, file_id: str) -> bool:
        """One delete of a file; a backend that deletes files overrides it."""
        return False

    def delete_file(self, file_id: str) -> bool:
        try:
            return self._delete_file(file_id)
        except Exception as exc:
            failure = self.failure(exc)
            if failure is None:
                raise
            if failure.status == 404:
                return False  # already gone (deleted before a crash, or expired)
            raise self.error(f"deleting file {file_id}", exc) from None


L = TypeVar("L", BatchInfo, Upload)


def _since(listing: Iterable[L], since: float | None, newest_first: bool) -> list[L]:
    """What a listing holds from `since` on (all: None); one listed newest first stops at the first
    older item. It also stops at the first item listed twice: a server that leaves out `has_more`
    and ignores the `after` cursor answers every page with its first, and the SDKs' cursor pages,
    which ask for more while a page is not empty, would ask for ever."""
    found = []
    seen: set[str] = set()
    for item in listing:
        if item.id in seen:
            break
        seen.add(item.id)
        if since is not None and item.created_at is not None and item.created_at < since:
            if newest_first:
                break
            continue
        found.append(item)
    return found


def retry_after(exc: Exception | None) -> float | None:
    """The `retry-after` (or `retry-after-ms`) an SDK's error response carries, in seconds (at most 60)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return min(float(value) * scale, 60.0)
        except (TypeError, ValueError):
            continue
    return None


# A streamed download is written this many bytes at a time (`save_streamed`).
DOWNLOAD_CHUNK = 1 << 20


class _BrokeOff(Exception):
    """A streamed body that broke off part-way (`save_streamed`)."""

    def __init__(self, cause: Exception, request: Any) -> None:
        super().__init__(str(cause))
        self.cause, self.request = cause, request


def save_streamed(
    dest: Path, open_stream: Callable[[], Any], connection_error: Callable[..., Exception], tries: int
) -> int:
    """Write a streamed answer's body into `dest`, a megabyte at a time, whole or not at all, and
    return how many secrets were replaced in it. `open_stream()` is an SDK's `with_streaming_response`
    call (a context manager giving `iter_bytes` and `http_request`, as the `openai` and `anthropic`
    SDKs do).

    The body passes through a `redaction.Scrubber` on its way to disk: a key a gateway echoed into a
    result file is never written down; every other byte is the provider's.

    A result file can be hundreds of megabytes (OpenAI's batch input files go up to 200 MB, and
    its output files hold every answer); read whole (`files.content(id).read()`) it was held in
    memory twice, the HTTP client's buffer and the bytes: at 20x that was 110 MB of the engine's
    peak RSS. The SDK retries a call that fails before its answer starts, not a body that breaks
    off part-way: that is tried again here, `tries` times in all (a GET of a file: idempotent),
    and then raised as the SDK's `connection_error` (its `APIConnectionError`), the failure of a
    connection that could not be made (`providers.errors`: "run the same command again"; `run` and
    `--wait` wait it out). What was written of a broken body is removed.
    """

    def chunks(response: Any) -> Iterator[bytes]:
        body = iter(response.iter_bytes(DOWNLOAD_CHUNK))
        while True:
            try:
                chunk = next(body)
            except StopIteration:
                return
            except Exception as exc:  # the HTTP client's transport errors (the writes happen outside)
                raise _BrokeOff(exc, response.http_request) from exc
            yield chunk

    for attempt in range(tries):
        try:
            with open_stream() as response:
                return save_scrubbed(dest, chunks(response))
        except _BrokeOff as broke:
            if attempt + 1 >= tries:
                raise connection_error(
                    message=f"the download broke off {tries} times: {broke.cause}", request=broke.request
                ) from None  # (what the SDK's error reads as says it: `could not connect: {message}`)
            clock.pause(clock.RETRY.wait(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
