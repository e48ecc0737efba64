"""AWS Bedrock's batch inference routes of the simulated provider, with the S3 and `InvokeModel`
routes boto3 calls beside them, all under `/bedrock` (one URL for boto3's `bedrock`,
`bedrock-runtime` and `s3` clients: their `endpoint_url`).

Built from botocore's service models (`bedrock/2023-04-20`, `bedrock-runtime/2023-09-30`: each
request checked against its input shape, `sources.service_model`) and AWS's batch inference guide
(https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference.html and its pages on input
data, creating, monitoring, stopping and results; taken 2026-12-06):

- **S3** (path-style, the calls boto3's S3 client signs with `x-amz-content-sha256`, which marks
  these routes): `PutObject`, `GetObject` (a download: the `damaged_download` and `cut_download`
  faults strike it), `HeadObject`, `ListObjectsV2`. A missing object is a 404;
- **create**: `POST /model-invocation-job` (`CreateModelInvocationJob`): the input object is read
  now, one `{"recordId", "modelInput"}` per line; stricter than Bedrock, which fails a job after
  its validation, a job of fewer than 100 records or more than 50,000, an input file not ending
  in `.jsonl`, a record without an alphanumeric `recordId` or a `modelInput` object, or two
  records with one id, is refused at once (400 `ValidationException`). A record Anthropic's
  Messages would refuse (`apis.anthropic`'s checks), or whose `anthropic_version` is not
  "bedrock-2023-05-31", ends with an error line (`errorCode` 400). A `clientRequestToken` already
  used answers the job it made ("Amazon Bedrock ignores the request, but does not return an
  error");
- **jobs**: `GET /model-invocation-job/{id or ARN}`, `GET /model-invocation-jobs` (`nameContains`,
  `statusEquals`, `sortOrder`, `maxResults`, `nextToken`), `POST /model-invocation-job/{id}/stop`,
  `POST /listTagsForResource`. Statuses: `Submitted` while the batch validates, `InProgress`,
  `Completed` (`PartiallyCompleted` when a record failed), `Stopping`, `Stopped`, `Expired`,
  `Failed`; the record counts of `GetModelInvocationJob`;
- **results**: once a job ends (but failed), `<outputUri>/<job id>/<input file name>.out` holds one
  line per record that ran, `{"recordId", "modelInput", "modelOutput": <Claude's Message>}` or
  `"error": {"errorCode", "errorMessage"}` in its place, and `manifest.json.out` the counts. A
  stopped or expired job's records that never ran have no line: what Bedrock writes for them is
  not documented;
- **InvokeModel**: `POST /model/{modelId}/invoke` answers a record's `modelInput` at once with the
  Message the same record gets in a job (`chat`: drawn by the `X-Client-Request-Id` the product
  sends a rehearsal);
- **errors**: `{"__type": "ValidationException", "message"}` (botocore reads the `__type`).

Everything runs on the OpenAI-shaped machinery (`native`), as the other native APIs do.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import PurePosixPath
from typing import Any

from lexpilot_batch.providers.bedrock.spec import NAME as BEDROCK
from lexpilot_batch.providers.lines import our_id
from lexpilot_batch.simulated import batches, chat
from lexpilot_batch.simulated.apis import anthropic as claude
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.native import counts, digest, records_of, result_lines, rfc3339, run, to_chat
from lexpilot_batch.simulated.routes import Handlers, Reply, Request, Route, SimulatedApi
from lexpilot_batch.simulated.sources import service_model

NAME = "bedrock"
PREFIX = "/bedrock"
REGION, ACCOUNT = "us-east-1", "123456789012"
ARN = f"arn:aws:bedrock:{REGION}:{ACCOUNT}:model-invocation-job/"
MIN_RECORDS, MAX_RECORDS = 100, 50_000  # the default quotas (service quotas; `bedrock.spec` cites them)
VERSION = "bedrock-2023-05-31"
RECORD_ID = re.compile(r"[A-Za-z0-9]+")
S3_MARK = "x-amz-content-sha256"  # every S3 call boto3 signs carries it; Bedrock's calls do not
_STATUS = {
    "validating": "Submitted",
    "in_progress": "InProgress",
    "finalizing": "InProgress",
    "cancelling": "Stopping",
    "cancelled": "Stopped",
    "expired": "Expired",
    "failed": "Failed",
}
_TYPES = {
    400: "ValidationException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    409: "ConflictException",
    429: "ThrottlingException",
    503: "ServiceUnavailableException",
}


def invalid(message: str) -> ApiError:
    return ApiError(400, message, code="ValidationException")


def _object_id(bucket: str, key: str) -> str:
    return "s3-" + hashlib.sha256(f"{bucket}/{key}".encode()).hexdigest()[:32]


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


class BedrockApi(Handlers):
    """The routes over one simulated provider's store (objects are its files of purpose `s3`)."""

    _lock = threading.Lock()

    # --- S3 -------------------------------------------------------------------------------------

    def put_object(self, bucket: str, key: str, request: Request) -> Reply:
        data = _decoded(request)
        self.store.add_file(data, f"{bucket}/{key}", "s3", file_id=_object_id(bucket, key))
        return Reply(None, {"ETag": '"' + hashlib.md5(data).hexdigest() + '"'})

    def object_bytes(self, bucket: str, key: str) -> bytes:
        if self.store.get_file(_object_id(bucket, key)) is None:
            raise ApiError(404, f"NoSuchKey: {key}", code="NoSuchKey")
        return self.store.file_bytes(_object_id(bucket, key))

    def head_object(self, bucket: str, key: str) -> Reply:
        size = len(self.object_bytes(bucket, key))
        return Reply(None, {"Content-Length": str(size), "Content-Type": "application/octet-stream"})

    def list_objects(self, bucket: str, query: dict[str, str]) -> Reply:
        if query.get("list-type") != "2":
            raise invalid("the simulated S3 lists with ListObjectsV2 (list-type=2) only")
        prefix = query.get("prefix", "")
        found = sorted(
            (f["filename"].partition("/")[2], f["bytes"])
            for f in self.store.list_files()
            if f["purpose"] == "s3" and f["filename"].startswith(f"{bucket}/{prefix}")
        )
        items = "".join(f"<Contents><Key>{_xml(k)}</Key><Size>{n}</Size></Contents>" for k, n in found)
        body = (
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>{_xml(bucket)}</Name><Prefix>{_xml(prefix)}</Prefix><KeyCount>{len(found)}</KeyCount>"
            f"<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>{items}</ListBucketResult>"
        ).encode()
        return Reply(body, {"Content-Type": "application/xml"})

    # --- batch inference jobs ---------------------------------------------------------------------

    def create(self, body: Any) -> dict[str, Any]:
        problems = service_model.input_problems("bedrock", "CreateModelInvocationJob", body)
        if problems:
            raise invalid("; ".join(problems[:3]))
        with self._lock:  # one token, one job
            token = body.get("clientRequestToken")
            same = [r for r in records_of(self.store, NAME) if token and r["sim"]["native"].get("token") == token]
            if same:
                return {"jobArn": ARN + same[0]["sim"]["native"]["job"]}
            return self._create(body, token)

    def _create(self, body: dict[str, Any], token: str | None) -> dict[str, Any]:
        source = body["inputDataConfig"].get("s3InputDataConfig") or {}
        out = (body["outputDataConfig"].get("s3OutputDataConfig") or {}).get("s3Uri", "")
        if not source.get("s3Uri", "").endswith(".jsonl"):
            raise invalid("inputDataConfig: the simulated jobs read one input file, whose name ends in .jsonl")
        try:
            data = self.object_bytes(*_split(source["s3Uri"]))
        except ApiError:
            raise invalid(f"inputDataConfig: no object at {source['s3Uri']}") from None
        model = body["modelId"]
        records = _records(data)
        if not MIN_RECORDS <= len(records) <= MAX_RECORDS:
            raise invalid(
                f"the input holds {len(records):,} records; a batch inference job for {model} takes "
                f"{MIN_RECORDS:,} to {MAX_RECORDS:,} (Minimum number of records per batch inference job)"
            )
        lines: list[bytes] = []
        problems: dict[str, str] = {}
        for record_id, given in records:
            cid = our_id(record_id, BEDROCK) or record_id
            problem = _problem(model, given)
            if problem is not None:
                problems[cid] = problem
                lines.append(to_chat(cid, model, [], {}))  # refused by the simulated endpoint: an error line
                continue
            lines.append(to_chat(cid, model, *claude._chat_parts(given)))
        job = digest("job", token or "", len(records_of(self.store, NAME)), data[:64])[:12]
        native = {
            "api": NAME,
            "n": len(records),
            "job": job,
            "name": body["jobName"],
            "token": token,
            "model": model,
            "role": body["roleArn"],
            "input": source["s3Uri"],
            "output": out,
            "timeout": body.get("timeoutDurationInHours", 168),
            "tags": body.get("tags") or [],
            "problems": problems,
        }
        run(self.store, lines, self.seed, self.faults, native, hashlib.sha256(data).hexdigest())
        return {"jobArn": ARN + job}

    def _record(self, identifier: str) -> dict[str, Any]:
        job = identifier.rsplit("/", 1)[-1]
        for record in records_of(self.store, NAME):
            if record["sim"]["native"]["job"] == job:
                return record
        raise ApiError(404, f"Could not find job {identifier}", code="ResourceNotFoundException")

    def get(self, identifier: str) -> dict[str, Any]:
        return self._view(self._record(identifier))

    def stop(self, identifier: str) -> dict[str, Any]:
        record = self._record(identifier)
        try:
            batches.cancel(self.store, record)
        except ApiError:
            raise invalid(f"Job {identifier} has ended and cannot be stopped") from None
        return {}

    def tags(self, body: Any) -> dict[str, Any]:
        arn = body.get("resourceARN") if isinstance(body, dict) else None
        if not isinstance(arn, str):
            raise invalid("resourceARN: is required")
        return {"tags": self._record(arn)["sim"]["native"]["tags"]}

    def listing(self, query: dict[str, str]) -> dict[str, Any]:
        try:
            limit = int(query.get("maxResults") or 1000)
            start = int(query.get("nextToken") or 0)
        except ValueError:
            raise invalid("maxResults and nextToken: integers") from None
        if not 1 <= limit <= 1000:
            raise invalid("maxResults: must be 1 to 1000")
        views = [self._view(r) for r in records_of(self.store, NAME)]  # newest first
        if query.get("sortOrder") == "Ascending":
            views.reverse()
        views = [v for v in views if query.get("nameContains", "") in v["jobName"]]
        views = [v for v in views if v["status"] == query.get("statusEquals", v["status"])]
        page = views[start : start + limit]
        more = start + limit < len(views)
        return {"invocationJobSummaries": page, **({"nextToken": str(start + limit)} if more else {})}

    def _view(self, record: dict[str, Any]) -> dict[str, Any]:
        """The job as `GetModelInvocationJob` answers it now; its results written once it ended."""
        batch = batches.current(self.store, record)
        record = self.store.get_batch(record["batch"]["id"]) or record
        sim, native, status = record["sim"], record["sim"]["native"], batch["status"]
        succeeded, errored, never = counts(record, status) if status in batches.TERMINAL else (0, 0, 0)
        said = _STATUS.get(status, "Completed")
        if status == "completed":
            said = "PartiallyCompleted" if errored else "Completed"
        view: dict[str, Any] = {
            "jobArn": ARN + native["job"],
            "jobName": native["name"],
            "modelId": native["model"],
            "roleArn": native["role"],
            "status": said,
            "submitTime": rfc3339(sim["created"]),
            "lastModifiedTime": rfc3339(sim["created"]),
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": native["input"], "s3InputFormat": "JSONL"}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": native["output"]}},
            "timeoutDurationInHours": native["timeout"],
            "jobExpirationTime": rfc3339(sim["created"] + 3600 * native["timeout"]),
            "totalRecordCount": native["n"],
            "processedRecordCount": succeeded + errored,
            "successRecordCount": succeeded,
            "errorRecordCount": errored,
        }
        if native.get("token"):
            view["clientRequestToken"] = native["token"]
        if status == "failed":
            view["message"] = "The input file could not be read."
        elif status in batches.TERMINAL:
            view["endTime"] = rfc3339(batch.get("completed_at") or batch.get("cancelled_at") or sim["created"])
            self._write_results(record, batch, view)
        return view

    def _write_results(self, record: dict[str, Any], batch: dict[str, Any], view: dict[str, Any]) -> None:
        """`<out>/<job>/<input>.out` and `manifest.json.out`, once (the same bytes if twice)."""
        native = record["sim"]["native"]
        folder = f"{native['output'].rstrip('/')}/{native['job']}/"
        bucket, key = _split(folder + PurePosixPath(_split(native["input"])[1]).name + ".out")
        if self.store.get_file(_object_id(bucket, key)) is not None:
            return
        inputs = {
            our_id(rid, BEDROCK) or rid: (rid, given)
            for rid, given in _records(self.object_bytes(*_split(native["input"])))
        }
        out, tokens = [], [0, 0]
        for line in result_lines(self.store, batch):
            cid = line["custom_id"]
            error, response = line.get("error"), line.get("response") or {}
            if isinstance(error, dict) and error.get("code") in ("batch_expired", "batch_cancelled"):
                continue  # never ran: no line
            rid, given = inputs.get(cid, (cid, {}))
            entry: dict[str, Any] = {"recordId": rid, "modelInput": given}
            if response.get("status_code") == 200:
                entry["modelOutput"] = message = claude._message(batch["id"], cid, response["body"])
                tokens[0] += message["usage"]["input_tokens"]
                tokens[1] += message["usage"]["output_tokens"]
            else:
                status = response.get("status_code") if isinstance(response.get("status_code"), int) else 500
                why = native["problems"].get(cid) or ((response.get("body") or {}).get("error") or {}).get("message")
                entry["error"] = {"errorCode": status, "errorMessage": str(why or "Internal server error")}
            out.append(batches.dumps(entry) + "\n")
        manifest = {
            "totalRecordCount": native["n"],
            "processedRecordCount": view["processedRecordCount"],
            "successRecordCount": view["successRecordCount"],
            "errorRecordCount": view["errorRecordCount"],
            "inputTokenCount": tokens[0],
            "outputTokenCount": tokens[1],
        }
        where = _split(folder + "manifest.json.out")
        self.store.add_file(json.dumps(manifest).encode(), "/".join(where), "s3", file_id=_object_id(*where))
        self.store.add_file("".join(out).encode("utf-8"), f"{bucket}/{key}", "s3", file_id=_object_id(bucket, key))

    # --- InvokeModel ------------------------------------------------------------------------------

    def invoke(self, model: str, request: Request) -> dict[str, Any]:
        given = request.json()
        problem = _problem(model, given)
        if problem is not None:
            raise invalid(problem)
        cid = request.call_id
        cid = (our_id(cid, BEDROCK) or cid) if cid else None
        messages, fields = claude._chat_parts(given)
        answer = chat.answer(
            {"model": model, "messages": messages, **fields},
            cid,
            self.seed,
            self.faults,
            self.roll,
            self.store.prefixes,
        )
        return claude._message("sync", cid or answer["id"], answer, "standard")


