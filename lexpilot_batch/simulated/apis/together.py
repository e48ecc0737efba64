"""Together AI's Batch API routes of the simulated provider, under `/together/v1` (`native_url`).

Together's routes are OpenAI's paths (`/v1/files`, `/v1/batches`) with other shapes, so they are
served under a prefix of their own: a `together/` model's base URL is `{root}/together/v1`, as the
real one is `https://api.together.ai/v1`. Built from Together's documentation
(https://docs.together.ai/docs/inference/batch/overview, /tutorial, /manage;
https://docs.together.ai/reference/batch-create, /batch-get) and its official SDKs (`together` 3.x:
`lib/resources/files.py` `UploadManager`, `resources/batches.py`, `types/batch_job.py`,
`types/batch_create_response.py`; `togethercomputer/together-python`: `resources/batch.py`):

- **upload**: `POST /files` with the form `purpose` (`batch-api` only here), `file_name`, `file_type`
  and `checksum` (multipart, URL-encoded or query: the Python SDK sends the first, the TypeScript
  SDK the others) answers `302` with a signed `Location` (`/together/upload/{id}/{token}`, its own
  credential: no key is sent there) and `X-Together-File-Id`; `PUT` of the bytes there answers 200;
  `POST /files/{id}/preprocess` answers the `FileResponse`. A file of the same checksum uploaded
  before answers `409` with its `file_id` (the SDK's `FileAlreadyExistsError`);
- **jobs**: `POST /batches` `{"input_file_id", "endpoint", "completion_window", "model_id",
  "priority"}` answers `{"job", "warning"}`; `GET /batches` a plain array; `GET /batches/{id}` and
  `POST /batches/{id}/cancel` the job. A job has no metadata and no request counts: `status`
  (`VALIDATING`, `IN_PROGRESS`, `COMPLETED`, `FAILED`, `EXPIRED`, `CANCELLED`, and together-python's
  `CANCELING`), `progress` (0-100), `input_file_id`, `file_size_bytes`, `model_id`, RFC 3339
  `created_at`, `job_deadline` and `completed_at`, `output_file_id`, `error_file_id`, `error`;
- **lines**: `{"custom_id", "body"}` (a custom_id of at most 64 characters, unique in the file);
  a line of another shape (an OpenAI line's `method` and `url`), a body without messages or
  without a model, or a window other than `24h` ("cannot be changed") is refused at create, as a 400
  naming it. This is stricter than the documentation says the service is (which does not say what
  it does with other fields): a rehearsal that passes here sends only what is documented;
- **results**: the output file holds `{"custom_id", "response": {"status_code": 200, "body"}}`
  lines, a reasoning answer's thinking in the message's `reasoning` field; failed requests go to the
  error file as `{"custom_id", "error": {"message", "code"}}` (the format of Together's
  `skills/together-batch-inference/references/api-reference.md`, "Error Handling"); requests an
  expired or cancelled job never ran are in neither. That a cancelled job's output file keeps what
  it finished is documented (manage, "Cancel a batch"); that an expired one's does is assumed the same.

Everything is run by the OpenAI-shaped machinery (`native`), so a request draws the same answer and
the same faults here as on every other route.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from lexpilot_batch.providers.together.spec import NAME as TOGETHER
from lexpilot_batch.simulated import batches, chat
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.faults import Faults
from lexpilot_batch.simulated.native import (
    cancel_job,
    counts,
    digest,
    job_id,
    job_record,
    records_of,
    result_lines,
    rfc3339,
    run,
    to_chat,
)
from lexpilot_batch.simulated.routes import Handlers, Reply, Route, SimulatedApi, parse_multipart
from lexpilot_batch.simulated.store import Store

NAME = "together"  # its batches' mark in the store (`native`)
PREFIX = "/together"  # the routes' path prefix on the simulated server
PURPOSE = "batch-api"
PENDING = "batch-api-pending"  # a file whose bytes the signed URL has not received yet
OUTPUT_PURPOSE = "batch-generated"  # the purpose Together's OpenAPI spec gives generated files
ENDPOINT = "/v1/chat/completions"
WINDOW = "24h"
MAX_ID = 64
MAX_FILE_BYTES = 100 * 1024 * 1024  # "Up to 100 MB per input file"
MAX_REQUESTS = 50_000  # "Up to 50,000 requests per batch"
_STATUSES = {
    "validating": "VALIDATING",
    "in_progress": "IN_PROGRESS",
    "finalizing": "IN_PROGRESS",
    "cancelling": "CANCELING",
    "completed": "COMPLETED",
    "failed": "FAILED",
    "expired": "EXPIRED",
    "cancelled": "CANCELLED",
}


def redirect(location: str, file_id: str) -> Reply:
    """The upload's `302`: where to send the file's bytes, and the new file's id."""
    return Reply(None, {"Location": location, "X-Together-File-Id": file_id}, 302)


