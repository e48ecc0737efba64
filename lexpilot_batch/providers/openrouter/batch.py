"""The `batch` backend of `openrouter/` models: OpenRouter's Batch API.

Built from OpenRouter's documentation (https://openrouter.ai/docs/batch-quickstart; the API reference
https://openrouter.ai/docs/api/api-reference/batch/, its create, list, get, results, cancel and
delete pages; the official SDKs' types `BatchSubmitBody`, `Request`, `BatchObject`,
`BatchListItem`, `BatchResult`, https://openrouter.ai/docs/client-sdks/python/components/; all taken
2026-12-06):

- there is no upload: a batch is created with `POST /batches` `{"endpoint": "/v1/chat/completions",
  "model", "requests": [{"custom_id", "body"}, ...]}` (an optional `completion_window`, and
  `provider: {"only": [...]}`, sent when a model argument pins it: `_requests`), answered `202`
  with the batch in status `validating`. So "uploading" a file is checking it against the limits
  and noting its hash, as for a Message Batch
  (`anthropic.batch`), and the create call sends the file's lines as that array (a file holds at
  most 5,000 requests: `openrouter.spec.LIMITS`);
- batches are listed newest first with `GET /batches` (`after` the previous page's `last_id`, while
  `has_more`), polled with `GET /batches/{id}` and cancelled with `POST /batches/{id}/cancel` (the
  API reference's; the official SDK 1.3.84 has no cancel call); an ended batch's results are read
  page by page from `GET /batches/{id}/results` (the API reference's; the SDK 1.3.84 has its page
  type, `BatchResultsPageResponse`, but no call) and saved one result per line
  (`openrouter.results` reads them);
- a batch's `status` is OpenAI's words (`validating`, `in_progress`, `completed`, `failed`,
  `expired`, `cancelled`; `cancelling` and `finalizing` read as OpenAI's too); its
  `request_counts` are `{total, completed, failed}`; a batch that failed validation after the 202
  says why in `error.message`.

**A batch carries no metadata** (`BatchSubmitBody` has none), so `tags_batches = False`: a batch
whose create answer was lost is found again by what the listing shows (`engine.recovery`: created
since the provider's time read before the create was sent, holding as many requests as the file).

Every call goes through the `openai` SDK's HTTP client (its retries, timeouts and exceptions), so
the error policy is the template's and `openrouter.errors` reads OpenRouter's error bodies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lexpilot_batch.errors import ProviderError
from lexpilot_batch.providers.batch import BatchInfo, BatchSource, BatchStatus
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.openai.batch import OpenAIClientBackend
from lexpilot_batch.providers.openrouter.errors import Unreadable, failure_of
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.sync.call import Response
from lexpilot_batch.util.fileio import file_sha256
from lexpilot_batch.util.redaction import save_scrubbed

BATCHES = "/batches"  # under the base URL, https://openrouter.ai/api/v1
INLINE = "inline:"  # the "file id" of a checked file: its hash, verified again when it is created
PAGE = 100
RESULTS_PAGE = 1_000  # `GET /batches/{id}/results`' largest `limit` ("from 1 through 1000")
# OpenRouter's `BatchObjectStatus`: OpenAI's words, each read as itself.
STATUSES = frozenset(
    {
        BatchStatus.VALIDATING,
        BatchStatus.IN_PROGRESS,
        BatchStatus.FINALIZING,
        BatchStatus.CANCELLING,
        BatchStatus.COMPLETED,
        BatchStatus.FAILED,
        BatchStatus.EXPIRED,
        BatchStatus.CANCELLED,
    }
)


def info(batch: Any) -> BatchInfo:
    """A `BatchObject` (or `BatchListItem`) as a `BatchInfo`; its results are fetched by its id.
    An answer that is none (`errors.Unreadable`) is an answer lost on the way."""
    if not isinstance(batch, dict) or not batch.get("id"):
        raise Unreadable("an answer that is no batch object")
    said = str(batch.get("status"))
    status = said if said in STATUSES else BatchStatus.IN_PROGRESS
    counts = batch.get("request_counts") or {}
    error = batch.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    ended = status in (BatchStatus.COMPLETED, BatchStatus.EXPIRED, BatchStatus.CANCELLED)
    return BatchInfo(
        id=str(batch["id"]),
        status=status,
        output_file_id=str(batch["id"]) if ended else None,
        request_counts={k: int(counts.get(k) or 0) for k in ("total", "completed", "failed")},
        errors=[{"code": "batch_failed", "message": str(message)}] if message else [],
        created_at=float(batch["created_at"]) if isinstance(batch.get("created_at"), (int, float)) else None,
    )


class OpenRouterBatchBackend(OpenAIClientBackend):
    noun = "OpenRouter batch"
    tags_batches = False

    def hint(self, endpoint: Endpoint) -> str:
        return f"Check OPENROUTER_BASE_URL ({endpoint.base_url}): it ends in /api/v1"

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    def _upload(self, path: Path, name: str) -> str:
        """Nothing leaves the workspace: the file is checked against the batch limits, and its hash
        is what `create` checks again before it sends the requests."""
        size, lines = path.stat().st_size, 0
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                lines += chunk.count(b"\n")
        if lines > self.limits.max_requests or size > self.limits.max_bytes:
            raise ProviderError(
                f"{path.name}: {lines:,} requests / {size:,} bytes exceed an OpenRouter batch "
                f"({self.limits.max_requests:,} / {self.limits.max_bytes // (1 << 20)} MB); compile it again with "
                "--max-requests-per-file / --max-bytes-per-file within those limits"
            )
        return INLINE + (file_sha256(path) or "")[:32]

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        """One create call carrying the file's requests, without the SDK's retries (creating is not
        idempotent). `metadata` is not sent: an OpenRouter batch holds none."""
        if source is None:
            raise ValueError("an OpenRouter batch is created from its workspace file")
        if INLINE + (file_sha256(source.path) or "")[:32] != input_file_id:
            raise ProviderError(
                f"{source.path.name} changed on disk after it was checked for sending; it is not sent. "
                "Run `lexpilot-batch doctor --repair` (its requests are compiled again), or restore it"
            )
        requests, pin = _requests(source.path)
        body = _head(endpoint or self.limits.endpoint, source.model, pin) + requests + b"]}"
        answer: Any = self.client.with_options(max_retries=0).post(
            BATCHES, cast_to=object, content=body, options={"headers": {"Content-Type": "application/json"}}
        )
        return info(answer)

    def _list(self) -> Iterator[BatchInfo]:
        after: str | None = None
        while True:
            query: dict[str, Any] = {"limit": PAGE, **({"after": after} if after else {})}
            page: Any = self.client.get(BATCHES, cast_to=object, options={"params": query})
            if not isinstance(page, dict):
                raise Unreadable("an answer that is no list of batches")
            items = [b for b in (page.get("data") or []) if isinstance(b, dict) and b.get("id")]
            yield from (info(b) for b in items)
            after = page.get("last_id") or (items[-1]["id"] if items else None)
            if not items or not page.get("has_more") or not after:
                return

    def _retrieve(self, batch_id: str) -> BatchInfo:
        return info(self.client.get(f"{BATCHES}/{batch_id}", cast_to=object))

    def _cancel(self, batch_id: str) -> BatchInfo:
        return info(self.client.post(f"{BATCHES}/{batch_id}/cancel", cast_to=object))

    def download_what(self, file_id: str) -> str:
        return f"downloading the results of OpenRouter batch {file_id}"

    def _download(self, file_id: str, dest: Path) -> int:
        """The ended batch's results (`file_id` is the batch id), one per line, written whole or not
        at all, its secrets replaced (`redaction.Scrubber`)."""
        return save_scrubbed(dest, self._result_lines(file_id))

    def _result_lines(self, batch_id: str) -> Iterator[bytes]:
        """The batch's results page after page (`GET /batches/{id}/results`, the API reference's:
        "Pages are stable across retries"), each result a line. An answer that is no page of them (a
        gateway's HTML or text, JSON cut short, nothing) is saved as it came, and no page after it
        is read: `engine.downloads` finds it in the saved file, as it finds a result file's damage
        (a page a result short by the count), and fetches the whole download again; nothing of it
        is ingested. A page broken off in transfer is the SDK's to retry (`APIConnectionError`)."""
        cursor: str | None = None
        while True:
            query: dict[str, Any] = {"limit": RESULTS_PAGE, **({"cursor": cursor} if cursor else {})}
            raw = self.client.get(f"{BATCHES}/{batch_id}/results", cast_to=Response, options={"params": query})
            page = _page(raw.content)
            if page is None:
                yield raw.content.rstrip(b"\n") + b"\n" if raw.content.strip() else b""
                return
            yield from ((_json(r) + "\n").encode("utf-8") for r in page["data"])
            cursor = page.get("next_cursor")
            if not page.get("has_more") or not cursor:
                return


def _page(data: bytes) -> dict[str, Any] | None:
    """A `BatchResultsPageResponse` (`{"object": "list", "data": [BatchResult], "has_more",
    "next_cursor"}`), or None for an answer that is none."""
    try:
        page = json.loads(data)
    except ValueError:  # not JSON, cut short, or not UTF-8
        return None
    if not isinstance(page, dict) or not isinstance(page.get("data"), list):
        return None
    return page if all(isinstance(r, dict) for r in page["data"]) else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _head(endpoint: str, model: str, pin: Any = None) -> bytes:
    """The create body up to its requests: the endpoint and the model first, as OpenRouter reads the
    body as a stream (the `openrouter-batch` crate's live-verified wire rules, docs.rs, 0.1.2), and
    the batch's `provider` when its requests pin one."""
    pinned = ',"provider":' + _json(pin) if pin is not None else ""
    return ('{"endpoint":' + _json(endpoint) + ',"model":' + _json(model) + pinned + ',"requests":[').encode("utf-8")


def _requests(path: Path) -> tuple[bytes, Any]:
    """The file's lines, one request each, joined as the members of a JSON array; and the
    `provider` their bodies pin (a model argument: `openrouter.spec.pin_problems`), taken out of
    each body to be sent once, as the batch's (a batch runs on one provider: "pin a provider with
    `provider.only`", https://openrouter.ai/docs/batch-quickstart). The same line keeps it for the
    `sync` backend, whose chat completions take it per call."""
    lines, pins = [], set()
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        pin = None
        if b'"provider"' in line:  # only then parsed: most files pin nothing
            request = json.loads(line)
            body = request.get("body") if isinstance(request, dict) else None
            if isinstance(body, dict) and "provider" in body:
                pin = body.pop("provider")
                line = _json(request).encode("utf-8")
        pins.add(_json(pin))
        lines.append(line)
    if len(pins) > 1:
        raise ProviderError(
            f"{path.name}: its requests pin different providers ({', '.join(sorted(pins))}), where an "
            "OpenRouter batch runs on one; give the model one `provider` argument and compile it again"
        )
    return b",".join(lines), json.loads(pins.pop()) if pins else None