def _records(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The records of an input file: (recordId, modelInput); a 400 naming the first bad line."""
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            raise invalid(f"line {number}: not a JSON object") from None
        rid = record.get("recordId") if isinstance(record, dict) else None
        if not isinstance(rid, str) or not RECORD_ID.fullmatch(rid) or not isinstance(record.get("modelInput"), dict):
            raise invalid(f'line {number}: a record is {{"recordId": <alphanumeric string>, "modelInput": {{...}}}}')
        if rid in seen:
            raise invalid(f"line {number}: recordId {rid!r} is not unique in the job")
        seen.add(rid)
        out.append((rid, record["modelInput"]))
    return out


def _problem(model: str, given: Any) -> str | None:
    """Why Bedrock would refuse this Claude body for `model`, or None."""
    if not isinstance(given, dict):
        return "the body must be a JSON object"
    if given.get("anthropic_version") != VERSION:
        return f"anthropic_version: must be {VERSION}"
    if "model" in given:
        return "model: extraneous key [model] is not permitted"
    params = {"model": model, **{k: v for k, v in given.items() if k != "anthropic_version"}}
    return claude._problem(params)


def _decoded(request: Request) -> bytes:
    """A PutObject's bytes: as sent, or out of `aws-chunked` framing (`<hex size>[;...]\\r\\n<data>\\r\\n`
    ..., then trailers), which boto3 uses to send a checksum after the body."""
    if "aws-chunked" not in request.headers.get("Content-Encoding", ""):
        return request.body
    out, body, at = bytearray(), request.body, 0
    while True:
        end = body.index(b"\r\n", at)
        size = int(body[at:end].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += body[end + 2 : end + 2 + size]
        at = end + 2 + size + 2


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def error_body(error: ApiError) -> dict[str, Any]:
    """Bedrock's error body: the exception's name as botocore reads it, and its message."""
    kind = error.code if error.code and error.code[0].isupper() else _TYPES.get(error.status, "InternalServerException")
    return {"__type": kind, "message": error.message}


def _s3(method: str, name: str, handler: Any) -> Route[BedrockApi]:
    return Route(method, PREFIX + r"/([a-z0-9][-.a-z0-9]{1,61}[a-z0-9])/(.+)", name, handler, header=S3_MARK)


API = SimulatedApi[BedrockApi](
    NAME,
    BEDROCK,
    BedrockApi,
    (
        Route(
            "POST", PREFIX + r"/model-invocation-job", "bedrock_create", lambda a, r: a.create(r.json()), creates=True
        ),
        Route("GET", PREFIX + r"/model-invocation-jobs", "bedrock_list", lambda a, r: a.listing(r.query)),
        Route("GET", PREFIX + r"/model-invocation-job/([^/]+)", "bedrock_get", lambda a, r: a.get(*r.args)),
        Route("POST", PREFIX + r"/model-invocation-job/([^/]+)/stop", "bedrock_stop", lambda a, r: a.stop(*r.args)),
        Route("POST", PREFIX + r"/listTagsForResource", "bedrock_tags", lambda a, r: a.tags(r.json())),
        Route(
            "POST", PREFIX + r"/model/([^/]+)/invoke", "chat_completion", lambda a, r: a.invoke(r.args[0], r), chat=True
        ),
        _s3("PUT", "bedrock_s3_put", lambda a, r: a.put_object(*r.args, r)),
        _s3("GET", "bedrock_s3_get", lambda a, r: a.object_bytes(*r.args)),
        _s3("HEAD", "bedrock_s3_head", lambda a, r: a.head_object(*r.args)),
        Route(
            "GET",
            PREFIX + r"/([a-z0-9][-.a-z0-9]{1,61}[a-z0-9])",
            "bedrock_s3_list",
            lambda a, r: a.list_objects(r.args[0], r.query),
            header=S3_MARK,
        ),
    ),
    prefixes=(PREFIX + "/",),
    base_path=PREFIX,  # BEDROCK_BASE_URL: boto3's endpoint_url for all three services
    error_body=error_body,
    overloaded=503,  # ServiceUnavailableException (bedrock-runtime's model)
    key=("Authorization", "AWS4-HMAC-SHA256 "),
)
