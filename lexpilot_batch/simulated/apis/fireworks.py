"""Fireworks AI's batch inference routes of the simulated provider, under `/fireworks` (`native_url`).

A `fireworks/` model's base URL is `{root}/fireworks`, as the real one is `https://api.fireworks.ai`
(the `fireworks-ai` SDK's `FIREWORKS_BASE_URL`): the SDK, pointed there unmodified, calls these
routes. Built from Fireworks' documentation (https://docs.fireworks.ai/guides/batch-inference; the
API reference's dataset and batch inference job pages; firectl's `batch-inference-job` and `dataset`
commands) and the SDK's types (`fireworks-ai` 1.2.30: `resources/datasets.py`,
`resources/batch_inference_jobs.py`, `resources/accounts.py`, `types/batch_inference_job.py`,
`types/dataset.py`, `types/dataset_get_download_endpoint_response.py`, `pagination.py`; taken
2026-12-06):

- **accounts**: `GET /v1/accounts` lists one, `accounts/simulated` (`SyncCursorAccounts`: `accounts`,
  `nextPageToken`); every route under `/v1/accounts/{account_id}` takes any account id;
- **datasets**: `POST .../datasets` `{"datasetId", "dataset": {"userUploaded": {}, "exampleCount",
  "displayName"}}` answers the `Dataset` in state `UPLOADING` (409, gRPC `ALREADY_EXISTS`, for an id
  taken); `POST .../datasets/{id}:upload` with a multipart `file` (at most 150 MB: "This path can
  handle file sizes up to 150Mb") answers `DatasetUploadResponse` and makes it `READY`; `GET
  .../datasets/{id}` the `Dataset`; `GET .../datasets/{id}:getDownloadEndpoint` its
  `filenameToSignedUrls`, each URL (`/fireworks/signed/...`) its own credential;
- **jobs**: `POST .../batchInferenceJobs?batchInferenceJobId=` `{"model", "inputDatasetId",
  "outputDatasetId", "displayName", "inferenceParameters", "precision"}` (an id taken: 409; a
  dataset not `READY`, or lines of another shape: 400); `GET .../batchInferenceJobs` (`pageSize` up
  to 200, `pageToken`; by creation time, oldest first, the SDK's documented default order);
  `GET .../batchInferenceJobs/{id}`; `DELETE` (there is no cancel: the job stops and reads
  `JOB_STATE_DELETING_CLEANING_UP`, its output dataset never written). A job's `state` is the SDK's
  `JobState`; `jobProgress` its counts;
- **lines**: `{"custom_id", "body"}`, `custom_id` unique, `body` a chat request with `messages`
  (the guide's "Required fields"); the model is the job's. Other line fields are refused: stricter
  than the guide says the service is, so a rehearsal that passes sends only what is documented;
- **results**: a completed or expired job's output dataset holds `BIJOutputSet.jsonl`, a line
  `{"custom_id", "response": <chat.completion>}` per answer, and `error-data`, a line
  `{"custom_id", "error": {"message", "code"}}` per failed request (the guide names the two files
  and their `custom_id`s only; these names and shapes are those published captures of live jobs
  show); requests an expired job never ran are in neither;
- **errors**: the gateway's `{"code", "message", "details"}`, `code` the gRPC status.

Everything is run by the OpenAI-shaped machinery (`native`), so a request draws the same answer and
the same faults here as on every other route.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any

from lexpilot_batch.providers.fireworks.spec import NAME as FIREWORKS
from lexpilot_batch.simulated import batches, chat
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.faults import Faults
from lexpilot_batch.simulated.native import counts, digest, now, records_of, result_lines, rfc3339, run, to_chat
from lexpilot_batch.simulated.routes import Handlers, Route, SimulatedApi, parse_multipart
from lexpilot_batch.simulated.store import Store

NAME = "fireworks"  # its batches' mark in the store (`native`)
PREFIX = "/fireworks"
ACCOUNT = "simulated"
INPUT, UPLOADING, OUTPUT = "fireworks-dataset", "fireworks-dataset-uploading", "fireworks-output"
RESULTS_FILE, ERROR_FILE = "BIJOutputSet.jsonl", "error-data"
MAX_UPLOAD = 150 * 1024 * 1024  # the SDK's `datasets.upload`: "file sizes up to 150Mb"
PAGE, MAX_PAGE = 50, 200  # `pageSize`: "If unspecified, the default is 50"; "The maximum page_size is 200"
_STATES = {
    "validating": "JOB_STATE_VALIDATING",
    "in_progress": "JOB_STATE_RUNNING",
    "finalizing": "JOB_STATE_WRITING_RESULTS",
    "cancelling": "JOB_STATE_DELETING_CLEANING_UP",
    "completed": "JOB_STATE_COMPLETED",
    "failed": "JOB_STATE_FAILED",
    "expired": "JOB_STATE_EXPIRED",
    "cancelled": "JOB_STATE_DELETING_CLEANING_UP",
}
# HTTP status -> gRPC status code (google.rpc.Code), as the gateway's error body carries it.
_GRPC = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 413: 3, 429: 8, 500: 13, 503: 14, 529: 14}


def _file_id(account: str, dataset: str, kind: str = "input") -> str:
    return "fw-" + digest("fireworks-dataset", account, dataset, kind)[:32]


def error_body(error: ApiError) -> dict[str, Any]:
    """The gateway's error body: `{"code", "message", "details"}`."""
    return {"code": _GRPC.get(error.status, 2), "message": error.message, "details": []}


