"""Anthropic's Message Batches routes of the simulated provider (`/v1/messages/batches`).

A create takes the requests inline and checks them as the API does: the whole batch is refused
(HTTP 400) for a bad or duplicate `custom_id` or more than 100,000 requests; a request whose
`params` the Messages API would refuse (no `max_tokens`, a temperature outside [0, 1], thinking
with another temperature or a budget under 1,024 or not under `max_tokens`) ends `errored` with an
`invalid_request_error`. A batch is `in_progress` until it ends (`canceling` after a cancel), its
`request_counts` are all `processing` until then, and its results (`results_url`) hold one line per
request: `succeeded` (a Message: a thinking block before the text when the simulated model
thought), `errored` (`api_error`, `overloaded_error`, `invalid_request_error`), `canceled` or
`expired`, in a shuffled order. A request naming a model Anthropic does not serve (`providers.bodies.model_names`:
Claude models only, no near miss of the SDK's `Model` list) ends `errored` with `not_found_error`
("model: NAME"), and the Messages call is a 404 of that type. Everything is run by the
OpenAI-shaped machinery (`native`).

`POST /v1/messages` answers one request at once with the Message the same request gets in a batch
(`chat`), or the 400 its params would get.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.anthropic import contract as anthropic_contract
from lexpilot_batch.providers.anthropic.ids import ANTHROPIC_ID
from lexpilot_batch.providers.anthropic.spec import NAME as ANTHROPIC
from lexpilot_batch.providers.bodies import model_names as served
from lexpilot_batch.providers.ids import TAG_LENGTH
from lexpilot_batch.providers.lines import line_id, our_id
from lexpilot_batch.simulated import batches, chat
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.native import (
    counts,
    digest,
    lines_sha256,
    record_of,
    records_of,
    result_lines,
    rfc3339,
    run,
    text_of,
    to_chat,
)
from lexpilot_batch.simulated.routes import Handlers, Route, SimulatedApi

NAME = "anthropic"  # its batches' mark in the store (`native`)
PREFIX = "msgbatch_"
MAX_REQUESTS = 100_000
_STOP = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}


def _external(batch_id: str) -> str:
    return PREFIX + batch_id.removeprefix("batch_")


def _internal(message_batch_id: str) -> str:
    return "batch_" + message_batch_id.removeprefix(PREFIX)


def _missing_model(params: Any) -> str | None:
    """Anthropic's 404 `not_found_error` message ("model: NAME") for a model it does not serve
    (`providers.bodies.model_names`), with why; None when it serves it."""
    model = params.get("model") if isinstance(params, dict) else None
    if not isinstance(model, str) or not model:
        return None  # a 400: `_problem`
    why = served.model_problem(ANTHROPIC, model)
    return f"model: {model} ({why})" if why else None


def _problem(params: Any) -> str | None:
    """Why the Messages API would refuse these params, or None."""
    if not isinstance(params, dict):
        return "params: Input should be a valid dictionary"
    if not isinstance(params.get("model"), str) or not params["model"]:
        return "params.model: Field required"
    max_tokens = params.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "params.max_tokens: Field required (an integer >= 1)"
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return "params.messages: at least one message is required"
    temperature = params.get("temperature")
    if temperature is not None and not (isinstance(temperature, (int, float)) and 0 <= temperature <= 1):
        return "params.temperature: Input should be less than or equal to 1"
    thinking = params.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "params.thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if budget >= max_tokens:
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
        if temperature is not None and temperature != 1:
            return "`temperature` may only be set to 1 when thinking is enabled"
    # Then everything else the real API refuses, by the same contract the client keeps
    # (`providers.anthropic.contract`: the installed SDK's types and the model family's rules).
    found = anthropic_contract.problems(params)
    if found:
        return f"params.{found[0].field}: {found[0].reason}"
    return None


class AnthropicApi(Handlers):
    """The Message Batches routes over one simulated provider's store (`root`: for `results_url`)."""

    def create(self, body: Any) -> dict[str, Any]:
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            raise bad_request("requests: at least one request is required")
        if len(requests) > MAX_REQUESTS:
            raise bad_request(f"requests: a batch holds at most {MAX_REQUESTS:,} requests, not {len(requests):,}")
        seen: set[str] = set()
        lines: list[bytes] = []
        problems: dict[str, str] = {}
        not_found: list[str] = []  # requests naming a model Anthropic does not serve: `not_found_error`
        ids: dict[str, str] = {}
        for i, request in enumerate(requests):
            raw = request.get("custom_id") if isinstance(request, dict) else None
            if not isinstance(raw, str) or not ANTHROPIC_ID.fullmatch(raw):
                raise bad_request(f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
            if raw in seen:
                raise bad_request(f"requests.{i}.custom_id: duplicate custom_id {raw!r}; each must be unique")
            seen.add(raw)
            # The workspace's own id, so that the request draws what it draws on every route; an id
            # no workspace's mapping made is refused (a 4xx, never a 500: its answer cannot be drawn).
            mapped = our_id(raw, ANTHROPIC)
            if mapped is None:
                raise bad_request(
                    f"requests.{i}.custom_id: {raw!r} is no id lexpilot-batch's mapping made (a workspace tag and a "
                    "mapped custom_id); the simulated provider answers only those"
                )
            cid = mapped
            ids[cid] = raw
            params = request.get("params")
            missing = _missing_model(params)
            problem = missing or _problem(params)
            if missing is not None:
                not_found.append(cid)
            if problem is not None:
                problems[cid] = problem
                model = str(params.get("model") or "?") if isinstance(params, dict) else "?"
                lines.append(to_chat(cid, model, [], {}))  # refused by the simulated endpoint: an errored line
                continue
            assert isinstance(params, dict)
            lines.append(to_chat(cid, params["model"], *_chat_parts(params)))
        tags = {raw[:TAG_LENGTH] for raw in ids.values()}
        tag = next(iter(tags)) if len(tags) == 1 else None
        native: dict[str, Any] = {"api": NAME, "n": len(requests), "problems": problems}
        if not_found:
            native["not_found"] = not_found
        if tag is not None and all(_mapped(cid, tag) == raw for cid, raw in ids.items()):
            native["tag"] = tag  # every id is the map of the workspace's own: keep the map, not the ids
        else:
            native["ids"] = ids
        record = run(self.store, lines, self.seed, self.faults, native, lines_sha256(requests))
        return self._view(record)

    def message(self, params: Any, client_request_id: str | None = None) -> dict[str, Any]:
        """`POST /v1/messages`: one request answered at once, as the same request in a Message Batch
        is (`chat`): the client's id of the call is its line's custom_id, mapped back to ours."""
        missing = _missing_model(params)
        if missing is not None:
            raise ApiError(404, missing)  # Anthropic's `not_found_error`, as the same request errors in a batch
        problem = _problem(params)
        if problem is not None:
            raise bad_request(problem)  # the message of the same request errored in a batch
        assert isinstance(params, dict)
        cid = (our_id(client_request_id, ANTHROPIC) or client_request_id) if client_request_id else None
        messages, fields = _chat_parts(params)
        body = {"model": params["model"], "messages": messages, **fields}
        answer = chat.answer(body, cid, self.seed, self.faults, self.roll, self.store.prefixes)
        return _message("sync", cid or answer["id"], answer, "standard")

    def _record(self, message_batch_id: str) -> dict[str, Any]:
        record = record_of(self.store, _internal(message_batch_id), NAME)
        if record is None:
            raise ApiError(404, f"No Message Batch found with id '{message_batch_id}'.")
        return record

    def retrieve(self, message_batch_id: str) -> dict[str, Any]:
        return self._view(self._record(message_batch_id))

    def cancel(self, message_batch_id: str) -> dict[str, Any]:
        record = self._record(message_batch_id)
        try:
            batches.cancel(self.store, record)
        except ApiError:
            raise bad_request(f"Message Batch {message_batch_id} has ended and cannot be canceled.") from None
        return self._view(self.store.get_batch(record["batch"]["id"]) or record)

    def list(self, query: dict[str, str]) -> dict[str, Any]:
        views = [self._view(r) for r in records_of(self.store, NAME)]
        try:
            limit = int(query.get("limit") or 20)
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            raise bad_request("limit: Input should be between 1 and 1000")
        ids = [v["id"] for v in views]
        if query.get("after_id"):
            if query["after_id"] not in ids:
                raise bad_request(f"after_id: no Message Batch {query['after_id']!r}")
            views = views[ids.index(query["after_id"]) + 1 :]
        elif query.get("before_id"):
            if query["before_id"] not in ids:
                raise bad_request(f"before_id: no Message Batch {query['before_id']!r}")
            views = views[: ids.index(query["before_id"])][-limit:]
        data = views[:limit]
        return {
            "data": data,
            "has_more": len(views) > limit,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }

    def results(self, message_batch_id: str) -> bytes:
        record = self._record(message_batch_id)
        batch = batches.current(self.store, record)
        if batch["status"] not in batches.TERMINAL:
            raise bad_request(f"Message Batch {message_batch_id} is still processing; its results are not ready.")
        record = self.store.get_batch(record["batch"]["id"]) or record
        native = record["sim"]["native"]
        out = []
        for line in result_lines(self.store, batch):
            cid = line["custom_id"]
            raw = line_id(cid, ANTHROPIC, native["tag"]) if "tag" in native else native["ids"].get(cid, cid)
            out.append(batches.dumps({"custom_id": raw, "result": self._result(batch["id"], line, native)}) + "\n")
        return "".join(out).encode("utf-8")

    def _result(self, batch_id: str, line: dict[str, Any], native: dict[str, Any]) -> dict[str, Any]:
        error, response = line.get("error"), line.get("response") or {}
        if error:
            code = error.get("code") if isinstance(error, dict) else None
            if code == "batch_expired":
                return {"type": "expired"}
            if code == "batch_cancelled":
                return {"type": "canceled"}
            return _errored("api_error", "Internal server error")
        status = response.get("status_code")
        if status == 200:
            return {"type": "succeeded", "message": _message(batch_id, line["custom_id"], response["body"])}
        if isinstance(status, int) and status >= 500:
            return _errored("overloaded_error", "Overloaded")
        message = native["problems"].get(line["custom_id"]) or (response.get("body") or {}).get("error", {}).get(
            "message"
        )
        kind = "not_found_error" if line["custom_id"] in native.get("not_found", ()) else "invalid_request_error"
        return _errored(kind, str(message))

    def _view(self, record: dict[str, Any]) -> dict[str, Any]:
        """The MessageBatch object now."""
        batch = batches.current(self.store, record)
        record = self.store.get_batch(record["batch"]["id"]) or record
        sim, status = record["sim"], batch["status"]
        total = int(sim["native"]["n"])
        ended = status in batches.TERMINAL
        request_counts = {"processing": total, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if status == "failed":  # the input itself was refused: nothing ran
            request_counts.update(processing=0, errored=total)
        elif ended:
            succeeded, errored, never = counts(record, status)
            request_counts.update(processing=0, succeeded=succeeded, errored=errored)
            request_counts["canceled" if status == "cancelled" else "expired"] = never
        end = (
            batch.get("completed_at") or batch.get("expired_at") or batch.get("cancelled_at") or batch.get("failed_at")
        )
        external = _external(batch["id"])
        return {
            "id": external,
            "type": "message_batch",
            "processing_status": "ended" if ended else "canceling" if status == "cancelling" else "in_progress",
            "request_counts": request_counts,
            "created_at": rfc3339(sim["created"]),
            "expires_at": rfc3339(sim["created"] + batches.WINDOW_SECONDS),
            "ended_at": rfc3339(end) if ended and end else None,
            "cancel_initiated_at": rfc3339(sim["cancel"]["at"]) if sim["cancel"] else None,
            "archived_at": None,
            "results_url": f"{self.root}/v1/messages/batches/{external}/results" if ended else None,
        }


def _mapped(cid: str, tag: str) -> str | None:
    try:
        return line_id(cid, ANTHROPIC, tag)
    except ValueError:
        return None


def _errored(kind: str, message: str) -> dict[str, Any]:
    error = {"type": "error", "error": {"type": kind, "message": message}, "request_id": None}
    return {"type": "errored", "error": error}


def _chat_parts(params: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The chat.completions messages and fields of valid Messages params. A message with a
    `cache_control` breakpoint keeps its text blocks, and the params' top-level one is kept: the
    prompt is their texts joined either way (`completions.check_body`), the cache reads the
    breakpoints (`caching`)."""
    messages = [
        {"role": m.get("role"), "content": _blocks(m.get("content")) or text_of(m.get("content"))}
        for m in params["messages"]
    ]
    fields: dict[str, Any] = {"max_tokens": params["max_tokens"]}
    if isinstance(params.get("cache_control"), dict):
        fields["cache_control"] = params["cache_control"]
    if params.get("temperature") is not None:
        fields["temperature"] = params["temperature"]
    return messages, fields


def _blocks(content: Any) -> list[dict[str, Any]] | None:
    """A content's text blocks with their breakpoints, if it has one."""
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("cache_control") for b in content):
        return None
    return [
        {
            "type": "text",
            "text": b.get("text", ""),
            **({"cache_control": b["cache_control"]} if b.get("cache_control") else {}),
        }
        for b in content
        if isinstance(b, dict) and b.get("type") == "text"
    ]


def _message(batch_id: str, custom_id: str, body: dict[str, Any], tier: str = "batch") -> dict[str, Any]:
    """A chat.completion as the Message Anthropic would have answered (in a batch: `batch_id`)."""
    choice = body["choices"][0]
    chat, finish = choice["message"], choice.get("finish_reason")
    content: list[dict[str, Any]] = []
    if chat.get("reasoning_content"):
        content.append({"type": "thinking", "thinking": chat["reasoning_content"], "signature": "simulated"})
    if chat.get("refusal"):
        stop = "refusal"
    else:
        if isinstance(chat.get("content"), str):
            content.append({"type": "text", "text": chat["content"], "citations": None})
        stop = _STOP.get(finish, "end_turn")
    usage = body.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    cached, written = details.get("cached_tokens", 0), details.get("cache_write_tokens", 0)
    thinking = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens", 0)
    return {
        "id": "msg_" + digest("msg", batch_id, custom_id)[:24],
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            # The tokens after the last breakpoint: the cache's reads and writes are counted apart.
            "input_tokens": usage.get("prompt_tokens", 0) - cached - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": cached,
            "output_tokens": usage.get("completion_tokens", 0),
            "output_tokens_details": {"thinking_tokens": thinking},
            "service_tier": tier,
        },
    }


# The error type of each HTTP status in Anthropic's API.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_body(error: ApiError) -> dict[str, Any]:
    """Anthropic's error body: `{"type": "error", "error": {type, message}}`."""
    kind = _ERROR_TYPES.get(error.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}, "request_id": None}


API = SimulatedApi[AnthropicApi](
    NAME,
    ANTHROPIC,
    AnthropicApi,
    (
        Route("POST", r"/v1/messages/batches", "anthropic_create", lambda a, r: a.create(r.json()), creates=True),
        Route("GET", r"/v1/messages/batches", "anthropic_list", lambda a, r: a.list(r.query)),
        Route("GET", r"/v1/messages/batches/([^/]+)", "anthropic_retrieve", lambda a, r: a.retrieve(*r.args)),
        Route("POST", r"/v1/messages/batches/([^/]+)/cancel", "anthropic_cancel", lambda a, r: a.cancel(*r.args)),
        Route("GET", r"/v1/messages/batches/([^/]+)/results", "anthropic_results", lambda a, r: a.results(*r.args)),
        Route("POST", r"/v1/messages", "anthropic_message", lambda a, r: a.message(r.json(), r.call_id), chat=True),
    ),
    prefixes=("/v1/messages",),
    base_path="",  # the server itself (`ANTHROPIC_BASE_URL`)
    error_body=error_body,
    key=("x-api-key", ""),
)
