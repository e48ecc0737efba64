"""Gemini's Batch Mode routes of the simulated provider (`/v1beta/...` and `/upload/v1beta/files`).

Files arrive through the File API's resumable upload (a start call answered with an upload URL,
then the bytes in chunks, the last one `upload, finalize`) and a batch is created for one with
`models/{model}:batchGenerateContent`, its `displayName` kept; or its requests come inline
(`inputConfig.requests.requests`: `{request, metadata}` each, as google-genai's `src=[...]` sends
them), and its answers go back inline too (`output.inlinedResponses.inlinedResponses`, in the
requests' order, each with its request's metadata). A batch reads as an Operation whose
metadata carries the state (`BATCH_STATE_PENDING`, `RUNNING`, `SUCCEEDED`, `FAILED`, `CANCELLED`,
`EXPIRED`), `batchStats` and, once it ended, `output.responsesFile`: a JSONL file, downloaded with
`files/{name}:download?alt=media`, holding a line per request that ran: `{"key", "response":
GenerateContentResponse}` (a `thought` part before the text when the simulated model thought) or
`{"key", "error": {code, message, status}}`. A cancelled or expired batch's file holds what ran. A
model the Gemini API does not serve (`sources.names`: Gemini, Gemma and LearnLM models, none a slip
of a listed one) is in the call's path: the create (and a generateContent) is refused 404
`NOT_FOUND`, no batch made. A request is checked by google-genai's own types (`sources.requests`):
its fields those the SDK writes into a GenerateContentRequest, each content a `types.Content` whose
role is "user" or "model" (a `system` role there is refused: the system prompt is
`systemInstruction`), `generationConfig` a `types.GenerationConfig`. Everything is run by the
OpenAI-shaped machinery (`native`).

`models/{model}:generateContent` answers one request at once with the GenerateContentResponse the
same request gets in a batch (`chat`), or the 400 it would get.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

from lexpilot_batch.providers.google.spec import NAME as GOOGLE
from lexpilot_batch.simulated import batches, chat
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.faults import Faults
from lexpilot_batch.simulated.native import (
    counts,
    digest,
    record_of,
    records_of,
    result_lines,
    rfc3339,
    run,
    text_of,
    to_chat,
)
from lexpilot_batch.simulated.routes import Handlers, Reply, Route, SimulatedApi
from lexpilot_batch.simulated.sources import names, requests, typed
from lexpilot_batch.simulated.store import Store

NAME = "gemini"  # its batches' mark in the store (`native`)
VERSION = "v1beta"
_STATES = {
    "validating": "BATCH_STATE_PENDING",
    "in_progress": "BATCH_STATE_RUNNING",
    "finalizing": "BATCH_STATE_RUNNING",
    "cancelling": "BATCH_STATE_RUNNING",
    "completed": "BATCH_STATE_SUCCEEDED",
    "failed": "BATCH_STATE_FAILED",
    "cancelled": "BATCH_STATE_CANCELLED",
    "expired": "BATCH_STATE_EXPIRED",
}
_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY"}
NO_CONTENTS = "* GenerateContentRequest.contents: contents is not specified"


def _file_object(file: dict[str, Any], root: str) -> dict[str, Any]:
    name = "files/" + file["id"]
    created = rfc3339(file["created_at"])
    return {
        "name": name,
        "displayName": file["filename"],
        "mimeType": "application/jsonl",
        "sizeBytes": str(file["bytes"]),
        "createTime": created,
        "updateTime": created,
        "expirationTime": rfc3339(file["created_at"] + 48 * 3600),
        "uri": f"{root}/{VERSION}/{name}",
        "downloadUri": f"{root}/{VERSION}/{name}:download?alt=media",
        "state": "ACTIVE",
        "source": "GENERATED" if file["purpose"] == "gemini_output" else "UPLOADED",
    }


class GeminiApi(Handlers):
    """The Batch Mode and File API routes over one simulated provider's store (`root`: for upload
    URLs and file URIs)."""

    def __init__(self, store: Store, faults: Faults, seed: int, roll: Callable[..., float]) -> None:
        super().__init__(store, faults, seed, roll)
        self._uploads: dict[str, dict[str, Any]] = {}  # resumable upload sessions (in memory)
        self._lock = threading.Lock()

    # --- files ---------------------------------------------------------------------------------

    def upload_start(self, headers: Any, body: bytes) -> Reply:
        if (headers.get("X-Goog-Upload-Protocol") or "").lower() != "resumable":
            raise bad_request("Only resumable uploads are supported: send X-Goog-Upload-Protocol: resumable.")
        size = headers.get("X-Goog-Upload-Header-Content-Length")
        if size is None or not size.isdigit():
            raise bad_request("X-Goog-Upload-Header-Content-Length is required.")
        name = headers.get("X-Goog-Upload-File-Name") or "upload.jsonl"
        session = uuid.uuid4().hex
        with self._lock:
            self._uploads[session] = {"size": int(size), "name": name, "data": bytearray()}
        url = f"{self.root}/upload/{VERSION}/files/sessions/{session}"
        return Reply({}, {"x-goog-upload-url": url, "x-goog-upload-status": "active"})

    def upload_chunk(self, headers: Any, body: bytes, session: str) -> Reply:
        with self._lock:
            upload = self._uploads.get(session)
            if upload is None:
                raise ApiError(404, f"No upload session {session} (it ended, or the provider restarted).")
            command = (headers.get("X-Goog-Upload-Command") or "").replace(" ", "").split(",")
            offset = int(headers.get("X-Goog-Upload-Offset") or 0)
            if offset != len(upload["data"]):
                raise bad_request(f"Upload offset {offset} does not follow the {len(upload['data'])} bytes received.")
            upload["data"] += body
            if "finalize" not in command:
                return Reply({}, {"x-goog-upload-status": "active"})
            del self._uploads[session]
        if len(upload["data"]) != upload["size"]:
            raise bad_request(f"Received {len(upload['data'])} bytes; the upload announced {upload['size']}.")
        file_id = "g" + uuid.uuid4().hex[:24]
        stored = self.store.add_file(bytes(upload["data"]), upload["name"], "gemini", file_id=file_id)
        return Reply({"file": _file_object(stored, self.root)}, {"x-goog-upload-status": "final"})

    def _file(self, name: str) -> dict[str, Any]:
        file = self.store.get_file(name)
        if file is None or file["purpose"] not in ("gemini", "gemini_output"):
            raise ApiError(404, f"File files/{name} does not exist.")
        return file

    def get_file(self, name: str) -> dict[str, Any]:
        return _file_object(self._file(name), self.root)

    def download(self, name: str) -> bytes:
        self._file(name)
        return self.store.file_bytes(name)

    # --- batches -------------------------------------------------------------------------------

    def create(self, model: str, body: Any) -> dict[str, Any]:
        batch = body.get("batch") if isinstance(body, dict) else None
        if not isinstance(batch, dict):
            raise bad_request("batch is required.")
        config = batch.get("inputConfig") or {}
        source = config.get("fileName")
        inline = (config.get("requests") or {}).get("requests") if isinstance(config.get("requests"), dict) else None
        if inline is None and (not isinstance(source, str) or not source.startswith("files/")):
            raise bad_request("batch.inputConfig: a fileName (files/...) or inline requests.requests is required.")
        sent = model.removeprefix("models/")
        _check_model(sent, "batchGenerateContent")
        problems: dict[str, str] = {}
        native: dict[str, Any] = {"api": NAME, "model": sent, "display_name": str(batch.get("displayName") or "")}
        if inline is not None:
            if not isinstance(inline, list) or not inline:
                raise bad_request("batch.inputConfig.requests.requests: at least one request is required.")
            items = [(i, r) for i, r in enumerate(inline)]
            keyed = [(str(i), r.get("request") if isinstance(r, dict) else None) for i, r in items]
            native["inline"] = [r.get("metadata") if isinstance(r, dict) else None for _, r in items]
            data = json.dumps(inline, ensure_ascii=False, sort_keys=True).encode("utf-8")
            where = "batch.inputConfig.requests.requests"
        else:
            assert isinstance(source, str)
            data = self.download(source.removeprefix("files/"))
            keyed = self._keyed(source, data)
            where = source
        lines: list[bytes] = []
        for key, request in keyed:
            parts = _chat_parts(request)
            problem = NO_CONTENTS if parts is None else _problem(request, sent)
            if parts is None or problem is not None:
                problems[key] = problem or NO_CONTENTS
                lines.append(to_chat(key, sent, [], {}))  # refused by the simulated endpoint: an error line
                continue
            lines.append(to_chat(key, sent, *parts))
        if not lines:
            raise bad_request(f"{where} holds no requests.")
        native.update(n=len(lines), problems=problems)
        record = run(self.store, lines, self.seed, self.faults, native, hashlib.sha256(data).hexdigest())
        return self._operation(record)

    @staticmethod
    def _keyed(source: str, data: bytes) -> list[tuple[str, Any]]:
        """The (key, request) of each line of an input file."""
        out = []
        for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = None
            key = obj.get("key") if isinstance(obj, dict) else None
            if not isinstance(key, str) or not key:
                raise bad_request(f"{source} line {number}: each line needs a string 'key'.")
            out.append((key, obj.get("request")))
        return out

    def generate(self, model: str, request: Any, client_request_id: str | None = None) -> dict[str, Any]:
        """`POST models/{model}:generateContent`: one request answered at once, as the same request
        in a batch is (`chat`): the client's id of the call is its line's key."""
        parts = _chat_parts(request)
        if parts is None:
            raise bad_request(NO_CONTENTS)
        sent = model.removeprefix("models/")
        _check_model(sent, "generateContent")
        problem = _problem(request, sent)
        if problem is not None:
            raise bad_request(problem)  # as the same request errors in a batch
        messages, fields = parts
        # Gemini's Flex inference field (`_problem` took its value), spoken as chat's (`chat`);
        # its other tiers answer as the standard one.
        if str(request.get("serviceTier", "")).lower() == "flex":
            fields["service_tier"] = "flex"
        answer = chat.answer(
            {"model": sent, "messages": messages, **fields},
            client_request_id,
            self.seed,
            self.faults,
            self.roll,
            self.store.prefixes,
        )
        return _response("sync", client_request_id or answer["id"], answer)

    def _record(self, name: str) -> dict[str, Any]:
        record = record_of(self.store, "batch_" + name, NAME)
        if record is None:
            raise ApiError(404, f"Batch batches/{name} does not exist.")
        return record

    def get(self, name: str) -> dict[str, Any]:
        return self._operation(self._record(name))

    def cancel(self, name: str) -> dict[str, Any]:
        record = self._record(name)
        try:
            batches.cancel(self.store, record)
        except ApiError:
            raise ApiError(400, f"Batch batches/{name} has ended and cannot be cancelled.") from None
        return {}

    def models(self) -> dict[str, Any]:
        """`GET /v1beta/models`: the Gemini models it serves by name (`sources.names`), and `gemini-sim`."""
        listed = sorted(names.gemini() | {m for m in names.SIMULATED if names.GOOGLE.fullmatch(m)})
        methods = ["generateContent", "batchGenerateContent"]
        return {
            "models": [{"name": f"models/{m}", "displayName": m, "supportedGenerationMethods": methods} for m in listed]
        }

    def list(self, query: dict[str, str]) -> dict[str, Any]:
        operations = [self._operation(r) for r in records_of(self.store, NAME)]
        try:
            size = int(query.get("pageSize") or 50)
            start = int(query.get("pageToken") or 0)
        except ValueError:
            raise bad_request("pageSize and pageToken must be integers.") from None
        page = operations[start : start + max(1, min(size, 1000))]
        out: dict[str, Any] = {"operations": page}
        if start + len(page) < len(operations):
            out["nextPageToken"] = str(start + len(page))
        return out

    def _operation(self, record: dict[str, Any]) -> dict[str, Any]:
        """The batch as an Operation now; its responses file is written the first time it ended."""
        batch = batches.current(self.store, record)
        record = self.store.get_batch(record["batch"]["id"]) or record
        sim, status = record["sim"], batch["status"]
        native = sim["native"]
        name = "batches/" + batch["id"].removeprefix("batch_")
        total = int(native["n"])
        ended = status in batches.TERMINAL
        stats = {"requestCount": str(total), "pendingRequestCount": str(total)}
        end = (
            batch.get("completed_at") or batch.get("expired_at") or batch.get("cancelled_at") or batch.get("failed_at")
        )
        metadata: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
            "model": "models/" + native["model"],
            "displayName": native["display_name"],
            "createTime": rfc3339(sim["created"]),
            "updateTime": rfc3339(end or sim["created"]),
            "state": _STATES[status],
            "batchStats": stats,
        }
        if ended and status != "failed":
            succeeded, errored, _never = counts(record, status)
            stats.update(
                successfulRequestCount=str(succeeded), failedRequestCount=str(errored), pendingRequestCount="0"
            )
            metadata["endTime"] = rfc3339(end or sim["created"])
            if "inline" in native:
                metadata["output"] = {"inlinedResponses": {"inlinedResponses": self._inlined(batch, native)}}
            else:
                metadata["output"] = {"responsesFile": "files/" + self._responses(batch, native)}
        operation: dict[str, Any] = {"name": name, "metadata": metadata, "done": ended}
        if status == "failed":
            operation["error"] = {
                "code": 3,
                "message": "The batch input could not be read.",
                "status": "INVALID_ARGUMENT",
            }
        elif ended:
            operation["response"] = {**metadata, "@type": metadata["@type"]}
        return operation

    def _inlined(self, batch: dict[str, Any], native: dict[str, Any]) -> Any:
        """An ended inline batch's answers, in its requests' order, each with its metadata; a
        request that never ran (expired, cancelled) has none."""
        by_key = {line["custom_id"]: self._line(batch["id"], line, native) for line in result_lines(self.store, batch)}
        out = []
        for i, metadata in enumerate(native["inline"]):
            answer = by_key.get(str(i))
            if answer is None:
                continue
            item = {k: v for k, v in answer.items() if k != "key"}
            if metadata is not None:
                item["metadata"] = metadata
            out.append(item)
        return out

    def _responses(self, batch: dict[str, Any], native: dict[str, Any]) -> str:
        """The ended batch's responses file (written once; its id follows from the batch's)."""
        file_id = "r" + digest("responses", batch["id"])[:24]
        if self.store.get_file(file_id) is None:
            out = []
            for line in result_lines(self.store, batch):
                converted = self._line(batch["id"], line, native)
                if converted is not None:
                    out.append(batches.dumps(converted) + "\n")
            self.store.add_file(
                "".join(out).encode("utf-8"), f"{batch['id']}-responses.jsonl", "gemini_output", file_id
            )
        return file_id

    def _line(self, batch_id: str, line: dict[str, Any], native: dict[str, Any]) -> dict[str, Any] | None:
        key, error, response = line["custom_id"], line.get("error"), line.get("response") or {}
        if error:
            code = error.get("code") if isinstance(error, dict) else None
            if code in ("batch_expired", "batch_cancelled"):
                return None  # never ran: not in the responses file
            return {"key": key, "error": {"code": 13, "message": "Internal error encountered.", "status": "INTERNAL"}}
        status = response.get("status_code")
        if status == 200:
            return {"key": key, "response": _response(batch_id, key, response["body"])}
        if isinstance(status, int) and status >= 500:
            return {"key": key, "error": {"code": 14, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
        message = native["problems"].get(key) or (response.get("body") or {}).get("error", {}).get("message")
        return {"key": key, "error": {"code": 3, "message": str(message), "status": "INVALID_ARGUMENT"}}


def _check_model(model: str, method: str) -> None:
    """Gemini's 404 `NOT_FOUND` for a model it does not serve (`sources.names`), with why: the
    model is in the call's path, so a batch for it is refused at create, never run."""
    why = names.joined(model, names.gemini())
    if why is None and not names.GOOGLE.fullmatch(model):
        why = "the Gemini API serves Gemini, Gemma and LearnLM models"
    elif why is None and not names.is_sim(model) and model not in names.gemini():
        near = names.near_miss(model, names.gemini())
        why = f"did you mean {near}?" if near else None
    if why is not None:
        raise ApiError(
            404,
            f"models/{model} is not found for API version {VERSION}, or is not supported for {method} ({why}). "
            "Call ListModels to see the list of available models and their supported methods.",
        )


