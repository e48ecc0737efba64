"""xAI's Batch API routes of the simulated provider, under `/xai/v1` (its base URL is https://api.x.ai/v1).

Built from xAI's guide (https://docs.x.ai/developers/advanced-api-usage/batch-api: its REST and
`xai-sdk` examples, "Understanding batch states", "Limitations") and the official `xai-sdk`'s
protobuf messages (1.21.0, `xai_sdk/proto/v6/batch_pb2.pyi`: `Batch`, `BatchState`,
`CreateBatchRequest`, `AddBatchRequestsRequest`, `ListBatchesResponse`, `BatchResult`; and
`chat_pb2.GetCompletionsRequest`), taken 2026-12-06. The REST answers are those messages' JSON
(snake_case names, timestamps in RFC 3339), except where the guide's REST examples name the request
otherwise (`batch_request.chat_get_completion`, a chat completions body):

- **create**: `POST /batches` `{"name"}` answers the `Batch`, empty. A batch created from an
  uploaded file (`input_file_id`, since March 2026) is refused here: this simulator takes requests
  added to a batch only, the flow the guide documents;
- **add**: `POST /batches/{batch_id}/requests` `{"batch_requests": [{"batch_request_id",
  "batch_request": {"chat_get_completion": body}}]}` answers `{}` (the SDK's `AddBatchRequests`
  returns `google.protobuf.Empty`); an id not given is a UUID ("we generate a UUID for you"); each
  body's fields are `GetCompletionsRequest`'s (`sources.requests.xai_completion_fields`, where the
  SDK is installed) and their values an OpenAI chat completion's; a cancelled batch takes no more
  ("You cannot add more requests to a cancelled batch"). Adding again requests already added is
  answered `{}` and changes nothing ("useful for idempotency (ensuring a request is only processed
  once)"); other requests added to a batch that already runs are refused: stricter, this simulator
  runs a batch's requests together (`native.run`);
- **batches**: `GET /batches` (`page_size`, `pagination_token`: `{"batches", "pagination_token"}`,
  newest first) and `GET /batches/{batch_id}`: `state` counts `num_requests`, `num_pending`,
  `num_success`, `num_error`, `num_cancelled`; a cancelled batch has its `cancel_time`;
  `cost_breakdown.total_cost_usd_ticks` (1e-10 USD) at the simulated provider's own price (`PRICE`),
  each answer's own in its `usage.cost_in_usd_ticks` (https://docs.x.ai/developers/cost-tracking);
  `POST /batches/{batch_id}:cancel` answers the batch: "pending requests will not be processed",
  the processed ones stay in the results;
- **results**: `GET /batches/{batch_id}/results` (`page_size`, default 100, `pagination_token`):
  `{"results": [{"batch_request_id", "batch_result": {"response": {"chat_get_completion"}}}|
  {"batch_request_id", "batch_result": {"error": {"code", "message"}}}], "pagination_token"}`, the
  token absent on the last page. A page is a download: the `damaged_download` and `cut_download`
  faults strike it as they strike a file's content. Results are listed once the batch has ended
  (xAI lists each as soon as it is done: the client here reads them at the end only);
- **errors**: `{"code": <the gRPC status in words>, "error": <message>}`.

What xAI does not document, and this simulator assumes: the result's wrapping (`batch_result`, named
as the request's `batch_request` is); the end of a batch that did not finish in its window (the
`expire_batch` fault): xAI cancels what is pending, with a `cancel_by_xai_message`, and the
finished requests keep their results; requests that never ran are no results.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

from lexpilot_batch.providers.xai.spec import NAME as XAI
from lexpilot_batch.simulated import batches, chat
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.faults import Faults
from lexpilot_batch.simulated.native import counts, lines_sha256, now, record_of, result_lines, rfc3339, run, to_chat
from lexpilot_batch.simulated.routes import Handlers, Route, SimulatedApi
from lexpilot_batch.simulated.sources import requests as requests_of
from lexpilot_batch.simulated.sources import typed
from lexpilot_batch.simulated.store import Store

NAME = "xai"  # its batches' mark in the store (`native`)
PREFIX = "/xai/v1"
CONTAINER = "xai-batch.json"  # a batch as created, kept as an internal file of the store
PAGE = 100
PRICE = (0.2, 0.5)  # what the simulated provider charges a million prompt and completion tokens, at half price
NEVER_RAN = ("batch_expired", "batch_cancelled")
EXPIRED = "The batch was not processed within 24 hours; its pending requests were cancelled."
WORDS = {400: "Client specified an invalid argument", 401: "Unauthenticated", 403: "Permission denied",
         404: "Some requested entity was not found", 429: "Too many requests", 500: "Internal error",
         503: "The service is currently unavailable"}  # fmt: skip


class XaiApi(Handlers):
    """The batch routes over one simulated provider's store."""

    def __init__(self, store: Store, faults: Faults, seed: int, roll: Callable[..., float]) -> None:
        super().__init__(store, faults, seed, roll)
        self._lock = threading.Lock()

    def chat_completion(self, body: Any, client_request_id: str | None = None) -> dict[str, Any]:
        """One chat completion, answered as a batch line with the custom_id `client_request_id` is (`chat`)."""
        return chat.answer(body, client_request_id, self.seed, self.faults, self.roll, self.store.prefixes)

    # --- the batches, as created ------------------------------------------------------------------

    def _container(self, batch_id: str) -> dict[str, Any]:
        found = self.store.get_file(f"xai-{batch_id}")
        if found is None or found["filename"] != CONTAINER:
            raise ApiError(404, f"Batch {batch_id} not found.", code="not_found")
        return json.loads(self.store.file_bytes(found["id"]))

    def _save(self, container: dict[str, Any]) -> None:
        data = json.dumps(container, ensure_ascii=False).encode("utf-8")
        self.store.add_file(data, CONTAINER, "internal", file_id=f"xai-{container['batch_id']}")

    def _containers(self) -> list[dict[str, Any]]:
        found = [f for f in self.store.list_files() if f["filename"] == CONTAINER]
        held = [json.loads(self.store.file_bytes(f["id"])) for f in found]
        return sorted(held, key=lambda c: c["seq"], reverse=True)

    def create(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or set(body) - {"name", "input_file_id"}:
            raise bad_request("The body must be a CreateBatchRequest: {name, input_file_id}.")
        if body.get("input_file_id"):
            raise bad_request("input_file_id: the simulated provider takes requests added to a batch only.")
        name = body.get("name", "")
        if not isinstance(name, str):
            raise bad_request("name: a string.")
        container = {
            "batch_id": f"batch_{uuid.uuid4()}",
            "name": name,
            "created": now(),
            "seq": self.store.next_seq(),
            "run": None,
            "ids": [],
            "cancelled": None,
        }
        with self._lock:
            self._save(container)
        return self._batch(container)

    def add(self, batch_id: str, body: Any) -> dict[str, Any]:
        with self._lock:
            container = self._container(batch_id)
            if container["cancelled"] is not None:
                raise bad_request(f"Batch {batch_id} was cancelled: no requests can be added to it.")
            items = body.get("batch_requests") if isinstance(body, dict) else None
            if not isinstance(items, list) or not items or set(body) - {"batch_requests"}:
                raise bad_request("batch_requests: a non-empty array of {batch_request_id, batch_request}.")
            lines, ids, models = self._lines(items)
            if container["run"] is not None:
                if set(ids) <= set(container["ids"]):
                    return {}  # added again: processed once
                raise bad_request(
                    f"Batch {batch_id} runs already: the simulated provider runs a batch's requests together."
                )
            native = {"api": NAME, "n": len(lines), "batch_id": batch_id}
            record = run(self.store, lines, self.seed, self.faults, native, lines_sha256(items), len(models) == 1)
            container.update(run=record["batch"]["id"], ids=ids)
            self._save(container)
        return {}

    def _lines(self, items: list[Any]) -> tuple[list[bytes], list[str], set[str]]:
        out: list[bytes] = []
        ids: list[str] = []
        models: set[str] = set()
        fields = requests_of.xai_completion_fields()  # None without the SDK: the fields are not checked
        for number, item in enumerate(items):
            where = f"batch_requests[{number}]"
            if not isinstance(item, dict) or set(item) - {"batch_request_id", "batch_request"}:
                raise bad_request(f"{where}: a BatchRequest is {{batch_request_id, batch_request}}.")
            cid = item.get("batch_request_id") or str(uuid.uuid4())
            request = item.get("batch_request")
            req = request.get("chat_get_completion") if isinstance(request, dict) else None
            if not isinstance(cid, str) or cid in ids:
                raise bad_request(f"{where}.batch_request_id: a string unique in the call.")
            if not isinstance(req, dict) or not isinstance(request, dict) or set(request) != {"chat_get_completion"}:
                raise bad_request(f"{where}.batch_request: {{chat_get_completion: <a chat completions body>}}.")
            if (
                not isinstance(req.get("model"), str)
                or not isinstance(req.get("messages"), list)
                or not req["messages"]
            ):
                raise bad_request(f"{where}.batch_request.chat_get_completion: a model and messages are required.")
            unknown = sorted(set(req) - fields) if fields is not None else []
            if unknown:
                raise bad_request(f"{where}: {', '.join(unknown)} is no field of xAI's GetCompletionsRequest.")
            request_type = requests_of.openai_chat()
            found = typed.problems(req, request_type, closed=False) if request_type is not None else []
            if found:
                raise bad_request(f"{where}.batch_request.chat_get_completion.{found[0][0]}: {found[0][1]}.")
            ids.append(cid)
            models.add(req["model"])
            rest = {k: v for k, v in req.items() if k not in ("model", "messages")}
            out.append(to_chat(cid, req["model"], req["messages"], rest))
        return out, ids, models

    def get(self, batch_id: str) -> dict[str, Any]:
        return self._batch(self._container(batch_id))

    def cancel(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            container = self._container(batch_id)
            record = self._run(container)
            if record is not None and batches.current(self.store, record)["status"] not in batches.TERMINAL:
                batches.cancel(self.store, record)
            if container["cancelled"] is None and (record is None or self._ended(record) != "completed"):
                container["cancelled"] = now()
                self._save(container)
        return self._batch(container)

    def listing(self, query: dict[str, str]) -> dict[str, Any]:
        size, start = _paging(query)
        held = self._containers()
        page = [self._batch(c) for c in held[start : start + size]]
        more = start + size < len(held)
        return {"batches": page, **({"pagination_token": str(start + size)} if more else {})}

    def results(self, batch_id: str, query: dict[str, str]) -> dict[str, Any]:
        size, start = _paging(query)
        record = self._run(self._container(batch_id))
        found: list[dict[str, Any]] = []
        if record is not None and self._ended(record) is not None:
            with self._lock:
                found = [r for r in (_result(line) for line in result_lines(self.store, self._now(record))) if r]
        more = start + size < len(found)
        return {"results": found[start : start + size], **({"pagination_token": str(start + size)} if more else {})}

    # --- what a batch is now ------------------------------------------------------------------------

    def _run(self, container: dict[str, Any]) -> dict[str, Any] | None:
        return record_of(self.store, container["run"], NAME) if container["run"] else None

    def _now(self, record: dict[str, Any]) -> dict[str, Any]:
        return batches.current(self.store, record)

    def _ended(self, record: dict[str, Any]) -> str | None:
        status = self._now(record)["status"]
        return status if status in batches.TERMINAL else None

    def _batch(self, container: dict[str, Any]) -> dict[str, Any]:
        """The batch as xAI's `Batch` message in JSON, now."""
        created = float(container["created"])
        out: dict[str, Any] = {
            "batch_id": container["batch_id"],
            "name": container["name"],
            "create_time": rfc3339(created),
            "expire_time": rfc3339(created + 30 * 24 * 3600),  # no retention is documented: ours
            "create_api_key_id": "simulated",
        }
        state = {"num_requests": 0, "num_pending": 0, "num_success": 0, "num_error": 0, "num_cancelled": 0}
        record = self._run(container)
        cost = 0.0
        if record is not None:
            batch = self._now(record)
            record = self.store.get_batch(record["batch"]["id"]) or record
            state["num_requests"] = total = int(record["sim"]["native"]["n"])
            status = batch["status"]
            if status in batches.TERMINAL:
                succeeded, failed, never = counts(record, status)
                state.update(num_success=succeeded, num_error=failed, num_cancelled=never)
                cost = sum(_cost(line) for line in result_lines(self.store, batch))
                if status == "expired":
                    end = batch.get("expired_at") or created
                    out.update(cancel_time=rfc3339(float(end)), cancel_by_xai_message=EXPIRED)
            else:
                running = batch.get("request_counts") or {}
                done, failed = int(running.get("completed") or 0), int(running.get("failed") or 0)
                state.update(num_success=done, num_error=failed, num_pending=max(total - done - failed, 0))
        if container["cancelled"] is not None and "cancel_time" not in out:
            out["cancel_time"] = rfc3339(float(container["cancelled"]))
            if record is None:
                state["num_pending"] = 0
        out["state"] = state
        out["cost_breakdown"] = {"total_cost_usd_ticks": round(cost * 1e10)}
        return out


def _paging(query: dict[str, str]) -> tuple[int, int]:
    size, token = query.get("page_size") or query.get("limit") or str(PAGE), query.get("pagination_token") or "0"
    if not size.isdigit() or not 1 <= int(size) <= 1_000:
        raise bad_request("page_size: from 1 through 1000.")
    if not token.isdigit():
        raise bad_request("pagination_token: the pagination_token of the previous page.")
    return int(size), int(token)


def _result(line: dict[str, Any]) -> dict[str, Any] | None:
    """An OpenAI result line as xAI's result (None: a request that never ran)."""
    cid = line.get("custom_id")
    response = line.get("response")
    if isinstance(response, dict) and response.get("status_code") == 200:
        # Every answer's `usage.cost_in_usd_ticks`, what it was charged (https://docs.x.ai/developers/cost-tracking).
        body = dict(response["body"])
        body["usage"] = {**(body.get("usage") or {}), "cost_in_usd_ticks": round(_cost(line) * 1e10)}
        return {"batch_request_id": cid, "batch_result": {"response": {"chat_get_completion": body}}}
    error = line.get("error")
    detail = error if isinstance(error, dict) else None
    if detail is None and isinstance(response, dict) and isinstance(response.get("body"), dict):
        detail = response["body"].get("error")
    detail = detail if isinstance(detail, dict) else {}
    if detail.get("code") in NEVER_RAN:
        return None
    status = response.get("status_code") if isinstance(response, dict) else None
    code = 13 if not isinstance(status, int) or status >= 500 else 3  # INTERNAL, INVALID_ARGUMENT
    return {
        "batch_request_id": cid,
        "batch_result": {"error": {"code": code, "message": str(detail.get("message") or "failed")}},
    }


def _cost(line: dict[str, Any]) -> float:
    response = line.get("response")
    usage = ((response or {}).get("body") or {}).get("usage") if isinstance(response, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return (int(usage.get("prompt_tokens") or 0) * PRICE[0] + int(usage.get("completion_tokens") or 0) * PRICE[1]) / 1e6


def error_body(error: ApiError) -> dict[str, Any]:
    """xAI's error body: `{"code": <the gRPC status in words>, "error": <message>}`."""
    return {"code": WORDS.get(error.status, "Unknown error"), "error": error.message}


API = SimulatedApi[XaiApi](
    NAME,
    XAI,
    XaiApi,
    (
        Route("POST", r"/xai/v1/batches", "xai_create", lambda a, r: a.create(r.json()), creates=True),
        Route("GET", r"/xai/v1/batches", "xai_list", lambda a, r: a.listing(r.query)),
        Route("GET", r"/xai/v1/batches/([^/:]+)", "xai_get", lambda a, r: a.get(*r.args)),
        Route("POST", r"/xai/v1/batches/([^/:]+)/requests", "xai_add", lambda a, r: a.add(r.args[0], r.json())),
        Route(
            "GET",
            r"/xai/v1/batches/([^/:]+)/results",
            "xai_results",
            lambda a, r: a.results(r.args[0], r.query),
            page="results",  # a download: damaged and broken off as a file's content is
        ),
        Route("POST", r"/xai/v1/batches/([^/:]+):cancel", "xai_cancel", lambda a, r: a.cancel(*r.args)),
        Route(
            "POST",
            r"/xai/v1/chat/completions",
            "chat_completion",
            lambda a, r: a.chat_completion(r.json(), r.call_id),
            chat=True,
            on_flex=chat.on_flex,
        ),
    ),
    prefixes=("/xai/",),
    base_path=PREFIX,  # `XAI_BASE_URL`: https://api.x.ai/v1
    error_body=error_body,
    overloaded=503,  # xAI's 5XX list: 500, 502 and 503 (https://docs.x.ai/developers/debugging)
)
