"""Vertex AI's batch prediction routes of the simulated provider, and the Cloud Storage JSON API
routes its files go through, learned from Google's documentation and the `google-genai` SDK's
Vertex mode (`batches.py`'s `_CreateBatchJobParameters_to_vertex`, `_BatchJob_from_vertex`).

- **Cloud Storage** (https://cloud.google.com/storage/docs/json_api/v1/objects): an object stored
  by `POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name=...` (the body its bytes) or
  `uploadType=multipart` (a `multipart/related` body: its metadata, then its bytes, as
  google-cloud-storage sends a small file); listed by `GET /storage/v1/b/{bucket}/o?prefix=...`
  (`items` with `name`, `size`, `md5Hash`; pages by `pageToken`); read by `GET
  /storage/v1/b/{bucket}/o/{object}` (its metadata) and `?alt=media` (its bytes), also under
  `/download/storage/v1/...` (google-cloud-storage's download path).
- **Batch prediction jobs** (`/v1` and `/v1beta1`, `projects/{p}/locations/{l}/batchPredictionJobs`):
  created from `{displayName, model: publishers/google/models/<m>, inputConfig: {instancesFormat:
  jsonl, gcsSource: {uris}}, outputConfig: {predictionsFormat: jsonl, gcsDestination:
  {outputUriPrefix}}}`; got, listed (`batchPredictionJobs`, `nextPageToken`) and cancelled
  (`:cancel`, an empty answer, the job `JOB_STATE_CANCELLING` then `JOB_STATE_CANCELLED`). Its
  input lines are `{"request": GenerateContentRequest}`, checked as the Gemini routes check a
  request (`gemini`); a request's id is read from its labels where one maps back to an id of
  lexpilot-batch's (`lines.our_id`), else its row number. Once ended (succeeded, cancelled,
  expired: "all completed rows are exported") the job names `outputInfo.gcsOutputDirectory`,
  `<prefix>/prediction-model-<time>/predictions.jsonl`, holding a line per request that ran:
  `{"status": "", "processed_time", "request": <echoed, labels included>, "response":
  GenerateContentResponse}`, or a failed row's `status`, `"<reason>: {"error": {code, message,
  status}}"` (the documentation shows no failed row: this wording is the simulator's guess).
- `publishers/google/models/{m}:generateContent` answers one request as the same request in a
  batch is; `GET publishers/google/models` lists the Gemini models it serves.
- A job of a Claude model (`publishers/anthropic/models/<m>`) reads `{"custom_id", "request"}` lines
  and writes Claude's rows (`vertex_anthropic`, which also serves `rawPredict`); it is listed with
  the others, as Vertex lists a project's jobs.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from lexpilot_batch.providers.lines import our_id
from lexpilot_batch.providers.vertex.spec import NAME as VERTEX
from lexpilot_batch.simulated import batches
from lexpilot_batch.simulated.apis import vertex_anthropic as claude
from lexpilot_batch.simulated.apis.gemini import NO_CONTENTS, GeminiApi, _chat_parts, _problem, error_body
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.native import counts, record_of, records_of, result_lines, rfc3339, run, to_chat
from lexpilot_batch.simulated.routes import Route, SimulatedApi
from lexpilot_batch.simulated.sources import names

NAME = "vertex"  # its batches' mark in the store (`native`); Claude's jobs carry `vertex_anthropic`'s
MARKS = (NAME, claude.NAME)
_STATES = {
    "validating": "JOB_STATE_PENDING",
    "in_progress": "JOB_STATE_RUNNING",
    "finalizing": "JOB_STATE_RUNNING",
    "cancelling": "JOB_STATE_CANCELLING",
    "completed": "JOB_STATE_SUCCEEDED",
    "failed": "JOB_STATE_FAILED",
    "cancelled": "JOB_STATE_CANCELLED",
    "expired": "JOB_STATE_EXPIRED",
}
_HTTP = {3: (400, "Bad Request"), 13: (500, "Internal Server Error"), 14: (503, "Service Unavailable")}
GCS = "gcs"  # the purpose of a Cloud Storage object in the store
_PUBLISHED = "publishers/google/models/"


def _object_id(bucket: str, name: str) -> str:
    return "gcs" + hashlib.sha256(f"{bucket}/{name}".encode()).hexdigest()[:24]


def _job_id(batch_id: str) -> str:
    """A simulated batch's id as a job's numeric id (Vertex's are digits): its hex digits after a
    leading 1, so that leading zeros come back (`_batch_id`)."""
    return str(int("1" + batch_id.removeprefix("batch_"), 16))


def _batch_id(job: str) -> str:
    return "batch_" + format(int(job), "x")[1:] if job.isdigit() else ""


def _split(uri: str) -> tuple[str, str]:
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    return bucket, name


class VertexApi(GeminiApi):
    """The batch prediction and Cloud Storage routes over one simulated provider's store."""

    # --- Cloud Storage ---------------------------------------------------------------------------

    def put_object(self, bucket: str, name: str, data: bytes) -> dict[str, Any]:
        stored = self.store.add_file(data, f"{bucket}/{name}", GCS, file_id=_object_id(bucket, name))
        return self._object(stored)

    def upload(self, bucket: str, query: dict[str, str], headers: Any, body: bytes) -> dict[str, Any]:
        kind = query.get("uploadType")
        if kind == "media":
            if not query.get("name"):
                raise bad_request("Required parameter: name")
            return self.put_object(bucket, query["name"], body)
        if kind == "multipart":
            metadata, data = _related(headers.get("Content-Type", ""), body)
            name = query.get("name") or metadata.get("name")
            if not name:
                raise bad_request("Required parameter: name")
            return self.put_object(bucket, str(name), data)
        raise bad_request(f"Unsupported uploadType {kind!r}: media or multipart.")

    def _object(self, stored: dict[str, Any]) -> dict[str, Any]:
        bucket, _, name = stored["filename"].partition("/")
        data = self.store.file_bytes(stored["id"])
        return {
            "kind": "storage#object",
            "id": f"{bucket}/{name}",
            "name": name,
            "bucket": bucket,
            "size": str(stored["bytes"]),
            "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
            "contentType": "application/jsonl",
            "timeCreated": rfc3339(stored["created_at"]),
            "updated": rfc3339(stored["created_at"]),
        }

    def _stored(self, bucket: str, name: str) -> dict[str, Any]:
        found = self.store.get_file(_object_id(bucket, name))
        if found is None or found["purpose"] != GCS:
            raise ApiError(404, f"No such object: {bucket}/{name}")
        return found

    def get_object(self, bucket: str, name: str, query: dict[str, str]) -> Any:
        stored = self._stored(bucket, name)
        return self.store.file_bytes(stored["id"]) if query.get("alt") == "media" else self._object(stored)

    def media(self, bucket: str, name: str) -> bytes:
        return self.store.file_bytes(self._stored(bucket, name)["id"])

    def list_objects(self, bucket: str, query: dict[str, str]) -> dict[str, Any]:
        self._jobs_outputs()  # an ended job's output is there once it ended, whoever looks
        prefix = f"{bucket}/{query.get('prefix', '')}"
        found = sorted(
            (f for f in self.store.list_files() if f["purpose"] == GCS and f["filename"].startswith(prefix)),
            key=lambda f: f["filename"],
        )
        try:
            start, size = int(query.get("pageToken") or 0), int(query.get("maxResults") or 1000)
        except ValueError:
            raise bad_request("pageToken and maxResults must be integers.") from None
        page = found[start : start + max(1, min(size, 1000))]
        out: dict[str, Any] = {"kind": "storage#objects", "items": [self._object(f) for f in page]}
        if start + len(page) < len(found):
            out["nextPageToken"] = str(start + len(page))
        return out

    # --- batch prediction jobs ---------------------------------------------------------------------

    def create_job(self, project: str, location: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request("The request body must be a BatchPredictionJob.")
        model = str(body.get("model") or "")
        if not model.startswith((_PUBLISHED, claude.PUBLISHED)):
            raise bad_request(f"model must be a publisher model ({_PUBLISHED}<model>), not {model!r}.")
        publisher = _PUBLISHED if model.startswith(_PUBLISHED) else claude.PUBLISHED
        sent = model.removeprefix(publisher)
        if publisher == _PUBLISHED:
            self._check_model(project, location, sent)
        else:
            claude.check_model(project, location, sent)
        source = (body.get("inputConfig") or {}).get("gcsSource") or {}
        uris = source.get("uris") if isinstance(source, dict) else None
        dest = ((body.get("outputConfig") or {}).get("gcsDestination") or {}).get("outputUriPrefix")
        if not isinstance(uris, list) or len(uris) != 1 or not str(uris[0]).startswith("gs://"):
            raise bad_request("inputConfig.gcsSource.uris: one gs:// URI of a JSONL file is required.")
        if not isinstance(dest, str) or not dest.startswith("gs://"):
            raise bad_request("outputConfig.gcsDestination.outputUriPrefix: a gs:// prefix is required.")
        data = self.media(*_split(uris[0]))
        lines, problems = (
            claude.job_lines(data, sent, uris[0]) if publisher != _PUBLISHED else self._lines(data, sent, uris[0])
        )
        if not lines:
            raise bad_request(f"{uris[0]} holds no requests.")
        native = {
            "api": NAME if publisher == _PUBLISHED else claude.NAME,
            "model": sent,
            "publisher": publisher,
            "display_name": str(body.get("displayName") or ""),
            "project": project,
            "location": location,
            "input": uris[0],
            "dest": dest,
            "n": len(lines),
            "problems": problems,
        }
        record = run(self.store, lines, self.seed, self.faults, native, hashlib.sha256(data).hexdigest())
        return self._job(record)

    def _lines(self, data: bytes, sent: str, uri: str) -> tuple[list[bytes], dict[str, str]]:
        """A Gemini job's input as OpenAI batch lines, and the refused requests' reasons."""
        lines: list[bytes] = []
        problems: dict[str, str] = {}
        requests: list[Any] = []
        for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if not raw.strip():
                continue
            try:
                request = json.loads(raw).get("request")
            except (ValueError, AttributeError):
                raise bad_request(f"{uri} line {number}: each line is a JSON object with a request.") from None
            key = _key(request, len(requests))
            requests.append(request)
            parts = _chat_parts(request)
            problem = _problem(request, sent) if parts is not None else NO_CONTENTS
            if parts is None or problem is not None:
                problems[key] = problem or NO_CONTENTS
                lines.append(to_chat(key, sent, [], {}))
                continue
            lines.append(to_chat(key, sent, *parts))
        return lines, problems

    def _check_model(self, project: str, location: str, model: str) -> None:
        if names.is_sim(model) and names.GOOGLE.fullmatch(model):
            return
        if model not in names.gemini():
            raise ApiError(
                404,
                f"Publisher Model `projects/{project}/locations/{location}/{_PUBLISHED}{model}` was not found "
                "or your project does not have access to it.",
            )

    def _record(self, job: str) -> dict[str, Any]:
        found = (record_of(self.store, _batch_id(job), mark) for mark in MARKS) if _batch_id(job) else iter(())
        record = next((r for r in found if r is not None), None)
        if record is None:
            raise ApiError(404, f"The BatchPredictionJob {job} does not exist.")
        return record

    def get_job(self, job: str) -> dict[str, Any]:
        return self._job(self._record(job))

    def cancel_job(self, job: str) -> dict[str, Any]:
        try:
            batches.cancel(self.store, self._record(job))
        except ApiError:
            raise ApiError(400, f"The BatchPredictionJob {job} has ended and cannot be cancelled.") from None
        return {}

    def list_jobs(self, query: dict[str, str]) -> dict[str, Any]:
        jobs = [self._job(r) for r in self._records()]
        try:
            start, size = int(query.get("pageToken") or 0), int(query.get("pageSize") or 100)
        except ValueError:
            raise bad_request("pageSize and pageToken must be integers.") from None
        page = jobs[start : start + max(1, min(size, 1000))]
        out: dict[str, Any] = {"batchPredictionJobs": page}
        if start + len(page) < len(jobs):
            out["nextPageToken"] = str(start + len(page))
        return out

    def _records(self) -> list[dict[str, Any]]:
        """The jobs of both publishers, newest first."""
        found = [r for mark in MARKS for r in records_of(self.store, mark)]
        return sorted(found, key=lambda r: r["sim"]["created"], reverse=True)

    def _jobs_outputs(self) -> None:
        for record in self._records():
            self._job(record)

    def _job(self, record: dict[str, Any]) -> dict[str, Any]:
        """The job now; its predictions file is written the first time it is seen ended."""
        batch = batches.current(self.store, record)
        record = self.store.get_batch(record["batch"]["id"]) or record
        sim, status, native = record["sim"], batch["status"], record["sim"]["native"]
        end = (
            batch.get("completed_at") or batch.get("expired_at") or batch.get("cancelled_at") or batch.get("failed_at")
        )
        job: dict[str, Any] = {
            "name": f"projects/{native['project']}/locations/{native['location']}/batchPredictionJobs/"
            + _job_id(batch["id"]),
            "displayName": native["display_name"],
            "model": native.get("publisher", _PUBLISHED) + native["model"],
            "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": [native["input"]]}},
            "outputConfig": {"predictionsFormat": "jsonl", "gcsDestination": {"outputUriPrefix": native["dest"]}},
            "state": _STATES[status],
            "createTime": rfc3339(sim["created"]),
            "updateTime": rfc3339(end or sim["created"]),
        }
        if status == "failed":
            job["error"] = {"code": 3, "message": "The batch input could not be read."}
        elif status in batches.TERMINAL:
            succeeded, errored, never = counts(record, status)
            job["completionStats"] = {
                "successfulCount": str(succeeded),
                "failedCount": str(errored),
                "incompleteCount": str(never),
            }
            job["outputInfo"] = {"gcsOutputDirectory": self._predictions(batch, native, sim["created"])}
        if end:
            job["endTime"] = rfc3339(end)
        return job

    def _predictions(self, batch: dict[str, Any], native: dict[str, Any], created: float) -> str:
        """The ended job's output directory, its predictions file written once."""
        bucket, prefix = _split(native["dest"])
        stamp = rfc3339(created).replace(":", "").replace("-", "").replace(".", "")
        directory = (
            f"{prefix.rstrip('/')}/prediction-model-{stamp}" if prefix.strip("/") else f"prediction-model-{stamp}"
        )
        name = f"{directory}/predictions.jsonl"
        if self.store.get_file(_object_id(bucket, name)) is None and native["api"] == claude.NAME:
            given = claude.inputs(self.media(*_split(native["input"])))
            out = []
            for line in result_lines(self.store, batch):
                converted = self._line(batch["id"], line, native)
                if converted is None:
                    continue  # never ran: not exported
                failed = self._status(converted["error"]) if "error" in converted else None
                entry = claude.row(batch["id"], line, given.get(line["custom_id"], {}), failed)
                out.append(batches.dumps(entry) + "\n")
            self.put_object(bucket, name, "".join(out).encode("utf-8"))
        elif self.store.get_file(_object_id(bucket, name)) is None:
            data = self.media(*_split(native["input"]))
            requests = [json.loads(x).get("request") for x in data.decode("utf-8").splitlines() if x.strip()]
            by_key = {_key(r, i): r for i, r in enumerate(requests)}
            out = []
            for line in result_lines(self.store, batch):
                row = self._row(batch, line, native, by_key.get(line["custom_id"]))
                if row is not None:
                    out.append(batches.dumps(row) + "\n")
            self.put_object(bucket, name, "".join(out).encode("utf-8"))
        return f"gs://{bucket}/{directory}"

    def _row(
        self, batch: dict[str, Any], line: dict[str, Any], native: dict[str, Any], request: Any
    ) -> dict[str, Any] | None:
        converted = self._line(batch["id"], line, native)
        if converted is None:
            return None  # never ran: not exported
        row: dict[str, Any] = {
            "status": "",
            "processed_time": rfc3339(batch.get("completed_at") or 0),
            "request": request,
        }
        if "response" in converted:
            row["response"] = converted["response"]
            return row
        row["status"] = self._status(converted["error"])
        return row

    @staticmethod
    def _status(error: Any) -> str:
        """A failed row's `status` (the simulator's wording: the documentation shows none)."""
        status, reason = _HTTP.get(error.get("code"), (500, "Internal Server Error"))
        return f"{reason}: " + json.dumps(
            {"error": {"code": status, "message": error.get("message"), "status": error.get("status")}}
        )

    def vertex_generate(self, project: str, location: str, model: str, request: Any, call_id: str | None) -> Any:
        """One request answered at once, as the same request in a batch is: the call's id (the
        label value its line carries) read back as the batch's key is (`_key`)."""
        self._check_model(project, location, model)
        key = our_id(call_id, VERTEX) if call_id else None
        return self.generate(model, request, key or call_id)

    def token(self, body: bytes) -> dict[str, Any]:
        """Google's OAuth 2.0 token endpoint (a service account key file's `token_uri`): a signed
        JWT (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, as google-auth's service
        account credentials send it) or a refresh token exchanged for an access token; the
        signature is not checked."""
        if b"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer" not in body and (
            b"grant_type=refresh_token" not in body
        ):
            raise ApiError(400, "unsupported_grant_type")
        token = "ya29.simulated-" + hashlib.sha256(body).hexdigest()[:16]
        return {"access_token": token, "expires_in": 3599, "token_type": "Bearer", "scope": _SCOPE}

    def publisher_models(self) -> dict[str, Any]:
        listed = sorted(names.gemini() | {m for m in names.SIMULATED if names.GOOGLE.fullmatch(m)})
        return {"publisherModels": [{"name": _PUBLISHED + m} for m in listed]}