def _problem(request: Any, model: str) -> str | None:
    """What Gemini refuses in a request (module docstring), as its INVALID_ARGUMENT message words
    it; None when it takes it."""
    if not isinstance(request, dict):
        return "Invalid JSON payload received: the request must be an object."
    for key in request:
        if key not in requests.GEMINI_REQUEST_FIELDS and key != "model":
            return f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.'
    content, config = requests.gemini_content(), requests.gemini_generation_config()
    contents = request.get("contents")
    items = list(enumerate(contents)) if isinstance(contents, list) else []
    for i, item in items:
        if isinstance(item, dict) and item.get("role") not in (None, *requests.GEMINI_ROLES):
            return f"Please use a valid role: {', '.join(requests.GEMINI_ROLES)}. (contents[{i}].role: {item.get('role')!r})"
    checks = [(f"contents[{i}]", item, content) for i, item in items]
    if "systemInstruction" in request:
        checks.append(("systemInstruction", request["systemInstruction"], content))
    if "generationConfig" in request:
        checks.append(("generationConfig", request["generationConfig"], config))
    for where, value, model_type in checks:
        if model_type is None:
            continue
        found = typed.problems(value, model_type, where)
        if found:
            return f"Invalid value at '{found[0][0]}': {found[0][1]}"
    temperature = (request.get("generationConfig") or {}).get("temperature")
    if isinstance(temperature, (int, float)) and not 0 <= temperature <= 2:
        return "Invalid value at 'generationConfig.temperature': must be within [0.0, 2.0]"
    return None