class TogetherApi(Handlers):
    """The files and batch job routes of Together over one simulated provider's store (`root`: for
    the signed upload URLs)."""

    def __init__(self, store: Store, faults: Faults, seed: int, roll: Callable[..., float]) -> None:
        super().__init__(store, faults, seed, roll)
        self._lock = threading.Lock()  # a job's files are written once; a checksum names one file

    # --- files -------------------------------------------------------------------------------

    def upload_start(self, headers: Any, body: bytes, query: dict[str, str]) -> Reply:
        form = dict(query)
        content_type = headers.get("Content-Type", "")
        if content_type.lower().startswith("multipart/form-data"):
            form.update(parse_multipart(content_type, body)[0])
        elif body:
            form.update({k: v[-1] for k, v in parse_qs(body.decode("utf-8", errors="replace")).items()})
        purpose, name = form.get("purpose"), form.get("file_name")
        if purpose != PURPOSE:
            raise bad_request(f"purpose: the simulated provider accepts only '{PURPOSE}', not {purpose!r}.", "purpose")
        if not name or not name.endswith(".jsonl") or form.get("file_type", "jsonl") != "jsonl":
            raise bad_request("file_name: a .jsonl file (file_type jsonl) is required for the Batch API.", "file_name")
        checksum = form.get("checksum") or ""
        with self._lock:
            same = self._by_checksum(checksum) if checksum else None
            if same is not None:  # the SDK reads the answer's `file_id` (`FileAlreadyExistsError`)
                return Reply(
                    {"message": f"File {same} with this checksum already exists.", "file_id": same}, status=409
                )
            file_id = "file-" + uuid.uuid4().hex
            self.store.add_file(b"", name, PENDING, file_id)
        token = digest("together-upload", file_id, self.seed)[:32]
        return redirect(f"{self.root}{PREFIX}/upload/{file_id}/{token}", file_id)

    def _by_checksum(self, checksum: str) -> str | None:
        for f in self.store.list_files():
            if f["purpose"] == PURPOSE and hashlib.sha256(self.store.file_bytes(f["id"])).hexdigest() == checksum:
                return str(f["id"])
        return None

    def upload_put(self, headers: Any, body: bytes, file_id: str, token: str) -> dict[str, Any]:
        pending = self.store.get_file(file_id)
        if (
            pending is None
            or pending["purpose"] != PENDING
            or token != digest("together-upload", file_id, self.seed)[:32]
        ):
            raise ApiError(403, "The signed upload URL is not valid.", code="AccessDenied")
        if len(body) > MAX_FILE_BYTES:
            raise ApiError(400, f"The file is larger than {MAX_FILE_BYTES} bytes.", code="EntityTooLarge")
        self.store.add_file(body, pending["filename"], PURPOSE, file_id)
        return {}

    def preprocess(self, file_id: str) -> dict[str, Any]:
        return self.get_file(file_id)

    def get_file(self, file_id: str) -> dict[str, Any]:
        file = self.store.get_file(file_id)
        if file is None or file["purpose"] not in (PURPOSE, OUTPUT_PURPOSE):
            raise ApiError(404, f"File {file_id} not found.", param="id")
        return {
            "id": file["id"],
            "object": "file",
            "created_at": file["created_at"],
            "filename": file["filename"],
            "bytes": file["bytes"],
            "purpose": file["purpose"],
            "Processed": True,
            "FileType": "jsonl",
            "LineCount": 0,
        }

    def file_content(self, file_id: str) -> bytes:
        self.get_file(file_id)
        return self.store.file_bytes(file_id)

    # --- chat completions ----------------------------------------------------------------------

    def chat_completion(self, body: Any, client_request_id: str | None = None) -> dict[str, Any]:
        """One chat completion, answered as a batch line with the custom_id `client_request_id` is (`chat`)."""
        return chat.answer(body, client_request_id, self.seed, self.faults, self.roll, self.store.prefixes)

    # --- jobs --------------------------------------------------------------------------------

    def create(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("The request body must be a JSON object.")
        file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        if not isinstance(file_id, str) or not file_id:
            raise bad_request("input_file_id: the id of an uploaded batch-api file is required.", "input_file_id")
        if endpoint != ENDPOINT:
            raise bad_request(f"endpoint: the simulated provider runs {ENDPOINT} only, not {endpoint!r}.", "endpoint")
        if body.get("completion_window", WINDOW) != WINDOW:
            raise bad_request(f"completion_window: it is {WINDOW} and cannot be changed.", "completion_window")
        unknown = set(body) - {"input_file_id", "endpoint", "completion_window", "model_id", "priority"}
        if unknown:
            raise bad_request(f"unexpected field(s) {', '.join(sorted(unknown))} in the batch create request.")
        file = self.store.get_file(file_id)
        if file is None or file["purpose"] != PURPOSE:
            raise ApiError(404, f"File {file_id} not found.", param="input_file_id")
        data = self.store.file_bytes(file_id)
        lines, model = self._lines(file_id, data, body.get("model_id"))
        native = {"api": NAME, "n": len(lines), "model": model, "input_file_id": file_id, "bytes": len(data)}
        record = run(self.store, lines, self.seed, self.faults, native, hashlib.sha256(data).hexdigest())
        return {"job": self._job(record), "warning": None}

    def _lines(self, file_id: str, data: bytes, model_id: Any) -> tuple[list[bytes], str]:
        out: list[bytes] = []
        seen: set[str] = set()
        model = model_id if isinstance(model_id, str) and model_id else ""
        for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = None
            where = f"{file_id} line {number}"
            cid = obj.get("custom_id") if isinstance(obj, dict) else None
            if not isinstance(cid, str) or not cid or len(cid) > MAX_ID:
                raise bad_request(f"{where}: each line needs a string 'custom_id' of at most {MAX_ID} characters.")
            if cid in seen:
                raise bad_request(f"{where}: custom_id {cid!r} is not unique in the file.")
            seen.add(cid)
            assert isinstance(obj, dict)
            if set(obj) - {"custom_id", "body"}:
                extra = ", ".join(sorted(set(obj) - {"custom_id", "body"}))
                raise bad_request(f"{where}: unexpected field(s) {extra}; a line is {{custom_id, body}}.")
            request = obj.get("body")
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise bad_request(f"{where}: 'body' must be a chat completion request with messages.")
            line_model = request.get("model") or model
            if not isinstance(line_model, str) or not line_model:
                raise bad_request(f"{where}: the body names no model (nor does the job's model_id).")
            model = model or line_model
            fields = {k: v for k, v in request.items() if k not in ("model", "messages")}
            out.append(to_chat(cid, line_model, request["messages"], fields))
        if not out:
            raise bad_request(f"{file_id} holds no requests.", "input_file_id")
        if len(out) > MAX_REQUESTS:
            raise bad_request(f"{file_id} holds {len(out)} requests; a batch takes at most {MAX_REQUESTS}.")
        return out, model

    def _record(self, job: str) -> dict[str, Any]:
        return job_record(self.store, NAME, job, "id")

    def get(self, job: str) -> dict[str, Any]:
        return self._job(self._record(job))

    def cancel(self, job: str) -> dict[str, Any]:
        cancel_job(self.store, self._record(job), job)
        return self._job(self._record(job))

    def list(self, query: dict[str, str]) -> list[dict[str, Any]]:
        return [self._job(r) for r in records_of(self.store, NAME)]

    def _job(self, record: dict[str, Any]) -> dict[str, Any]:
        """The job as a `BatchJob` now; its files are written the first time it ended."""
        batch = batches.current(self.store, record)
        record = self.store.get_batch(record["batch"]["id"]) or record
        sim, status, native = record["sim"], batch["status"], record["sim"]["native"]
        total = int(native["n"])
        running = batch.get("request_counts") or {}
        done = int(running.get("completed") or 0) + int(running.get("failed") or 0)
        job: dict[str, Any] = {
            "id": job_id(batch["id"]),
            "user_id": "user_simulated",
            "input_file_id": native["input_file_id"],
            "file_size_bytes": int(native["bytes"]),
            "status": _STATUSES[status],
            "job_deadline": rfc3339(sim["created"] + 24 * 3600),
            "created_at": rfc3339(sim["created"]),
            "endpoint": ENDPOINT,
            "progress": round(100.0 * done / total, 1) if total else 0.0,
            "model_id": native["model"],
            "output_file_id": None,
            "error_file_id": None,
            "error": None,
            "completed_at": None,
        }
        if status == "failed":
            job["error"] = "The batch input could not be read."
        elif status in batches.TERMINAL:
            ran = sum(counts(record, status)[:2])
            job["progress"] = round(100.0 * ran / total, 1) if total else 0.0
            job["output_file_id"], job["error_file_id"] = self._files(batch)
            end = batch.get("completed_at") or batch.get("expired_at") or batch.get("cancelled_at")
            job["completed_at"] = rfc3339(end or sim["created"])
        return job

    def _files(self, batch: dict[str, Any]) -> tuple[str | None, str | None]:
        """The ended job's output and error files (written once; their ids follow from the batch's)."""
        ids = (
            "file-o" + digest("together-output", batch["id"])[:24],
            "file-e" + digest("together-errors", batch["id"])[:24],
        )
        with self._lock:
            if self.store.get_file(ids[0]) is None:
                kept: tuple[list[str], list[str]] = ([], [])
                for line in result_lines(self.store, batch):
                    converted = _line(line)
                    if converted is not None:
                        kept[0 if "response" in converted else 1].append(batches.dumps(converted) + "\n")
                # The output file last: it marks both written.
                for file_id, out, name in reversed(list(zip(ids, kept, ("output", "error"), strict=True))):
                    self.store.add_file(
                        "".join(out).encode("utf-8"), f"{batch['id']}-{name}.jsonl", OUTPUT_PURPOSE, file_id
                    )
        return ids[0], (ids[1] if self.store.file_bytes(ids[1]) else None)


def _line(line: dict[str, Any]) -> dict[str, Any] | None:
    """An OpenAI result line as Together's: None for a request that never ran."""
    error = line.get("error")
    if isinstance(error, dict) and error.get("code") in ("batch_expired", "batch_cancelled"):
        return None
    response = line.get("response")
    cid = line.get("custom_id")
    if isinstance(response, dict) and response.get("status_code") == 200:
        body = dict(response["body"])
        body["choices"] = [_reasoned(c) for c in body.get("choices") or []]
        return {"custom_id": cid, "response": {"status_code": 200, "body": body}}
    detail = error if isinstance(error, dict) else None
    if detail is None and isinstance(response, dict) and isinstance(response.get("body"), dict):
        detail = response["body"].get("error")
    detail = detail if isinstance(detail, dict) else {}
    return {"custom_id": cid, "error": {"message": str(detail.get("message") or "failed"), "code": detail.get("code")}}


def _reasoned(choice: dict[str, Any]) -> dict[str, Any]:
    """A reasoning answer's message as Together's: its thinking in `reasoning`."""
    message = dict(choice.get("message") or {})
    thinking = message.pop("reasoning_content", None)
    if not thinking:
        return choice
    return {**choice, "message": {**message, "reasoning": thinking}}


API = SimulatedApi[TogetherApi](
    NAME,
    TOGETHER,
    TogetherApi,
    (
        Route(
            "POST",
            r"/together/v1/files",
            "together_upload_start",
            lambda a, r: a.upload_start(r.headers, r.body, r.query),
        ),
        # The signed URL is its own credential: no key is sent there.
        Route(
            "PUT",
            r"/together/upload/([^/]+)/([^/]+)",
            "together_upload_put",
            lambda a, r: a.upload_put(r.headers, r.body, *r.args),
            keyless=True,
        ),
        Route(
            "POST", r"/together/v1/files/([^/]+)/preprocess", "together_preprocess", lambda a, r: a.preprocess(*r.args)
        ),
        Route("GET", r"/together/v1/files/([^/]+)", "together_get_file", lambda a, r: a.get_file(*r.args)),
        Route(
            "GET", r"/together/v1/files/([^/]+)/content", "together_file_content", lambda a, r: a.file_content(*r.args)
        ),
        Route("POST", r"/together/v1/batches", "together_create", lambda a, r: a.create(r.json()), creates=True),
        Route("GET", r"/together/v1/batches", "together_list", lambda a, r: a.list(r.query)),
        Route("GET", r"/together/v1/batches/([^/]+)", "together_get", lambda a, r: a.get(*r.args)),
        Route("POST", r"/together/v1/batches/([^/]+)/cancel", "together_cancel", lambda a, r: a.cancel(*r.args)),
        Route(
            "POST",
            r"/together/v1/chat/completions",
            "chat_completion",
            lambda a, r: a.chat_completion(r.json(), r.call_id),
            chat=True,
            on_flex=chat.on_flex,
        ),
    ),
    prefixes=("/together/",),
    base_path=PREFIX + "/v1",  # `TOGETHER_BASE_URL`: OpenAI's paths, under /together
)