def _key(request: Any, row: int) -> str:
    """A request's id: a label value that maps back to an id of lexpilot-batch's, else its row."""
    labels = request.get("labels") if isinstance(request, dict) else None
    for value in labels.values() if isinstance(labels, dict) else ():
        found = our_id(value, VERTEX) if isinstance(value, str) else None
        if found is not None:
            return found
    return f"row-{row}"


def _related(content_type: str, body: bytes) -> tuple[dict[str, Any], bytes]:
    """A `multipart/related` upload's metadata (its JSON part) and data (its other part)."""
    boundary = next((p.split("=", 1)[1].strip('"') for p in content_type.split(";") if "boundary=" in p), None)
    if not content_type.startswith("multipart/related") or not boundary:
        raise bad_request("A multipart upload is multipart/related with a boundary.")
    parts = [p for p in body.split(b"--" + boundary.encode()) if p.strip() not in (b"", b"--")]
    if len(parts) != 2:
        raise bad_request("A multipart upload holds its metadata and its data.")
    chunks = [p.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in p else b"" for p in parts]
    try:
        metadata = json.loads(chunks[0].strip() or b"{}")
    except ValueError:
        raise bad_request("The first part of a multipart upload is its JSON metadata.") from None
    return metadata, chunks[1].removesuffix(b"\r\n")