class FireworksApi(Handlers):
    """The dataset and batch inference job routes of Fireworks over one simulated provider's store."""

    def __init__(self, store: Store, faults: Faults, seed: int, roll: Callable[..., float]) -> None:
        super().__init__(store, faults, seed, roll)
        self._lock = threading.Lock()  # a dataset id names one dataset; a job's files are written once

    # --- accounts -----------------------------------------------------------------------------

    def accounts(self) -> dict[str, Any]:
        account = {
            "name": f"accounts/{ACCOUNT}",
            "displayName": "Simulated",
            "email": "sim@example.com",
            "state": "READY",
        }
        return {"accounts": [account], "nextPageToken": "", "totalSize": 1}

    # --- datasets -----------------------------------------------------------------------------

    def create_dataset(self, account: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("dataset"), dict):
            raise bad_request("dataset: a Dataset object is required.", "dataset")
        dataset_id, dataset = body.get("datasetId"), body["dataset"]
        if not isinstance(dataset_id, str) or not dataset_id or len(dataset_id) > 63:
            raise bad_request("datasetId: a resource id of 1 to 63 characters is required.", "datasetId")
        if "userUploaded" not in dataset:
            raise bad_request("dataset: only uploaded datasets (userUploaded) are simulated.", "dataset")
        if not str(dataset.get("exampleCount") or "").isdigit():
            raise bad_request("example_count is required for uploaded datasets", "exampleCount")
        file_id = _file_id(account, dataset_id)
        with self._lock:
            if self.store.get_file(file_id) is not None:
                raise ApiError(
                    409, f"dataset accounts/{account}/datasets/{dataset_id} already exists", code="ALREADY_EXISTS"
                )
            self.store.add_file(b"", str(dataset.get("displayName") or ""), UPLOADING, file_id)
        return self.get_dataset(account, dataset_id)

    def upload(self, account: str, dataset_id: str, headers: Any, body: bytes) -> dict[str, Any]:
        file = self._dataset_file(account, dataset_id)
        _fields, part = parse_multipart(headers.get("Content-Type", ""), body)
        if part is None:
            raise bad_request("file: a multipart file is required.", "file")
        name, data = part
        if len(data) > MAX_UPLOAD:
            raise ApiError(413, "the file is larger than 150MB; use the upload endpoint (getUploadEndpoint)")
        self.store.add_file(bytes(data), file["filename"], INPUT, file["id"])
        return {
            "id": f"accounts/{account}/datasets/{dataset_id}",
            "bytes": len(data),
            "created_at": int(now()),
            "filename": name,
            "object": "file",
            "purpose": "dataset",
        }

    def _dataset_file(self, account: str, dataset_id: str) -> dict[str, Any]:
        file = self.store.get_file(_file_id(account, dataset_id))
        if file is None or file["purpose"] not in (INPUT, UPLOADING):
            raise ApiError(404, "resource not found")
        return file

    def get_dataset(self, account: str, dataset_id: str) -> dict[str, Any]:
        file = self.store.get_file(_file_id(account, dataset_id))
        record = None if file is not None else self._job_of_output(account, dataset_id)
        if file is None and record is None:
            raise ApiError(404, "resource not found")
        created = rfc3339(file["created_at"] if file is not None else record["sim"]["created"])  # type: ignore[index]
        data = self.store.file_bytes(file["id"]) if file is not None and file["purpose"] == INPUT else b""
        return {
            "name": f"accounts/{account}/datasets/{dataset_id}",
            "displayName": file["filename"] if file is not None else "",
            "createTime": created,
            "updateTime": created,
            "state": "UPLOADING" if file is not None and file["purpose"] == UPLOADING else "READY",
            "status": {"code": "OK", "message": ""},
            "exampleCount": str(data.count(b"\n")),
            "format": "FORMAT_UNSPECIFIED",
            **({"userUploaded": {}} if file is not None else {"sourceJobName": self._job(record)["name"]}),  # type: ignore[arg-type]
        }

    def download_endpoint(self, account: str, dataset_id: str) -> dict[str, Any]:
        file = self.store.get_file(_file_id(account, dataset_id))
        if file is not None and file["purpose"] == INPUT:
            return {
                "filenameToSignedUrls": {
                    f"dataset/{dataset_id}/{file['filename'] or 'input.jsonl'}": self._signed(file["id"])
                }
            }
        record = self._job_of_output(account, dataset_id)
        if record is None or self._job(record)["state"] not in ("JOB_STATE_COMPLETED", "JOB_STATE_EXPIRED"):
            raise ApiError(404, "resource not found")  # a failed or deleted job's output was never written
        ids = self._files(account, dataset_id, record)
        names = (RESULTS_FILE, ERROR_FILE)
        return {
            "filenameToSignedUrls": {
                f"dataset/{dataset_id}/{n}": self._signed(i) for n, i in zip(names, ids, strict=True)
            }
        }

    def _signed(self, file_id: str) -> str:
        return f"{self.root}{PREFIX}/signed/{file_id}/{digest('fireworks-signed', file_id, self.seed)[:32]}"

    def signed(self, file_id: str, token: str) -> bytes:
        if token != digest("fireworks-signed", file_id, self.seed)[:32] or self.store.get_file(file_id) is None:
            raise ApiError(403, "AccessDenied: the signed URL is not valid.", code="AccessDenied")
        return self.store.file_bytes(file_id)

    # --- chat completions ----------------------------------------------------------------------

    def chat_completion(self, body: Any, client_request_id: str | None = None) -> dict[str, Any]:
        """One chat completion, answered as a batch line with the custom_id `client_request_id` is (`chat`)."""
        return chat.answer(body, client_request_id, self.seed, self.faults, self.roll, self.store.prefixes)

    # --- jobs ----------------------------------------------------------------------------------

    def create(self, account: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("The request body must be a BatchInferenceJob.")
        known = {
            "displayName",
            "model",
            "inputDatasetId",
            "outputDatasetId",
            "inferenceParameters",
            "precision",
            "continuedFromJobName",
        }
        if set(body) - known:
            raise bad_request(f"unknown field(s) {', '.join(sorted(set(body) - known))} in a BatchInferenceJob.")
        model, source = body.get("model"), body.get("inputDatasetId")
        if not isinstance(model, str) or not model:
            raise bad_request("model is required", "model")
        if not isinstance(source, str) or not source:
            raise bad_request("input_dataset_id is required", "inputDatasetId")
        dataset_id = source.rsplit("/", 1)[-1]
        file = self._dataset_file(account, dataset_id)
        if file["purpose"] != INPUT:
            raise bad_request(f"dataset {source} is not READY", "inputDatasetId")
        job = query.get("batchInferenceJobId") or "bij-" + digest("fireworks-job", now(), self.seed)[:8]
        output = str(body.get("outputDatasetId") or "").rsplit("/", 1)[-1] or "bij-" + digest("fireworks-out", job)[:8]
        data = self.store.file_bytes(file["id"])
        lines = self._lines(source, data, model)
        with self._lock:
            if self._record(account, job, missing=False) is not None:
                raise ApiError(
                    409,
                    f"batch inference job accounts/{account}/batchInferenceJobs/{job} already exists",
                    code="ALREADY_EXISTS",
                )
            native = {
                "api": NAME,
                "n": len(lines),
                "model": model,
                "account": account,
                "job": job,
                "input": dataset_id,
                "output": output,
                "display": str(body.get("displayName") or ""),
            }
            record = run(self.store, lines, self.seed, self.faults, native, hashlib.sha256(data).hexdigest())
        return self._job(record)

    def _lines(self, source: str, data: bytes, model: str) -> list[bytes]:
        out: list[bytes] = []
        seen: set[str] = set()
        for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = None
            where = f"Dataset has a syntax error: {source} line {number}"
            cid = obj.get("custom_id") if isinstance(obj, dict) else None
            if not isinstance(cid, str) or not cid or cid in seen:
                raise bad_request(f"{where}: each line needs a unique string custom_id.")
            seen.add(cid)
            assert isinstance(obj, dict)
            if set(obj) != {"custom_id", "body"}:
                raise bad_request(f"{where}: a line is {{custom_id, body}}, not {sorted(obj)}.")
            request = obj["body"]
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise bad_request(f"{where}: body must be a chat completion request with messages.")
            fields = {k: v for k, v in request.items() if k not in ("model", "messages")}
            out.append(to_chat(cid, model, request["messages"], fields))
        if not out:
            raise bad_request(f"Dataset {source} holds no requests.", "inputDatasetId")
        return out

    def _record(self, account: str, job: str, missing: bool = True) -> dict[str, Any] | None:
        found = next(
            (
                r
                for r in records_of(self.store, NAME)
                if r["sim"]["native"]["job"] == job and r["sim"]["native"]["account"] == account
            ),
            None,
        )
        if found is None and missing:
            raise ApiError(404, "resource not found")
        return found

    def _job_of_output(self, account: str, dataset_id: str) -> dict[str, Any] | None:
        return next(
            (
                r
                for r in records_of(self.store, NAME)
                if r["sim"]["native"]["output"] == dataset_id and r["sim"]["native"]["account"] == account
            ),
            None,
        )

    def get(self, account: str, job: str) -> dict[str, Any]:
        return self._job(self._record(account, job))  # type: ignore[arg-type]

    def delete(self, account: str, job: str) -> dict[str, Any]:
        record = self._record(account, job)
        assert record is not None
        with self._lock:
            if batches.current(self.store, record)["status"] not in batches.TERMINAL:
                batches.cancel(self.store, record)
            record = self.store.get_batch(record["batch"]["id"]) or record
            record["sim"]["native"]["deleted"] = True
            self.store.put_batch(record)
        return {}

    def listing(self, account: str, query: dict[str, str]) -> dict[str, Any]:
        try:
            size = min(MAX_PAGE, int(query.get("pageSize") or PAGE)) or PAGE
            start = int(query.get("pageToken") or 0)
        except ValueError:
            raise bad_request("pageSize and pageToken must be numbers here.") from None
        mine = [r for r in reversed(records_of(self.store, NAME)) if r["sim"]["native"]["account"] == account]
        page = mine[start : start + size]
        more = start + size < len(mine)
        return {
            "batchInferenceJobs": [self._job(r) for r in page],
            "nextPageToken": str(start + size) if more else "",
            "totalSize": len(mine),
        }

    def _job(self, record: dict[str, Any]) -> dict[str, Any]:
        """The job as a `BatchInferenceJob` now."""
        batch = batches.current(self.store, record)
        record = self.store.get_batch(record["batch"]["id"]) or record
        sim, status, native = record["sim"], batch["status"], record["sim"]["native"]
        account, total = native["account"], int(native["n"])
        running = batch.get("request_counts") or {}
        done, failed = int(running.get("completed") or 0), int(running.get("failed") or 0)
        if status in batches.TERMINAL:
            done, failed, _never = counts(record, status)
        state = "JOB_STATE_DELETING_CLEANING_UP" if native.get("deleted") else _STATES[status]
        message = "The batch input could not be read." if status == "failed" else ""
        end = batch.get("completed_at") or batch.get("expired_at") or batch.get("cancelled_at") or sim["created"]
        return {
            "name": f"accounts/{account}/batchInferenceJobs/{native['job']}",
            "displayName": native["display"],
            "createTime": rfc3339(sim["created"]),
            "createdBy": "sim@example.com",
            "state": state,
            "status": {"code": "INVALID_ARGUMENT" if message else "OK", "message": message},
            "model": native["model"],
            "inputDatasetId": f"accounts/{account}/datasets/{native['input']}",
            "outputDatasetId": f"accounts/{account}/datasets/{native['output']}",
            "inferenceParameters": {"extraBody": "{}"},
            "updateTime": rfc3339(end),
            "precision": "PRECISION_UNSPECIFIED",
            "jobProgress": {
                "percent": round(100 * (done + failed) / total) if total else 0,
                "totalInputRequests": total,
                "totalProcessedRequests": done + failed,
                "successfullyProcessedRequests": done,
                "failedRequests": failed,
                "outputRows": done,
            },
        }

    def _files(self, account: str, dataset_id: str, record: dict[str, Any]) -> tuple[str, str]:
        """The ended job's results and error files (written once; their ids follow from the dataset's)."""
        ids = (_file_id(account, dataset_id, "results"), _file_id(account, dataset_id, "errors"))
        batch = batches.current(self.store, record)
        with self._lock:
            if self.store.get_file(ids[0]) is None:
                kept: tuple[list[str], list[str]] = ([], [])
                for line in result_lines(self.store, batch):
                    converted = _line(line)
                    if converted is not None:
                        kept[0 if "response" in converted else 1].append(batches.dumps(converted) + "\n")
                # The results file last: it marks both written.
                for file_id, out, name in reversed(list(zip(ids, kept, (RESULTS_FILE, ERROR_FILE), strict=True))):
                    self.store.add_file("".join(out).encode("utf-8"), name, OUTPUT, file_id)
        return ids


def _line(line: dict[str, Any]) -> dict[str, Any] | None:
    """An OpenAI result line as Fireworks': None for a request that never ran."""
    error = line.get("error")
    if isinstance(error, dict) and error.get("code") in ("batch_expired", "batch_cancelled"):
        return None
    response, cid = line.get("response"), line.get("custom_id")
    if isinstance(response, dict) and response.get("status_code") == 200:
        return {"custom_id": cid, "response": response["body"]}
    detail = error if isinstance(error, dict) else None
    if detail is None and isinstance(response, dict) and isinstance(response.get("body"), dict):
        detail = response["body"].get("error")
    detail = detail if isinstance(detail, dict) else {}
    return {"custom_id": cid, "error": {"message": str(detail.get("message") or "failed"), "code": detail.get("code")}}


_ACC = r"/fireworks/v1/accounts/([^/]+)"
API = SimulatedApi[FireworksApi](
    NAME,
    FIREWORKS,
    FireworksApi,
    (
        Route("GET", r"/fireworks/v1/accounts", "fireworks_accounts", lambda a, r: a.accounts()),
        Route(
            "POST", _ACC + r"/datasets", "fireworks_create_dataset", lambda a, r: a.create_dataset(r.args[0], r.json())
        ),
        Route(
            "POST",
            _ACC + r"/datasets/([^/:]+):upload",
            "fireworks_upload",
            lambda a, r: a.upload(r.args[0], r.args[1], r.headers, r.body),
        ),
        Route("GET", _ACC + r"/datasets/([^/:]+)", "fireworks_get_dataset", lambda a, r: a.get_dataset(*r.args)),
        Route(
            "GET",
            _ACC + r"/datasets/([^/:]+):getDownloadEndpoint",
            "fireworks_download_endpoint",
            lambda a, r: a.download_endpoint(*r.args),
        ),
        # The signed URL is its own credential: no key is sent there.
        Route(
            "GET",
            r"/fireworks/signed/([^/]+)/([^/]+)",
            "fireworks_signed_download",
            lambda a, r: a.signed(*r.args),
            keyless=True,
        ),
        Route(
            "POST",
            _ACC + r"/batchInferenceJobs",
            "fireworks_create",
            lambda a, r: a.create(r.args[0], r.query, r.json()),
            creates=True,
        ),
        Route("GET", _ACC + r"/batchInferenceJobs", "fireworks_list", lambda a, r: a.listing(r.args[0], r.query)),
        Route("GET", _ACC + r"/batchInferenceJobs/([^/]+)", "fireworks_get", lambda a, r: a.get(*r.args)),
        Route("DELETE", _ACC + r"/batchInferenceJobs/([^/]+)", "fireworks_delete", lambda a, r: a.delete(*r.args)),
        Route(
            "POST",
            r"/fireworks/v1/chat/completions",  # the SDK's path at a base URL of its own
            "chat_completion",
            lambda a, r: a.chat_completion(r.json(), r.call_id),
            chat=True,
            on_flex=chat.on_flex,
        ),
    ),
    prefixes=("/fireworks/",),
    base_path=PREFIX,  # `FIREWORKS_BASE_URL`: https://api.fireworks.ai
    error_body=error_body,
    overloaded=503,
)
