"""The `batch` backend of `xai/` models: xAI's Batch API, over its REST routes.

Built from xAI's guide (https://docs.x.ai/developers/advanced-api-usage/batch-api) and the official
`xai-sdk`'s batch types (1.21.0, `xai_sdk/proto/v6/batch_pb2.pyi`: `Batch`, `BatchState`,
`ListBatchesResponse`, `BatchResult`), taken 2026-12-06:

- a batch is a container created empty, `POST /v1/batches` `{"name"}`, and requests are added to
  it, `POST /v1/batches/{batch_id}/requests` `{"batch_requests": [{"batch_request_id",
  "batch_request": {"chat_get_completion": <body>}}]}`. "Using your own IDs is useful for
  idempotency (ensuring a request is only processed once)": an add whose answer was lost is sent
  again by the SDK's retries. So "uploading" a file is checking it against the limits and noting
  its hash (as for OpenRouter's inline batches), and the create is two calls: the container, named
  with the workspace's tag (`name_of`: a batch holds no metadata, a `name` it does), then one add carrying the whole file (a file is at most 25 MB, the add's documented
  payload limit: `xai.spec.LIMITS`), then the batch read back;
- a batch has no status word: its `state` counts `num_requests`, `num_pending`, `num_success`,
  `num_error` and `num_cancelled`, and a cancelled one has a `cancel_time` (and, when xAI ended it,
  a `cancel_by_xai_message`). Read as ours (`info`): no request yet `validating`, requests pending
  `in_progress`, none pending `completed`; cancelled `cancelling` while requests are pending and
  `cancelled` after, or `expired` when xAI ended it ("Already-processed requests remain available
  in the results": the rest is sent again);
- batches are listed with `GET /v1/batches` (`page_size`, `pagination_token` until none comes back;
  no order documented, so the whole listing is read), polled with `GET /v1/batches/{batch_id}`,
  cancelled with `POST /v1/batches/{batch_id}:cancel`; results are read page by page from
  `GET /v1/batches/{batch_id}/results` and saved one per line (`xai.results` reads them).

**A lost create** is found again by its tag (`engine.recovery`), as an OpenAI batch is. A container
holding no request yet (the add never arrived: the command stopped between the two calls, or the
add was refused) shows no tag (`info`), so it is never adopted as the file's batch: the file is
created again after the grace period, and the empty container is left, holding nothing to run or
pay for. An add refused outright (a 4xx) cancels its container first.

Every call goes through the `openai` SDK's HTTP client (its retries, timeouts and exceptions), so
the error policy is the template's and `xai.errors` reads xAI's error bodies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lexpilot_batch.errors import ProviderError, transient_status
from lexpilot_batch.providers.batch import BatchInfo, BatchSource, BatchStatus
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.openai.batch import OpenAIClientBackend
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.sync.call import Response
from lexpilot_batch.providers.xai.errors import Unreadable, failure_of
from lexpilot_batch.util.fileio import file_sha256
from lexpilot_batch.util.redaction import save_scrubbed

BATCHES = "/batches"  # under the base URL, https://api.x.ai/v1
INLINE = "inline:"  # the "file id" of a checked file: its hash, verified again when it is created
PAGE = 100  # the page size the guide's examples ask for (no largest one is documented)
ADD_BYTES = 25_000_000  # an add call's documented payload limit ("25MB")
# What the add body's item adds to a line: `{"batch_request_id":…,"batch_request":{"chat_get_completion":…}}`
# for `{"custom_id":…,"body":…}`, and the comma between items.
WRAP = len('"batch_request_id""batch_request"{"chat_get_completion"}') - len('"custom_id""body"') + 1
TAGGED = "lexpilot "  # a batch name holding the workspace's tag: this, then the tag as JSON (`name_of`)


def name_of(metadata: dict[str, str]) -> str:
    """The workspace's tag as a batch's `name`: an xAI batch holds no metadata, but a name."""
    return TAGGED + json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def tag_of(name: Any) -> dict[str, str]:
    """The tag a name written by `name_of` holds; {} for any other name."""
    if not isinstance(name, str) or not name.startswith(TAGGED):
        return {}
    try:
        tag = json.loads(name[len(TAGGED) :])
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in tag.items()} if isinstance(tag, dict) else {}


def seconds(stamp: Any) -> float | None:
    """An RFC 3339 timestamp (protobuf's `Timestamp` in JSON: `2026-12-06T10:00:00.123456789Z`) as
    seconds since the epoch; None for anything else."""
    if not isinstance(stamp, str) or "T" not in stamp:
        return None
    text = stamp.strip().replace("z", "Z").removesuffix("Z")
    zone = "+00:00"
    for sign in ("+", "-"):
        at = text.rfind(sign, text.index("T"))
        if at > 0:
            text, zone = text[:at], text[at:]
            break
    whole, _, fraction = text.partition(".")
    try:
        moment = datetime.fromisoformat(whole + (f".{fraction[:6].ljust(6, '0')}" if fraction else "") + zone)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def _count(state: dict[str, Any], key: str) -> int:
    value = state.get(key)
    if isinstance(value, str) and value.isdigit():  # int64 in JSON may come as a string (protobuf's JSON mapping)
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def info(batch: Any) -> BatchInfo:
    """A `Batch` as a `BatchInfo`; its results are fetched by its id. An answer that is none
    (`errors.Unreadable`) is an answer lost on the way."""
    if not isinstance(batch, dict) or not batch.get("batch_id"):
        raise Unreadable("an answer that is no batch object")
    said = batch.get("state")
    state: dict[str, Any] = said if isinstance(said, dict) else {}
    total, pending = _count(state, "num_requests"), _count(state, "num_pending")
    succeeded, failed = _count(state, "num_success"), _count(state, "num_error")
    if batch.get("cancel_time"):
        ended = BatchStatus.EXPIRED if batch.get("cancel_by_xai_message") else BatchStatus.CANCELLED
        status = BatchStatus.CANCELLING if pending else ended
    elif not total:
        status = BatchStatus.VALIDATING
    else:
        status = BatchStatus.IN_PROGRESS if pending else BatchStatus.COMPLETED
    done = status in (BatchStatus.COMPLETED, BatchStatus.EXPIRED, BatchStatus.CANCELLED)
    return BatchInfo(
        id=str(batch["batch_id"]),
        status=status,
        output_file_id=str(batch["batch_id"]) if done else None,
        request_counts={"total": total, "completed": succeeded, "failed": failed},
        # A container that holds no request carries no tag: it is no file's batch (module docstring).
        metadata=tag_of(batch.get("name")) if total else {},
        created_at=seconds(batch.get("create_time")),
    )


class XaiBatchBackend(OpenAIClientBackend):
    noun = "xAI batch"
    newest_first = False  # xAI documents no order of its listing

    def hint(self, endpoint: Endpoint) -> str:
        return f"Check XAI_BASE_URL ({endpoint.base_url}): it ends in /v1"

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    def _upload(self, path: Path, name: str) -> str:
        """Nothing leaves the workspace: the file is checked against the batch limits, and its hash
        is what `create` checks again before it sends the requests."""
        size, lines = path.stat().st_size, 0
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                lines += chunk.count(b"\n")
        if lines > self.limits.max_requests or size > self.limits.max_bytes or size + lines * WRAP > ADD_BYTES:
            raise ProviderError(
                f"{path.name}: {lines:,} requests / {size:,} bytes exceed what one add call of an xAI batch takes "
                f"({self.limits.max_requests:,} / {self.limits.max_bytes // (1 << 20)} MB); compile it again with "
                "--max-requests-per-file / --max-bytes-per-file within those limits"
            )
        return INLINE + (file_sha256(path) or "")[:32]

    def _create(
        self, input_file_id: str, metadata: dict[str, str], endpoint: str | None, source: BatchSource | None
    ) -> BatchInfo:
        """The container, named with the tag and without the SDK's retries (creating is not
        idempotent); the file's requests added to it in one call (idempotent by their ids: the
        SDK's retries on); the batch read back."""
        if source is None:
            raise ValueError("an xAI batch is created from its workspace file")
        if INLINE + (file_sha256(source.path) or "")[:32] != input_file_id:
            raise ProviderError(
                f"{source.path.name} changed on disk after it was checked for sending; it is not sent. "
                "Run `lexpilot-batch doctor --repair` (its requests are compiled again), or restore it"
            )
        body = _requests(source.path)
        created: Any = self.client.with_options(max_retries=0).post(
            BATCHES, cast_to=object, body={"name": name_of(metadata)}
        )
        batch_id = info(created).id
        try:
            self.client.post(
                f"{BATCHES}/{batch_id}/requests",
                cast_to=object,
                content=body,
                options={"headers": {"Content-Type": "application/json"}},
            )
        except Exception as exc:
            failure = self.failure(exc)
            if failure is not None and failure.status is not None and not transient_status(failure.status):
                # Refused outright: nothing was added; the empty container is cancelled, as best it can be.
                try:
                    self.client.with_options(max_retries=0).post(f"{BATCHES}/{batch_id}:cancel", cast_to=object)
                except Exception as other:
                    if self.failure(other) is None:
                        raise
            raise
        return self._retrieve(batch_id)

    def _list(self) -> Iterator[BatchInfo]:
        token: str | None = None
        while True:
            query: dict[str, Any] = {"page_size": PAGE, **({"pagination_token": token} if token else {})}
            page: Any = self.client.get(BATCHES, cast_to=object, options={"params": query})
            if not isinstance(page, dict):
                raise Unreadable("an answer that is no list of batches")
            yield from (info(b) for b in (page.get("batches") or []) if isinstance(b, dict) and b.get("batch_id"))
            token = page.get("pagination_token") or None
            if not token or not page.get("batches"):
                return

    def _retrieve(self, batch_id: str) -> BatchInfo:
        return info(self.client.get(f"{BATCHES}/{batch_id}", cast_to=object))

    def _cancel(self, batch_id: str) -> BatchInfo:
        return info(self.client.post(f"{BATCHES}/{batch_id}:cancel", cast_to=object))

    def download_what(self, file_id: str) -> str:
        return f"downloading the results of xAI batch {file_id}"

    def _download(self, file_id: str, dest: Path) -> int:
        """The ended batch's results (`file_id` is the batch id), one per line, written whole or not
        at all, its secrets replaced (`redaction.Scrubber`)."""
        return save_scrubbed(dest, self._result_lines(file_id))

    def _result_lines(self, batch_id: str) -> Iterator[bytes]:
        """The batch's results page after page (`page_size`, `pagination_token` until none comes
        back), each result a line. An answer that is no page of them (a gateway's HTML or text, JSON
        cut short, nothing) is saved as it came, and no page after it is read: `engine.downloads`
        finds it in the saved file, as it finds a result file's damage (a page a result short by the
        count), and fetches the whole download again; nothing of it is ingested."""
        token: str | None = None
        while True:
            query: dict[str, Any] = {"page_size": PAGE, **({"pagination_token": token} if token else {})}
            raw = self.client.get(f"{BATCHES}/{batch_id}/results", cast_to=Response, options={"params": query})
            page = _page(raw.content)
            if page is None:
                yield raw.content.rstrip(b"\n") + b"\n" if raw.content.strip() else b""
                return
            yield from ((_json(r) + "\n").encode("utf-8") for r in page["results"])
            token = page.get("pagination_token") or None
            if not token or not page["results"]:
                return


def _page(data: bytes) -> dict[str, Any] | None:
    """A results page (`{"results": [BatchResult], "pagination_token"}`), or None for an answer that is none."""
    try:
        page = json.loads(data)
    except ValueError:  # not JSON, cut short, or not UTF-8
        return None
    if not isinstance(page, dict) or not isinstance(page.get("results"), list):
        return None
    return page if all(isinstance(r, dict) for r in page["results"]) else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _requests(path: Path) -> bytes:
    """The add call's body: each line `{"custom_id", "body"}` as `{"batch_request_id", "batch_request":
    {"chat_get_completion": body}}`."""
    items = []
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if not line.strip():
            continue
        request = json.loads(line)
        if not isinstance(request, dict) or not isinstance(request.get("body"), dict):
            raise ProviderError(
                f"{path.name}, line {number}: not a request line (a custom_id and a body object); "
                "run `lexpilot-batch doctor --repair` to compile it again"
            )
        item = {"batch_request_id": request.get("custom_id"), "batch_request": {"chat_get_completion": request["body"]}}
        items.append(_json(item))
    return ('{"batch_requests":[' + ",".join(items) + "]}").encode("utf-8")
