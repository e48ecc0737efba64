"""OpenRouter's Batch API routes of the simulated provider, under `/api/v1` (OpenRouter's own base path).

Built from OpenRouter's documentation (https://openrouter.ai/docs/batch-quickstart;
https://openrouter.ai/docs/guides/features/batch-api; the API reference's batch pages,
https://openrouter.ai/docs/api/api-reference/batch/; the official SDKs' types `BatchSubmitBody`,
`Request`, `BatchObject`, `BatchObjectStatus`, `BatchListItem`, `BatchListResponse`, `BatchResult`,
`BatchResultsPageResponse`, https://openrouter.ai/docs/client-sdks/python/components/; the error
shape, https://openrouter.ai/docs/api/reference/errors-and-debugging; all taken 2026-12-06):

- **create**: `POST /batches` `{"endpoint", "model", "requests": [{"custom_id", "body"}],
  "completion_window", "provider": {"only": [...]}, "callback_url"}` (the first three required; "Only
  `provider.only` is supported") answers `202` with the batch in status `validating`. Up to 5,000
  requests "in one call"; each `custom_id` unique; each body a chat completion request with
  messages (this simulator runs `/v1/chat/completions` only, of the documented endpoints), checked
  against the official SDK's `ChatRequestTypedDict` (`sources.requests`) where it is installed. A body
  naming another model than the batch is refused. What is refused here is refused at create, as a
  400 naming it; the real service says it may instead accept the batch and fail it after
  validation ("A 202 means OpenRouter stored the batch, not that the batch is valid"): stricter,
  so that a rehearsal that passes sends only what is documented (a request body's own `provider`
  too: a batch "runs on one provider", pinned by the batch's `provider.only`, which its answers
  name as the `provider` it ran on). A batch holds no metadata;
- **batches**: `GET /batches` lists newest first, `after` the previous page's `last_id`
  (`{"object": "list", "data", "first_id", "last_id", "has_more"}`, each item's `results` null);
  `GET /batches/{id}` is the `BatchObject` (`status` among `validating`, `in_progress`,
  `finalizing`, `completed`, `failed`, `expired`, `cancelling`, `cancelled`; `request_counts`
  `{total, completed, failed}`; `usage` once it ended; `error` `{message}` when it failed), its
  `results` once it ended; `POST /batches/{id}/cancel` cancels it;
- **results**: `GET /batches/{id}/results` pages the ended batch's `BatchResult`s (`{"id",
  "custom_id", "response": {"status_code", "request_id", "body"}, "error": {"message", "param",
  "type"}}`), `cursor` the previous page's `next_cursor`, `limit` from 1 through 1,000 (100 here
  when not given: OpenRouter documents no default). A page is a download: the `damaged_download`
  and `cut_download` faults strike it as they strike a file's content. Each choice carries a
  `native_finish_reason` (the official SDK's `Choice` requires it), and a reasoning answer's thinking
  is in its message's `reasoning` field (https://openrouter.ai/docs/use-cases/reasoning-tokens);
  each answer's `usage` has its `cost` (https://openrouter.ai/docs/use-cases/usage-accounting), at
  the simulated provider's own price (`PRICE`). Requests an expired or cancelled batch never ran are results with an error of type `batch_expired` or
  `batch_cancelled`: what OpenRouter writes for them is not documented;
- **errors**: `{"error": {"code": <the HTTP status>, "message", "metadata"}}`.

Everything is run by the OpenAI-shaped machinery (`native`), so a request draws the same answer and
the same faults here as on every other route.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from lexpilot_batch.providers.openrouter.spec import NAME as OPENROUTER
from lexpilot_batch.simulated import batches, chat
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.faults import Faults
from lexpilot_batch.simulated.native import (
    cancel_job,
    counts,
    job_id,
    job_record,
    lines_sha256,
    records_of,
    result_lines,
    run,
    to_chat,
)
from lexpilot_batch.simulated.routes import Handlers, Reply, Route, SimulatedApi
from lexpilot_batch.simulated.sources import requests as requests_of
from lexpilot_batch.simulated.sources import typed
from lexpilot_batch.simulated.store import Store

NAME = "openrouter"  # its batches' mark in the store (`native`)
PREFIX = "/api/v1"
ENDPOINT = "/v1/chat/completions"
ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings")  # the quickstart's
WINDOW = "24h"
MAX_REQUESTS = 5_000  # "The Batch API takes up to 5,000 requests in one call"
FIELDS = frozenset({"endpoint", "model", "requests", "completion_window", "provider", "callback_url"})
PAGE = 100
MAX_PAGE = 1_000  # `GET /batches/{id}/results`' `limit`: "from 1 through 1000"
NEVER_RAN = ("batch_expired", "batch_cancelled")
PRICE = (1.0, 2.0)  # what the simulated provider charges a million prompt and completion tokens (`_costed`)


class OpenRouterApi(Handlers):
    """The batch routes over one simulated provider's store."""

    def __init__(self, store: Store, faults: Faults, seed: int, roll: Callable[..., float]) -> None:
        super().__init__(store, faults, seed, roll)
        self._lock = threading.Lock()

    def chat_completion(self, body: Any, client_request_id: str | None = None) -> dict[str, Any]:
        """One chat completion, answered as a batch line with the custom_id `client_request_id` is (`chat`)."""
        return chat.answer(body, client_request_id, self.seed, self.faults, self.roll, self.store.prefixes)

    def create(self, body: Any) -> Reply:
        if not isinstance(body, dict):
            raise bad_request("The request body must be a JSON object.")
        unknown = set(body) - FIELDS
        if unknown:
            raise bad_request(f"unexpected field(s) {', '.join(sorted(unknown))} in the batch submit body.")
        endpoint, model, requests = body.get("endpoint"), body.get("model"), body.get("requests")
        if endpoint not in ENDPOINTS:
            raise bad_request(f"endpoint: one of {', '.join(ENDPOINTS)} is required.", "endpoint")
        if endpoint != ENDPOINT:
            raise bad_request(f"endpoint: the simulated provider runs {ENDPOINT} only, not {endpoint}.", "endpoint")
        if not isinstance(model, str) or not model:
            raise bad_request("model: the batch's model is required.", "model")
        if body.get("completion_window", WINDOW) != WINDOW:
            raise bad_request(f"completion_window: {WINDOW} only.", "completion_window")
        provider = body.get("provider")
        if provider is not None and (
            not isinstance(provider, dict)
            or set(provider) - {"only"}
            or not isinstance(provider.get("only"), list)
            or not all(isinstance(p, str) and p for p in provider["only"])
        ):
            raise bad_request("provider: only provider.only, a list of provider names, is supported.", "provider")
        if not isinstance(requests, list) or not requests:
            raise bad_request("requests: a non-empty array of {custom_id, body} is required.", "requests")
        if len(requests) > MAX_REQUESTS:
            raise bad_request(f"requests: {len(requests)} requests; a batch takes at most {MAX_REQUESTS}.", "requests")
        lines = self._lines(requests, model)
        native = {"api": NAME, "n": len(lines), "model": model, "provider": provider}
        record = run(self.store, lines, self.seed, self.faults, native, lines_sha256(requests))
        return Reply(self._batch(record, with_results=False), status=202)

    def _lines(self, requests: list[Any], model: str) -> list[bytes]:
        out: list[bytes] = []
        seen: set[str] = set()
        for number, request in enumerate(requests):
            where = f"requests[{number}]"
            if not isinstance(request, dict) or set(request) != {"custom_id", "body"}:
                raise bad_request(f"{where}: a request is {{custom_id, body}}, both required, nothing else.")
            cid, req = request["custom_id"], request["body"]
            if not isinstance(cid, str) or not cid:
                raise bad_request(f"{where}.custom_id: a non-empty string is required.")
            if cid in seen:
                raise bad_request(f"{where}.custom_id: {cid!r} is not unique in the batch.")
            seen.add(cid)
            if not isinstance(req, dict) or not isinstance(req.get("messages"), list) or not req["messages"]:
                raise bad_request(f"{where}.body: a chat completion request with messages is required.")
            request_type = requests_of.openrouter_chat()  # None without the SDK: nothing more is checked
            found = typed.problems(req, request_type) if request_type is not None else []
            if found:
                field, what = found[0]
                raise bad_request(f"{where}.body.{field}: {what} (OpenRouter's ChatRequest).")
            if "provider" in req:  # stricter than documented: the pin is the batch's
                raise bad_request(f"{where}.body.provider: a batch runs on one provider, pinned by its provider.only.")
            if req.get("model", model) != model:
                raise bad_request(f"{where}.body.model: {req.get('model')!r} is not the batch's model {model!r}.")
            fields = {k: v for k, v in req.items() if k not in ("model", "messages")}
            out.append(to_chat(cid, model, req["messages"], fields))
        return out

    def _record(self, batch: str) -> dict[str, Any]:
        return job_record(self.store, NAME, batch, "id")

    def get(self, batch: str) -> dict[str, Any]:
        return self._batch(self._record(batch), with_results=True)

    def cancel(self, batch: str) -> dict[str, Any]:
        cancel_job(self.store, self._record(batch), batch)
        return self._batch(self._record(batch), with_results=False)

    def listing(self, query: dict[str, str]) -> dict[str, Any]:
        try:
            limit = max(1, min(int(query.get("limit") or 20), 100))
        except ValueError:
            raise bad_request("limit: an integer.", "limit") from None
        records = records_of(self.store, NAME)  # newest first
        ids = [job_id(r["batch"]["id"]) for r in records]
        start = ids.index(query["after"]) + 1 if query.get("after") in ids else 0
        page = records[start : start + limit]
        data = [{**self._batch(r, with_results=False), "results": None} for r in page]
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": start + limit < len(records),
        }

    def results(self, batch: str, query: dict[str, str]) -> dict[str, Any]:
        record = self._record(batch)
        found = self._results(record)
        if found is None:
            raise ApiError(409, f"Batch {batch} has not finished; its results are not ready.")
        cursor, limit = query.get("cursor") or "0", query.get("limit") or str(PAGE)
        if not cursor.isdigit():
            raise bad_request("cursor: the next_cursor of the previous page.", "cursor")
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE:
            raise bad_request(f"limit: from 1 through {MAX_PAGE}.", "limit")
        start, size = int(cursor), int(limit)
        more = start + size < len(found)
        return {
            "object": "list",
            "data": found[start : start + size],
            "has_more": more,
            "next_cursor": str(start + size) if more else None,
        }

    def _results(self, record: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The ended batch's results (None while it runs)."""
        batch = batches.current(self.store, record)
        if batch["status"] not in batches.TERMINAL or batch["status"] == "failed":
            return None
        with self._lock:
            return [_result(line) for line in result_lines(self.store, batch)]

    def _batch(self, record: dict[str, Any], with_results: bool) -> dict[str, Any]:
        """The batch as a `BatchObject` now."""
        batch = batches.current(self.store, record)
        record = self.store.get_batch(record["batch"]["id"]) or record
        sim, status, native = record["sim"], batch["status"], record["sim"]["native"]
        running = batch.get("request_counts") or {}
        succeeded, failed = int(running.get("completed") or 0), int(running.get("failed") or 0)
        out: dict[str, Any] = {
            "id": job_id(batch["id"]),
            "object": "batch",
            "endpoint": ENDPOINT,
            "model": native["model"],
            "completion_window": WINDOW,
            "status": status,
            "created_at": int(sim["created"]),
            "expires_at": int(sim["created"]) + 24 * 3600,
            "finalized_at": None,
            "provider": ((native.get("provider") or {}).get("only") or ["simulated"])[0],  # the one it ran on
            "error": None,
            "results": None,
            "usage": None,
        }
        if status == "failed":
            out["error"] = {"message": "The batch input could not be read."}
        elif status in batches.TERMINAL:
            succeeded, failed, never = counts(record, status)
            failed += never
            end = batch.get("completed_at") or batch.get("expired_at") or batch.get("cancelled_at")
            out["finalized_at"] = int(end or sim["created"])
            found: list[dict[str, Any]] = self._results(record) or []
            out["usage"] = _usage(found)
            if with_results:
                out["results"] = found
        out["request_counts"] = {"total": int(native["n"]), "completed": succeeded, "failed": failed}
        return out


def _result(line: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI result line as OpenRouter's `BatchResult`."""
    cid = line.get("custom_id")
    rid = str(line.get("id") or f"req_{cid}")
    response = line.get("response")
    if isinstance(response, dict) and response.get("status_code") == 200:
        body = dict(response["body"])
        body["choices"] = [_reasoned(c) for c in body.get("choices") or []]
        body["usage"] = _costed(body.get("usage") or {})
        answer = {"status_code": 200, "request_id": rid, "body": body}
        return {"id": rid, "custom_id": cid, "response": answer, "error": None}
    error = line.get("error")
    detail = error if isinstance(error, dict) else None
    if detail is None and isinstance(response, dict) and isinstance(response.get("body"), dict):
        detail = response["body"].get("error")
    detail = detail if isinstance(detail, dict) else {}
    kind = detail.get("code") if detail.get("code") in NEVER_RAN else detail.get("type") or detail.get("code")
    failure = {"message": str(detail.get("message") or "failed"), "param": None, "type": kind}
    return {"id": rid, "custom_id": cid, "response": None, "error": failure}


def _reasoned(choice: dict[str, Any]) -> dict[str, Any]:
    """A choice as OpenRouter's: the upstream provider's own `native_finish_reason` beside OpenAI's
    (the official SDK's `Choice` requires it; here the same word), a reasoning answer's thinking
    in its message's `reasoning`."""
    choice = {**choice, "native_finish_reason": choice.get("finish_reason")}
    message = dict(choice.get("message") or {})
    thinking = message.pop("reasoning_content", None)
    if not thinking:
        return choice
    return {**choice, "message": {**message, "reasoning": thinking}}


def _costed(usage: dict[str, Any]) -> dict[str, Any]:
    """A request's `usage` with its `cost`, as OpenRouter reports it in every answer ("Cost in
    credits", https://openrouter.ai/docs/use-cases/usage-accounting): here at the simulated
    provider's own price (`PRICE`, US dollars a million tokens) at half price, no model's real one."""
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    cost = (prompt * PRICE[0] + completion * PRICE[1]) / 1e6 * 0.5
    return {**usage, "cost": round(cost, 12)}


def _usage(found: list[dict[str, Any]]) -> dict[str, int]:
    """The batch's `usage`: its answers' tokens summed."""
    total = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for result in found:
        usage = ((result.get("response") or {}).get("body") or {}).get("usage") or {}
        for key in total:
            total[key] += int(usage.get(key) or 0)
    return total


def error_body(error: ApiError) -> dict[str, Any]:
    """OpenRouter's error body: `{"error": {"code": <HTTP status>, "message", "metadata"}}`."""
    return {"error": {"code": error.status, "message": error.message, "metadata": None}}


API = SimulatedApi[OpenRouterApi](
    NAME,
    OPENROUTER,
    OpenRouterApi,
    (
        Route("POST", r"/api/v1/batches", "openrouter_create", lambda a, r: a.create(r.json()), creates=True),
        Route("GET", r"/api/v1/batches", "openrouter_list", lambda a, r: a.listing(r.query)),
        Route("GET", r"/api/v1/batches/([^/]+)", "openrouter_get", lambda a, r: a.get(*r.args)),
        Route(
            "GET",
            r"/api/v1/batches/([^/]+)/results",
            "openrouter_results",
            lambda a, r: a.results(r.args[0], r.query),
            page="data",  # a download: damaged and broken off as a file's content is
        ),
        Route("POST", r"/api/v1/batches/([^/]+)/cancel", "openrouter_cancel", lambda a, r: a.cancel(*r.args)),
        Route(
            "POST",
            r"/api/v1/chat/completions",
            "chat_completion",
            lambda a, r: a.chat_completion(r.json(), r.call_id),
            chat=True,
            on_flex=chat.on_flex,
        ),
    ),
    prefixes=("/api/v1/",),
    base_path=PREFIX,  # `OPENROUTER_BASE_URL`: https://openrouter.ai/api/v1
    error_body=error_body,
)