_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_V = r"/(?:v1|v1beta1)"
_JOBS = _V + r"/projects/([^/]+)/locations/([^/]+)/batchPredictionJobs"

API = SimulatedApi[VertexApi](
    NAME,
    VERTEX,
    VertexApi,
    (
        Route(
            "POST",
            r"/upload/storage/v1/b/([^/]+)/o",
            "vertex_gcs_upload",
            lambda a, r: a.upload(r.args[0], r.query, r.headers, r.body),
        ),
        Route("GET", r"/storage/v1/b/([^/]+)/o", "vertex_gcs_list", lambda a, r: a.list_objects(r.args[0], r.query)),
        Route(
            "GET",
            r"/storage/v1/b/([^/]+)/o/(.+)",
            "vertex_gcs_get",
            lambda a, r: a.get_object(r.args[0], r.args[1], r.query),
        ),
        Route("GET", r"/download/storage/v1/b/([^/]+)/o/(.+)", "vertex_gcs_get", lambda a, r: a.media(*r.args)),
        Route("POST", _JOBS, "vertex_create", lambda a, r: a.create_job(r.args[0], r.args[1], r.json()), creates=True),
        Route("GET", _JOBS, "vertex_list", lambda a, r: a.list_jobs(r.query)),
        Route("GET", _JOBS + r"/([^/:]+)", "vertex_get", lambda a, r: a.get_job(r.args[2])),
        Route("POST", _JOBS + r"/([^/:]+):cancel", "vertex_cancel", lambda a, r: a.cancel_job(r.args[2])),
        Route(
            "POST",
            _V + r"/projects/([^/]+)/locations/([^/]+)/publishers/google/models/([^/:]+):generateContent",
            "vertex_generate",
            lambda a, r: a.vertex_generate(r.args[0], r.args[1], r.args[2], r.json(), r.call_id),
            chat=True,
        ),
        Route("GET", _V + r"/publishers/google/models", "vertex_models", lambda a, r: a.publisher_models()),
        Route("POST", r"/token", "vertex_oauth_token", lambda a, r: a.token(r.body), keyless=True),
    ),
    prefixes=("/v1/projects", "/v1beta1/", "/upload/storage/", "/storage/v1/", "/download/storage/", "/token"),
    base_path="",  # the server itself (`GOOGLE_VERTEX_BASE_URL`), Cloud Storage's routes beside Vertex's
    error_body=error_body,
    overloaded=503,
)
