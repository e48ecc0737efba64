"""Mistral's Batch API routes of the simulated provider (`/v1/batch/jobs`, over OpenAI's `/v1/files`).

Built from Mistral's documentation (https://docs.mistral.ai/capabilities/batch) and the `mistralai`
SDK's types (`BatchJob`, `ListBatchJobsResponse`, `CreateBatchJobRequest`): request files are
uploaded through the OpenAI files route (`purpose=batch`, the same form), a job is created with
`{"input_files", "model", "endpoint", "metadata", "timeout_hours"}`, or with its requests inline
(`"requests"`: `{custom_id, body}` each, "for batches of fewer than 10,000 requests", the batch
guide's "Inline-Batching"), and reads as a `BatchJob` (its `input_files` as created)
(`QUEUED`, `RUNNING`, `SUCCESS`, `FAILED`, `TIMEOUT_EXCEEDED`, `CANCELLATION_REQUESTED`,
`CANCELLED`; `total_requests`, `succeeded_requests`, `failed_requests`; `output_file` and
`error_file` once it ended). Its lines are `{"custom_id", "body"}`: a line with another shape (an
OpenAI line's `method` and `url`) or without messages is refused at create, as a 400 naming the
line; a body Mistral's chat completions would refuse (a field or a value the `mistralai` SDK's
`ChatCompletionRequestTypedDict` does not take, `sources.requests`) is a failed request, in the error
file with status 400 and Mistral's flat error body naming the field.
The output file holds `{"id", "custom_id", "response": {"status_code": 200, "body"}}` lines
whose messages carry a reasoning model's thinking as content chunks (`{"type": "thinking"}` before
`{"type": "text"}`, as Magistral answers); failed requests go to the error file as OpenAI-shaped
error lines (their format is not documented beyond the custom_id); requests an expired or
cancelled job never ran are in neither. A job for a model Mistral does not serve (`sources.names`:
not among the API names its documentation publishes, a slip of one named) is refused at create with
Mistral's 400 `invalid_model` ("Invalid model: NAME", code 1500). Everything is run by the OpenAI-shaped machinery (`native`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any

from lexpilot_batch.providers.mistral.spec import NAME as MISTRAL
from lexpilot_batch.simulated import batches
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
    run,
    to_chat,
)
from lexpilot_batch.simulated.routes import Handlers, Route, SimulatedApi
from lexpilot_batch.simulated.sources import names, requests, typed
from lexpilot_batch.simulated.store import Store

NAME = "mistral"  # its batches' mark in the store (`native`)
ENDPOINT = "/v1/chat/completions"
_STATUSES = {
    "validating": "QUEUED",
    "in_progress": "RUNNING",
    "finalizing": "RUNNING",
    "cancelling": "CANCELLATION_REQUESTED",
    "completed": "SUCCESS",
    "failed": "FAILED",
    "expired": "TIMEOUT_EXCEEDED",
    "cancelled": "CANCELLED",
}


class MistralApi(Handlers):
    """The batch job routes over one simulated provider's store (its files are OpenAI's routes')."""

    def __init__(self, store: Store, faults: Faults, seed: int, roll: Callable[..., float]) -> None:
        super().__init__(store, faults, seed, roll)
        self._lock = threading.Lock()  # a job's files are written once, whichever call sees it end first

    def create(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("The request body must be a JSON object.")
        files, model, inline = body.get("input_files"), body.get("model"), body.get("requests")
        if inline is None and (not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files)):
            raise bad_request(
                "input_files: a list of uploaded file ids (or inline requests) is required.", "input_files"
            )
        if inline is not None and (not isinstance(inline, list) or not inline or files):
            raise bad_request("requests: a non-empty list of {custom_id, body}, without input_files.", "requests")
        if not isinstance(model, str) or not model:
            raise bad_request("model: a model (or agent_id) is required.", "model")
        why = _model_problem(model)
        if why is not None:  # Mistral's answer to a model it does not serve
            raise ApiError(400, f"Invalid model: {model} ({why})", type="invalid_model", code="1500")
        if body.get("endpoint") != ENDPOINT:
            raise bad_request(f"endpoint: the simulated provider runs {ENDPOINT} only.", "endpoint")
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
            raise bad_request("metadata: an object of string values.", "metadata")
        hours = body.get("timeout_hours", 24)
        if not isinstance(hours, int) or hours < 1:
            raise bad_request("timeout_hours: a positive integer.", "timeout_hours")
        lines: list[bytes] = []
        problems: dict[str, str] = {}
        sent = hashlib.sha256()
        if inline is not None:
            data = b"".join((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8") for r in inline)
            sent.update(data)
            lines.extend(self._lines("requests", data, model, problems))
            files = []
        for file_id in files or []:
            data = self._input(file_id)
            sent.update(data)
            lines.extend(self._lines(file_id, data, model, problems))
        if not lines:
            raise bad_request("The input files hold no requests.", "input_files")
        native = {
            "api": NAME,
            "n": len(lines),
            "model": model,
            "metadata": metadata,
            "hours": hours,
            "input_files": files,
        }
        if problems:
            native["problems"] = problems
        return self._job(run(self.store, lines, self.seed, self.faults, native, sent.hexdigest()))

    def _input(self, file_id: str) -> bytes:
        file = self.store.get_file(file_id)
        if file is None or file["purpose"] != "batch":
            raise ApiError(404, f"File {file_id} not found.", param="input_files")
        return self.store.file_bytes(file_id)

    def _lines(self, file_id: str, data: bytes, model: str, problems: dict[str, str]) -> list[bytes]:
        """The requests of an input file as OpenAI lines; a body Mistral's chat completions would
        refuse (`_body_problems`) runs as a refused request, its reason
        kept in `problems`, so that it lands in the error file."""
        out = []
        for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = None
            where = f"{file_id} line {number}"
            if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str) or not obj["custom_id"]:
                raise bad_request(f"{where}: each line needs a string 'custom_id'.", "input_files")
            if set(obj) - {"custom_id", "body"}:
                extra = ", ".join(sorted(set(obj) - {"custom_id", "body"}))
                raise bad_request(f"{where}: unexpected field(s) {extra}; a line is {{custom_id, body}}.")
            request = obj.get("body")
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise bad_request(f"{where}: 'body' must be a chat completion request with messages.")
            found = _body_problems({"model": model, **request})
            if found:
                problems[obj["custom_id"]] = "; ".join(found)
                out.append(to_chat(obj["custom_id"], model, [], {}))  # refused by the simulated endpoint
                continue
            fields = {k: v for k, v in request.items() if k not in ("model", "messages")}
            out.append(to_chat(obj["custom_id"], model, request["messages"], fields))
        return out

    def _record(self, job: str) -> dict[str, Any]:
        return job_record(self.store, NAME, job, "job_id")

    def get(self, job: str) -> dict[str, Any]:
        return self._job(self._record(job))

    def cancel(self, job: str) -> dict[str, Any]:
        cancel_job(self.store, self._record(job), job)
        return self._job(self._record(job))

    def list(self, query: dict[str, str]) -> dict[str, Any]:
        try:
            page, size = int(query.get("page") or 0), int(query.get("page_size") or 100)
        except ValueError:
            raise bad_request("page and page_size must be integers.") from None
        records = records_of(self.store, NAME)  # newest first: order_by=-created, the default here
        if query.get("order_by") == "created":
            records.reverse()
        size = max(1, min(size, 1000))
        data = [self._job(r) for r in records[page * size : (page + 1) * size]]
        return {"object": "list", "data": data, "total": len(records)}

    def _job(self, record: dict[str, Any]) -> dict[str, Any]:
        """The job as a `BatchJob` now; its files are written the first time it ended."""
        batch = batches.current(self.store, record)
        record = self.store.get_batch(record["batch"]["id"]) or record
        sim, status = record["sim"], batch["status"]
        native = sim["native"]
        total = int(native["n"])
        running = batch.get("request_counts") or {}
        succeeded, failed = int(running.get("completed") or 0), int(running.get("failed") or 0)
        job: dict[str, Any] = {
            "id": job_id(batch["id"]),
            "object": "batch",
            "input_files": list(native.get("input_files") or []),
            "metadata": native["metadata"],
            "endpoint": ENDPOINT,
            "model": native["model"],
            "errors": [],
            "status": _STATUSES[status],
            "created_at": int(sim["created"]),
            "total_requests": total,
            "output_file": None,
            "error_file": None,
            "started_at": int(sim["created"]),
            "completed_at": None,
        }
        if status == "failed":
            job["errors"] = [{"message": "The batch input could not be read.", "count": total}]
        elif status in batches.TERMINAL:
            succeeded, failed, _never = counts(record, status)
            job["output_file"], job["error_file"] = self._files(batch, native.get("problems") or {})
            end = batch.get("completed_at") or batch.get("expired_at") or batch.get("cancelled_at")
            job["completed_at"] = int(end or sim["created"])
        job.update(completed_requests=succeeded + failed, succeeded_requests=succeeded, failed_requests=failed)
        return job

    def _files(self, batch: dict[str, Any], problems: dict[str, str]) -> tuple[str | None, str | None]:
        """The ended job's output and error files (written once; their ids follow from the batch's)."""
        ids = ("o" + digest("mistral-output", batch["id"])[:24], "e" + digest("mistral-errors", batch["id"])[:24])
        with self._lock:
            self._write(batch, ids, problems)
        return ids[0], (ids[1] if self.store.file_bytes(ids[1]) else None)

    def _write(self, batch: dict[str, Any], ids: tuple[str, str], problems: dict[str, str]) -> None:
        if self.store.get_file(ids[0]) is None:
            kept: tuple[list[str], list[str]] = ([], [])
            for line in result_lines(self.store, batch):
                converted = _line(line, problems.get(line["custom_id"]))
                if converted is not None:
                    ok = (converted.get("response") or {}).get("status_code") == 200
                    kept[0 if ok else 1].append(batches.dumps(converted) + "\n")
            # The output file last: it marks both written.
            for file_id, out, name in reversed(list(zip(ids, kept, ("output", "error"), strict=True))):
                data = "".join(out).encode("utf-8")
                self.store.add_file(data, f"{batch['id']}-{name}.jsonl", "mistral_output", file_id)


def _model_problem(model: str) -> str | None:
    """Why Mistral's API does not serve `model` (`sources.names`), or None."""
    several = names.joined(model, names.mistral())
    if several is not None:
        return several
    known = names.mistral()
    if model in known or names.is_sim(model):
        return None
    near = names.near_miss(model, known) or names.prefix_left_on(model, known)
    return f"did you mean {near}?" if near else "not a model Mistral's documentation lists"


def _body_problems(body: dict[str, Any]) -> list[str]:
    """What Mistral's chat completions refuse in a body: the `mistralai` SDK's request type's (closed:
    Mistral answers an unknown field 422 `extra_forbidden`), as `field: what`."""
    request_type = requests.mistral_chat()
    if request_type is None:
        return []
    found = typed.problems(body, request_type)
    return [
        f"{f}: {'Extra inputs are not permitted' if w == 'is not a field of this request' else w}" for f, w in found
    ]


def _line(line: dict[str, Any], problem: str | None = None) -> dict[str, Any] | None:
    """An OpenAI result line as Mistral's: None for a request that never ran; a request whose body
    Mistral refuses (`problem`) a 400 in Mistral's flat error shape."""
    error = line.get("error")
    if isinstance(error, dict) and error.get("code") in ("batch_expired", "batch_cancelled"):
        return None
    response = line.get("response")
    if problem is not None and isinstance(response, dict) and response.get("status_code") == 400:
        error = {"object": "error", "message": problem, "type": "invalid_request_error", "param": None, "code": None}
        return {**line, "response": {**response, "body": error}}
    if not isinstance(response, dict) or response.get("status_code") != 200:
        return line
    body = dict(response["body"])
    body["choices"] = [_chunked(c) for c in body.get("choices") or []]
    return {**line, "response": {**response, "body": body}}


def _chunked(choice: dict[str, Any]) -> dict[str, Any]:
    """A reasoning answer's message as Magistral's: thinking, then text, as content chunks."""
    message = dict(choice.get("message") or {})
    thinking = message.pop("reasoning_content", None)
    if not thinking:
        return choice
    text = message.get("content")
    chunks: list[dict[str, Any]] = [{"type": "thinking", "thinking": [{"type": "text", "text": thinking}]}]
    if isinstance(text, str):
        chunks.append({"type": "text", "text": text})
    return {**choice, "message": {**message, "content": chunks}}


def error_body(error: ApiError) -> dict[str, Any]:
    """Mistral's error body, flat: `{"object": "error", message, type, param, code}`."""
    return {"object": "error", "message": error.message, "type": error.type, "param": error.param, "code": error.code}


API = SimulatedApi[MistralApi](
    NAME,
    MISTRAL,
    MistralApi,
    (
        Route("POST", r"/v1/batch/jobs", "mistral_create", lambda a, r: a.create(r.json()), creates=True),
        Route("GET", r"/v1/batch/jobs", "mistral_list", lambda a, r: a.list(r.query)),
        Route("GET", r"/v1/batch/jobs/([^/]+)", "mistral_get", lambda a, r: a.get(*r.args)),
        Route("POST", r"/v1/batch/jobs/([^/]+)/cancel", "mistral_cancel", lambda a, r: a.cancel(*r.args)),
    ),
    prefixes=("/v1/batch/jobs",),
    base_path="/v1",  # OpenAI's (`MISTRAL_BASE_URL`): its batch jobs beside the files routes
    error_body=error_body,
)
