"""A batch provider held in memory, which fails the calls a test chooses (inspect_ai's way).

For the unit tests of `engine/submit.py`, `engine/recovery.py` and `engine/poll.py`: a
`BatchBackend` with no server and no waits, whose every call is recorded (`calls`), and which can
be told to refuse a call (`fail`), to lose a create's answer after making its batch
(`lose_answers`) or an upload's after storing its file (`lose_uploads`), to make a batch only a few listings after its create (`commit_late`), to forget a
batch (`forget`), and to end one with result lines (`finish`). Its batches' `created_at` is the
real clock's (or the one a test gives), as a provider's is, so that the engine's cut-offs (`since`)
apply to them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.engine.session import Session
from lexpilot_batch.errors import ProviderUnavailable
from lexpilot_batch.providers.batch import (
    TERMINAL,
    TOKEN_LIMIT,
    BatchBackend,
    BatchInfo,
    BatchNotFound,
    BatchSource,
    CreateUncertain,
    Upload,
    UploadUncertain,
)
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import open_session


class FakeBackend(BatchBackend):
    """One provider's Files + Batches API, in memory."""

    def __init__(
        self, *, tags_batches: bool = True, lists_uploads: bool = True, now: Callable[[], float] = time.time
    ) -> None:
        self.tags_batches = tags_batches
        self.lists_uploads = lists_uploads
        self.now = now  # the provider's clock, which stamps `created_at`
        self.held: dict[str, BatchInfo] = {}  # batch id -> its state, in the order they were created
        self.inputs: dict[str, str] = {}  # uploaded file id -> the workspace file's name
        self.stored: dict[str, Upload] = {}  # uploaded file id -> how the listing shows it
        self.lost_uploads = 0  # uploads that store their file, then lose the answer
        self.late_uploads = 0  # listings of uploads that show nothing yet (a listing a moment behind)
        self.sources: dict[str, BatchSource | None] = {}  # batch id -> what its create was given
        self.contents: dict[str, bytes] = {}  # result file id -> its bytes
        self.calls: list[tuple[str, str]] = []  # (call, its main argument) in order
        self.failures: dict[str, list[BaseException]] = {}
        self.lost_answers = 0  # creates that make their batch, then lose the answer
        self.late: list[tuple[int, BatchInfo]] = []  # (listings before it shows, a batch made late)
        self.not_found: set[str] = set()  # batches a retrieve answers 404 for, though listed
        self._late_listings: int | None = None  # the next create's batch shows after this many listings
        self._n = 0

    # --- what a test tells it -----------------------------------------------------------------

    def fail(self, call: str, *errors: BaseException) -> None:
        """The next calls of `call` (`upload`, `create`, `batches`, `retrieve`, `download`, `cancel`)
        raise these, one each, before doing anything."""
        self.failures.setdefault(call, []).extend(errors)

    def lose_answers(self, n: int = 1) -> None:
        """The next `n` creates make their batch, then raise `CreateUncertain` (the answer was lost)."""
        self.lost_answers += n

    def lose_uploads(self, n: int = 1) -> None:
        """The next `n` uploads store their file, then raise `UploadUncertain` (the answer was lost;
        without a listing, the `ProviderUnavailable` a backend then raises)."""
        self.lost_uploads += n

    def commit_late(self, listings: int) -> None:
        """The next create raises `CreateUncertain`, and its batch shows only after `listings` more
        listings (a provider that commits a create a moment after answering)."""
        self._late_listings = listings

    def add(self, metadata: dict[str, str] | None = None, **fields: Any) -> BatchInfo:
        """A batch made by someone else (another client, an earlier copy of the workspace)."""
        info = BatchInfo(
            id=self._id("batch"),
            status=fields.pop("status", "in_progress"),
            metadata=dict(metadata or {}),
            created_at=fields.pop("created_at", self.now()),
            **fields,
        )
        self.held[info.id] = info
        return info

    def finish(
        self,
        batch_id: str,
        status: str = "completed",
        output: list[dict[str, Any]] | None = None,
        errors: list[dict[str, Any]] | None = None,
        error_lines: list[dict[str, Any]] | None = None,
    ) -> BatchInfo:
        """End a batch: `output` and `error_lines` become its result files, `errors` its batch errors."""
        info = self.held[batch_id]
        output_id = self._result(output)
        error_id = self._result(error_lines)
        total = info.request_counts.get("total", 0)
        counts = {"total": total, "completed": len(output or []), "failed": len(error_lines or [])}
        info = replace(
            info,
            status=status,
            output_file_id=output_id,
            error_file_id=error_id,
            errors=errors or [],
            request_counts=counts,
        )
        self.held[batch_id] = info
        return info

    def refuse_for_quota(self, batch_id: str, message: str = "Enqueued token limit reached.") -> BatchInfo:
        """The provider refused the batch for its enqueued-token quota: failed, nothing run."""
        return self.finish(batch_id, "failed", errors=[{"code": TOKEN_LIMIT, "message": message}])

    def forget(self, batch_id: str) -> None:
        """The provider no longer knows this batch: 404 on retrieve, absent from the listing."""
        del self.held[batch_id]

    def count(self, call: str) -> int:
        return sum(1 for name, _ in self.calls if name == call)

    # --- the backend ----------------------------------------------------------------------------

    def upload(self, path: Path, name: str | None = None) -> str:
        self._call("upload", path.name)
        file_id = self._id("file")
        self.inputs[file_id] = path.name
        self.stored[file_id] = Upload(file_id, name or path.name, path.stat().st_size, self.now())
        if self.lost_uploads:
            self.lost_uploads -= 1
            if not self.lists_uploads:  # as the template says it: the SDK retried, then gave up
                raise ProviderUnavailable(f"uploading {path.name}: HTTP 500 after retries")
            raise UploadUncertain(f"uploading {path.name}: the answer was lost")
        return file_id

    def uploads(self, since: float | None = None) -> Iterator[Upload]:
        self._call("uploads", "" if since is None else str(since))
        if not self.lists_uploads:
            return iter(())
        if self.late_uploads:
            self.late_uploads -= 1
            return iter(())
        newest = sorted(self.stored.values(), key=lambda u: u.created_at or 0.0, reverse=True)
        return iter([u for u in newest if since is None or (u.created_at or 0.0) >= since])

    def delete_file(self, file_id: str) -> bool:
        self._call("delete_file", file_id)
        self.inputs.pop(file_id, None)
        return self.stored.pop(file_id, None) is not None

    def create(
        self,
        input_file_id: str,
        metadata: dict[str, str],
        endpoint: str | None = None,
        source: BatchSource | None = None,
    ) -> BatchInfo:
        self._call("create", input_file_id)
        assert input_file_id in self.inputs, f"create for a file never uploaded: {input_file_id}"
        info = BatchInfo(
            id=self._id("batch"),
            status="validating",
            metadata=dict(metadata) if self.tags_batches else {},
            created_at=self.now(),
            request_counts={"total": _lines(source.path) if source is not None else 0},
        )
        self.sources[info.id] = source
        if self._late_listings is not None:
            self.late.append((self._late_listings, info))
            self._late_listings = None
            raise CreateUncertain("creating a batch: the answer was lost")
        self.held[info.id] = info
        if self.lost_answers:
            self.lost_answers -= 1
            raise CreateUncertain("creating a batch: the answer was lost")
        return info

    def batches(self, since: float | None = None) -> Iterator[BatchInfo]:
        self._call("batches", "" if since is None else str(since))
        still: list[tuple[int, BatchInfo]] = []
        for left, info in self.late:
            if left <= 0:
                self.held[info.id] = info
            else:
                still.append((left - 1, info))
        self.late = still
        newest = sorted(self.held.values(), key=lambda b: b.created_at or 0.0, reverse=True)
        return iter([b for b in newest if since is None or (b.created_at or 0.0) >= since])

    def retrieve(self, batch_id: str) -> BatchInfo:
        self._call("retrieve", batch_id)
        if batch_id not in self.held or batch_id in self.not_found:
            raise BatchNotFound(f"polling batch {batch_id}: HTTP 404")
        return self.held[batch_id]

    def download(self, file_id: str, dest: Path) -> None:
        self._call("download", file_id)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(self.contents[file_id])

    def cancel(self, batch_id: str) -> BatchInfo:
        self._call("cancel", batch_id)
        info = self.held[batch_id]
        if info.status not in TERMINAL:
            info = replace(info, status="cancelling")
            self.held[batch_id] = info
        return info

    # --- inside ---------------------------------------------------------------------------------

    def _call(self, name: str, argument: str) -> None:
        self.calls.append((name, argument))
        queued = self.failures.get(name)
        if queued:
            raise queued.pop(0)

    def _id(self, kind: str) -> str:
        self._n += 1
        return f"{kind}-{self._n:04d}"

    def _result(self, lines: list[dict[str, Any]] | None) -> str | None:
        if lines is None:
            return None
        file_id = self._id("file")
        self.contents[file_id] = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode("utf-8")
        return file_id


