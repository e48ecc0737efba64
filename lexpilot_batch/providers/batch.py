"""What the engine needs from a batch provider, and nothing about protocols.

A backend uploads a request file, creates a batch tagged with metadata naming the workspace file,
lists the batches it holds (to find a tagged one again) and, where it can, the files it holds (to
find an upload whose answer was lost), polls one, downloads its result files and cancels it. Each
call is one call: the policies around them live once, for every backend, in `engine.recovery` — an
upload or a create whose answer was lost is looked for (the upload by its name, the batch by its
tag for a grace period) before it is sent again, a live duplicate is cancelled, a batch the
provider no longer knows is declared lost, an enqueued-token refusal lowers the model's budget. A
backend only tells those cases apart by raising the exceptions below, and maps its provider's
batch states onto ours (`TERMINAL` and `validating`, `in_progress`, `finalizing`, `cancelling`).

A provider whose batches carry no metadata (Anthropic's Message Batches, Together's batch jobs)
says so with `tags_batches = False`: `batches` then tells its batches apart by the uploaded file they
were created from where the listing names it (Together's), else by when they were created, how many
requests they hold and, once they end, by their results' ids.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from lexpilot_batch.errors import ProviderError, ProviderUnavailable
from lexpilot_batch.util.redaction import redact_data

T = TypeVar("T")


class BatchStatus:
    """A batch's statuses, OpenAI's words (`OPENAI_BATCH.md`), which every backend maps its API's onto."""

    VALIDATING: Final = "validating"
    IN_PROGRESS: Final = "in_progress"
    FINALIZING: Final = "finalizing"
    CANCELLING: Final = "cancelling"
    COMPLETED: Final = "completed"
    FAILED: Final = "failed"
    EXPIRED: Final = "expired"
    CANCELLED: Final = "cancelled"


TERMINAL = frozenset({BatchStatus.COMPLETED, BatchStatus.FAILED, BatchStatus.EXPIRED, BatchStatus.CANCELLED})
# The code of a batch refused for the provider's enqueued-token quota (OpenAI, Azure).
TOKEN_LIMIT = "token_limit_exceeded"


# A timestamp past this many seconds since the epoch (the year 5138) is read as milliseconds: the
# `zhipuai` SDK's own batch tests print `created_at=1715674031399` for a batch, beside
# `created_at=1715673494` for its file (MetaGLM/zhipuai-sdk-python-v4 tests/integration_tests/
# test_batches.py), and listings compare the two (`engine.recovery.ProviderTimes`).
_MILLISECONDS = 1e11


def epoch_seconds(value: object) -> float | None:
    """A provider's timestamp as seconds since the epoch (None: not a number); one in milliseconds
    (above `_MILLISECONDS`) divided by 1000."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return value / 1000 if value > _MILLISECONDS else value


@dataclass(frozen=True)
class BatchInfo:
    id: str
    status: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_counts: dict[str, int] = field(default_factory=dict)
    errors: list[dict] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    created_at: float | None = None  # seconds since the epoch, as the provider says
    # The uploaded file the batch was created from, where the provider's listing names it: how an
    # untagged batch is found again (`engine.recovery`); None where it does not (Anthropic's).
    input_file_id: str | None = None

    def __post_init__(self) -> None:
        # A batch's errors are provider text that is stored (`files.batch_errors`) and quoted in
        # failure reasons: redacted as they come in, whichever backend read them.
        object.__setattr__(self, "errors", redact_data(self.errors))

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def token_limit(self) -> dict | None:
        """The error of a batch the provider refused for its enqueued-token quota, or None."""
        if self.status != BatchStatus.FAILED:
            return None
        return next((e for e in self.errors if e.get("code") == TOKEN_LIMIT), None)


@dataclass(frozen=True)
class BatchSource:
    """What a create may need of a workspace file besides its uploaded id: a provider that takes
    the requests inline reads them from `path`; one that names the model in the create call takes
    `model`, as the provider is sent it (the name after our prefix)."""

    path: Path
    model: str


@dataclass(frozen=True)
class Upload:
    """A file the provider holds, as its listing of uploads shows it."""

    id: str
    name: str  # the name it was uploaded under
    bytes: int | None
    created_at: float | None  # seconds since the epoch, as the provider says


class CreateUncertain(ProviderUnavailable):
    """A create whose answer was lost (timeout, dropped connection, 5xx): a batch may exist or not."""


class UploadUncertain(ProviderUnavailable):
    """An upload whose answer was lost (timeout, dropped connection, 5xx): the provider may hold the
    file or not."""


class RateLimited(ProviderUnavailable):
    """The provider refused a call for its rate (HTTP 429) before doing anything."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class QuotaRefused(ProviderError):
    """The provider refused a create for its enqueued-token quota before creating anything: Azure
    answers HTTP 400 `token_limit_exceeded` at once (Azure OpenAI batch docs, "Batch quota
    limits": the create fails with `BadRequestError` ... `token_limit_exceeded`), where OpenAI
    creates a batch that fails with that code."""


class BatchNotFound(ProviderError):
    """The provider does not know this batch (HTTP 404 on retrieve)."""


def tagged_by(info: BatchInfo, metadata: dict[str, str]) -> bool:
    """Whether the batch's metadata holds every given pair."""
    return all(info.metadata.get(k) == v for k, v in metadata.items())


_LIMIT = re.compile(r"[Ll]imit(?::| of)\s*([\d][\d,.]*)\s*([KkMmBb])?")


def quota_in_message(message: str) -> int | None:
    """The enqueued-token quota a refusal names, if it names one: OpenAI's "Limit: 2,000,000
    enqueued tokens", Azure's "the configured limit of 30K for the deployment"."""
    match = _LIMIT.search(message or "")
    if match is None:
        return None
    try:
        number = float(match.group(1).replace(",", ""))
    except ValueError:
        return None
    scale = {"k": 1e3, "m": 1e6, "b": 1e9}.get((match.group(2) or "").lower(), 1)
    return int(number * scale) or None


class BatchBackend(ABC):
    """One provider endpoint's Files + Batches API."""

    # Whether the batches it creates carry the metadata tag (`find`).
    tags_batches = True
    # Whether it lists the files it holds (`uploads`): an upload whose answer was lost is then
    # looked for before the file is uploaded again (`engine.recovery.upload_once`).
    lists_uploads = False

    @abstractmethod
    def upload(self, path: Path, name: str | None = None) -> str:
        """Upload a request file (purpose `batch`) under `name` (None: its own); returns the
        provider's file id.

        A backend that lists its uploads raises `UploadUncertain` when the answer was lost and
        `RateLimited` when refused for the rate, so that the upload is looked for before it is
        sent again; another `LexpilotError` when refused for good."""

    def uploads(self, since: float | None = None) -> Iterator[Upload]:
        """The request files the provider holds, down to those uploaded at `since` (all: None);
        nothing where it does not list them (`lists_uploads`)."""
        return iter(())

    @abstractmethod
    def create(
        self,
        input_file_id: str,
        metadata: dict[str, str],
        endpoint: str | None = None,
        source: BatchSource | None = None,
    ) -> BatchInfo:
        """Create the batch for an uploaded file, once: no retry here (creating is not idempotent).
        `endpoint` is the path the file's lines name (None: the backend's own); `source` the
        workspace file.

        Raises `CreateUncertain` when the answer was lost, `RateLimited` when refused for the rate
        before anything was created, `QuotaRefused` when refused for the enqueued-token quota
        before anything was created, another `LexpilotError` when refused for good."""

    @abstractmethod
    def batches(self, since: float | None = None) -> Iterator[BatchInfo]:
        """The provider's batches, newest first, down to those created at `since` (all: None)."""

    def latest_created_at(self) -> float | None:
        """The `created_at` of the newest batch the provider lists, by its own clock (None: it lists
        none, or no times): a moment the provider's clock has passed, so every batch created after
        this call is stamped later. What bounds a listing looked through for a lost upload or create
        without comparing our clock with the provider's (`engine.recovery`)."""
        return max((b.created_at for b in self.batches() if b.created_at is not None), default=None)

    def find(self, metadata: dict[str, str], since: float | None = None) -> BatchInfo | None:
        """The newest batch whose metadata holds every given pair, if one exists (crash recovery)."""
        return next((b for b in self.batches(since) if tagged_by(b, metadata)), None)

    @abstractmethod
    def retrieve(self, batch_id: str) -> BatchInfo:
        """The batch's current state; `BatchNotFound` when the provider does not know it."""

    @abstractmethod
    def download(self, file_id: str, dest: Path) -> int:
        """Save a result file's bytes at `dest` (atomically), untouched but for the secrets a
        `redaction.Scrubber` replaces on the way; returns how many it replaced."""

    @abstractmethod
    def cancel(self, batch_id: str) -> BatchInfo:
        """Ask the provider to cancel a batch."""

    def cancel_live(self, batch_id: str) -> BatchInfo:
        """Cancel a batch listed or polled live a moment ago: one that ended meanwhile, whose cancel
        the provider refuses ("Cannot cancel a batch with status 'completed'", HTTP 400), is
        returned as it ended instead of stopping the command."""
        try:
            return self.cancel(batch_id)
        except ProviderUnavailable:
            raise
        except ProviderError:
            info = self.retrieve(batch_id)
            if info.terminal:
                return info
            raise

    def delete_file(self, file_id: str) -> bool:
        """Delete a file the workspace uploaded or saved at the provider; whether it was deleted
        (False: this backend deletes none, or the provider no longer has it)."""
        return False