def _chat_parts(request: Any) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The chat.completions messages and fields of a GenerateContentRequest; None without contents."""
    contents = request.get("contents") if isinstance(request, dict) else None
    if not isinstance(contents, list) or not contents:
        return None
    assert isinstance(request, dict)
    messages = [
        {"role": "assistant" if c.get("role") == "model" else "user", "content": text_of(c.get("parts"))}
        for c in contents
        if isinstance(c, dict)
    ]
    config = request.get("generationConfig") or {}
    fields: dict[str, Any] = {}
    if isinstance(config.get("maxOutputTokens"), int):
        fields["max_tokens"] = config["maxOutputTokens"]
    if config.get("temperature") is not None:
        fields["temperature"] = config["temperature"]
    return messages, fields


def _response(batch_id: str, key: str, body: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion as the GenerateContentResponse Gemini would have answered."""
    choice = body["choices"][0]
    chat, finish = choice["message"], choice.get("finish_reason")
    parts: list[dict[str, Any]] = []
    if chat.get("reasoning_content"):
        parts.append({"text": chat["reasoning_content"], "thought": True})
    if chat.get("refusal"):
        reason = "SAFETY"
    else:
        if isinstance(chat.get("content"), str):
            parts.append({"text": chat["content"]})
        reason = _FINISH.get(finish, "STOP")
    usage = body.get("usage") or {}
    thoughts = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens", 0)
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    meta = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion - thoughts,
        "totalTokenCount": prompt + completion,
        "cachedContentTokenCount": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
    }
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    if body.get("service_tier") == "flex":  # `UsageMetadata.service_tier`: "Service tier of the request"
        meta["serviceTier"] = "flex"
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": reason, "index": 0}],
        "usageMetadata": meta,
        "modelVersion": body.get("model"),
        "responseId": digest("response", batch_id, key)[:24],
    }


# The gRPC status name of each HTTP status in Google's API.
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def error_body(error: ApiError) -> dict[str, Any]:
    """Google's error body: `{"error": {code, message, status}}`."""
    return {"error": {"code": error.status, "message": error.message, "status": _STATUS.get(error.status, "INTERNAL")}}


def _on_flex(answer: Any) -> bool:
    """Whether a GenerateContentResponse ran on the flex tier (`usageMetadata.serviceTier`)."""
    meta = answer.get("usageMetadata") if isinstance(answer, dict) else None
    return isinstance(meta, dict) and meta.get("serviceTier") == chat.FLEX


API = SimulatedApi[GeminiApi](
    NAME,
    GOOGLE,
    GeminiApi,
    (
        Route("POST", r"/upload/v1beta/files", "gemini_upload_start", lambda a, r: a.upload_start(r.headers, r.body)),
        # An upload session's URL is its own credential, as Google's is: the SDK sends no key there.
        Route(
            "POST",
            r"/upload/v1beta/files/sessions/([^/]+)",
            "gemini_upload_chunk",
            lambda a, r: a.upload_chunk(r.headers, r.body, *r.args),
            keyless=True,
        ),
        Route("GET", r"/v1beta/files/([a-z0-9]+)", "gemini_get_file", lambda a, r: a.get_file(*r.args)),
        Route("GET", r"/v1beta/files/([a-z0-9]+):download", "gemini_download", lambda a, r: a.download(*r.args)),
        Route(
            "POST",
            r"/v1beta/models/([^/:]+):batchGenerateContent",
            "gemini_create",
            lambda a, r: a.create(r.args[0], r.json()),
            creates=True,
        ),
        Route("GET", r"/v1beta/batches", "gemini_list", lambda a, r: a.list(r.query)),
        Route("GET", r"/v1beta/models", "gemini_models", lambda a, r: a.models()),
        Route("GET", r"/v1beta/batches/([^/:]+)", "gemini_get", lambda a, r: a.get(*r.args)),
        Route("POST", r"/v1beta/batches/([^/:]+):cancel", "gemini_cancel", lambda a, r: a.cancel(*r.args)),
        Route(
            "POST",
            r"/v1beta/models/([^/:]+):generateContent",
            "gemini_generate",
            lambda a, r: a.generate(r.args[0], r.json(), r.call_id),
            chat=True,
            on_flex=_on_flex,
        ),
    ),
    prefixes=("/v1beta", "/upload/"),
    base_path="",  # the server itself (`GOOGLE_GEMINI_BASE_URL`)
    error_body=error_body,
    overloaded=503,  # Google's UNAVAILABLE, where Anthropic's is 529
    key=("x-goog-api-key", ""),
)