def sending_to(ws: Workspace, fake: FakeBackend, monkeypatch: pytest.MonkeyPatch, **options: Any) -> Session:
    """A simulated session (its routes, limits and options) whose batch files all go to `fake`;
    a create whose answer was lost is looked for once (`create_grace` 0) unless a test says."""
    options.setdefault("create_grace", 0.0)
    session = open_session(ws, **options)
    monkeypatch.setattr(session, "batch_backend", lambda row: fake)
    return session


def file_rows(ws: Workspace) -> list[Any]:
    """Every file of the workspace, in the order they were compiled: each a `waves.FileRow`, typed
    loosely so that a test reads any column without first ruling out NULL."""
    return [dict(r) for r in ws.store.conn.execute("SELECT * FROM files ORDER BY pk")]


def _lines(path: Path) -> int:
    return sum(1 for line in path.read_bytes().splitlines() if line.strip())


def request_ids(path: Path) -> list[str]:
    """The custom_ids of a request file, in order."""
    return [json.loads(line)["custom_id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def answer(custom_id: str, content: str = "您好，请提供更多细节。", prompt_tokens: int = 0) -> dict[str, Any]:
    """An OpenAI batch output line answering `custom_id` with `content`."""
    return {
        "id": f"line-{custom_id[-8:]}",
        "custom_id": custom_id,
        "response": {
            "status_code": 200,
            "request_id": "req",
            "body": {
                "object": "chat.completion",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 5, "total_tokens": prompt_tokens + 5},
            },
        },
        "error": None,
    }


def failure(custom_id: str, code: str = "server_error", message: str = "the server had an error") -> dict[str, Any]:
    """An OpenAI batch error-file line for `custom_id`."""
    return {
        "id": f"line-{custom_id[-8:]}",
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }
