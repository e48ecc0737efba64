"""AWS Bedrock's batch inference (issue 50): the `bedrock/` folder held to sources we did not write
(AWS's documented examples, `tests/providers/documented/bedrock.json`, read by test_documented;
botocore's service model, whose shapes the simulated routes check), the simulated Bedrock, S3 and
InvokeModel routes driven by boto3 itself, unmodified, pointed at them by `endpoint_url`, and the
job's real minimum of 100 records: a group below it goes through InvokeModel, a file below it is
refused naming it. What every native API goes through (a lost create, groups sent at once, the
fault campaign) is tests/scenarios/test_native_apis.py's, Bedrock among them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.engine.tail import below_minimum, wave_backend
from lexpilot_batch.errors import ConfigError, ProviderError
from lexpilot_batch.providers.backends import BATCH, SIMULATED, SYNC
from lexpilot_batch.providers.batch import TERMINAL, BatchSource, BatchStatus
from lexpilot_batch.providers.bedrock import aws, batch, errors, ids, lines, results
from lexpilot_batch.providers.bedrock.contract import claude_name, problems
from lexpilot_batch.providers.bedrock.spec import LIMITS
from lexpilot_batch.providers.routing.endpoints import Endpoint, simulated_endpoint
from lexpilot_batch.providers.routing.routes import RouteRules, resolve_route
from lexpilot_batch.simulated import SimulatedServer, parse_faults

boto3 = pytest.importorskip("boto3")
from botocore.config import Config  # noqa: E402 - boto3 first, skipping without the extra
from botocore.exceptions import ClientError, NoCredentialsError  # noqa: E402

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
TAG = "0123abcd"
BUCKET = "lexpilot-simulated"


def _record(i: int) -> str:
    body = {"anthropic_version": lines.VERSION, "max_tokens": 64, "messages": [{"role": "user", "content": f"Q{i}?"}]}
    return json.dumps({"recordId": ids.line_id(f"r1-{i}-t-1-abc", TAG), "modelInput": body}) + "\n"


@pytest.fixture
def server(tmp_path: Path) -> Any:
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as running:
        yield running


def _client(server: SimulatedServer, service: str) -> Any:
    """boto3's own client, unmodified, at the simulated routes (path-style S3, as for any double)."""
    return boto3.client(
        service,
        endpoint_url=server.native_url("bedrock"),
        region_name="us-east-1",
        aws_access_key_id="simulated",
        aws_secret_access_key="sk-simulated",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def _wait(bedrock: Any, arn: str) -> dict[str, Any]:
    for _ in range(400):
        job = bedrock.get_model_invocation_job(jobIdentifier=arn)
        if batch.STATUSES[job["status"]] in TERMINAL:
            return dict(job)
        time.sleep(0.05)
    raise AssertionError(f"job {arn} never ended")


# --- boto3 against the simulated routes ---------------------------------------------------------


def test_boto3_puts_lists_and_reads_objects_and_runs_a_job_on_the_simulated_routes(server: SimulatedServer) -> None:
    s3, bedrock = _client(server, "s3"), _client(server, "bedrock")
    data = "".join(_record(i) for i in range(120)).encode()
    s3.put_object(Bucket=BUCKET, Key="in/a.jsonl", Body=data)
    assert s3.head_object(Bucket=BUCKET, Key="in/a.jsonl")["ContentLength"] == len(data)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="in/")["Contents"]] == ["in/a.jsonl"]
    assert s3.get_object(Bucket=BUCKET, Key="in/a.jsonl")["Body"].read() == data
    request = {
        "jobName": "lexpilot-w-1",
        "roleArn": "arn:aws:iam::123456789012:role/batch",
        "clientRequestToken": "token1",
        "modelId": MODEL,
        "inputDataConfig": {"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/in/a.jsonl"}},
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
        "timeoutDurationInHours": 24,
        "tags": [{"key": "lexpilot_file", "value": "requests/w0001/a.jsonl"}],
    }
    arn = bedrock.create_model_invocation_job(**request)["jobArn"]
    # The same token again is the same job ("Amazon Bedrock ignores the request").
    assert bedrock.create_model_invocation_job(**request)["jobArn"] == arn
    job = _wait(bedrock, arn)
    assert job["status"] == "Completed" and job["totalRecordCount"] == job["successRecordCount"] == 120
    listed = bedrock.list_model_invocation_jobs(nameContains="lexpilot-", sortOrder="Descending")
    assert [j["jobArn"] for j in listed["invocationJobSummaries"]] == [arn]
    assert bedrock.list_tags_for_resource(resourceARN=arn)["tags"] == request["tags"]
    folder = f"out/{arn.rsplit('/', 1)[-1]}/"
    out = s3.get_object(Bucket=BUCKET, Key=folder + "a.jsonl.out")["Body"].read().decode()
    read = [results.result(json.loads(line), TAG) for line in out.splitlines()]
    assert sorted(r["custom_id"] for r in read) == sorted(f"r1-{i}-t-1-abc" for i in range(120))
    assert all(r["response"]["status_code"] == 200 for r in read)
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=folder + "manifest.json.out")["Body"].read())
    assert manifest["totalRecordCount"] == manifest["successRecordCount"] == 120


def test_the_simulated_routes_refuse_what_bedrock_refuses_in_its_error_shape(server: SimulatedServer) -> None:
    s3, bedrock, runtime = _client(server, "s3"), _client(server, "bedrock"), _client(server, "bedrock-runtime")
    s3.put_object(Bucket=BUCKET, Key="in/small.jsonl", Body="".join(_record(i) for i in range(99)).encode())
    config = {"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/in/small.jsonl"}}
    with pytest.raises(ClientError) as below:
        bedrock.create_model_invocation_job(
            jobName="j",
            roleArn="arn:aws:iam::123456789012:role/batch",
            modelId=MODEL,
            inputDataConfig=config,
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
        )
    failure = errors.failure_of(below.value)
    assert failure is not None and failure.status == 400 and failure.code == "ValidationException"
    assert "99 records" in failure.message and "100" in failure.message
    # botocore's own model: a job name outside `ModelInvocationJobName`'s pattern (boto3 checks
    # lengths and required members itself, not patterns).
    with pytest.raises(ClientError, match="jobName: must match the pattern"):
        bedrock.create_model_invocation_job(
            jobName="-bad",
            roleArn="arn:aws:iam::123456789012:role/batch",
            modelId=MODEL,
            inputDataConfig=config,
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
        )
    with pytest.raises(ClientError) as missing:
        bedrock.get_model_invocation_job(jobIdentifier="abcdefabcdef")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as no_key:
        s3.get_object(Bucket=BUCKET, Key="in/none.jsonl")
    assert errors.failure_of(no_key.value).status == 404  # type: ignore[union-attr]
    body = {"anthropic_version": "2023-06-01", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ClientError, match="anthropic_version"):
        runtime.invoke_model(modelId=MODEL, body=json.dumps(body))


def test_invoke_model_answers_a_record_as_a_job_answers_it(server: SimulatedServer) -> None:
    runtime = _client(server, "bedrock-runtime")
    body = {"anthropic_version": lines.VERSION, "max_tokens": 64, "messages": [{"role": "user", "content": "Q1?"}]}
    answer = json.loads(runtime.invoke_model(modelId=MODEL, body=json.dumps(body))["body"].read())
    assert answer["type"] == "message" and answer["content"][0]["type"] == "text"
    read = results.result({"recordId": ids.line_id("r1-1-t-1-abc", TAG), "modelOutput": answer}, TAG)
    assert read["custom_id"] == "r1-1-t-1-abc" and read["response"]["status_code"] == 200


# --- the backend ------------------------------------------------------------------------------


def _backend(server: SimulatedServer) -> batch.BedrockBatchBackend:
    endpoint = simulated_endpoint("eval", server.native_url("bedrock"), f"bedrock/{MODEL}")
    return batch.BedrockBatchBackend(endpoint, LIMITS, timeout=10.0, max_retries=1)


def test_the_backend_uploads_creates_finds_by_tag_and_reads_the_results(
    server: SimulatedServer, tmp_path: Path
) -> None:
    backend = _backend(server)
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(_record(i) for i in range(100)), encoding="utf-8")
    uri = backend.upload(path, "lexpilot-0123abcd-eval.jsonl")
    assert uri == f"s3://{aws.SIMULATED_S3.removeprefix('s3://')}/input/lexpilot-0123abcd-eval.jsonl"
    tag = {"lexpilot_workspace": "w" * 32, "lexpilot_file": "requests/w0001/eval é.jsonl", "lexpilot_create": "1"}
    made = backend.create(uri, tag, None, BatchSource(path, MODEL))
    # A fresh backend (a new command) finds it again by its tag, read from the job's tags.
    again = _backend(server)
    assert again.find(tag) is not None and again.find(tag).id == made.id  # type: ignore[union-attr]
    info = again.retrieve(made.id)
    for _ in range(400):
        if info.terminal:
            break
        time.sleep(0.05)
        info = again.retrieve(made.id)
    assert info.status == BatchStatus.COMPLETED and info.request_counts == {"total": 100, "completed": 100, "failed": 0}
    assert info.output_file_id is not None
    dest = tmp_path / "out.jsonl"
    again.download(info.output_file_id, dest)
    read = [results.result(json.loads(x), TAG) for x in dest.read_text(encoding="utf-8").splitlines()]
    assert len(read) == 100 and all(r["response"]["status_code"] == 200 for r in read)


def test_a_stopped_job_keeps_what_it_ran_and_its_other_records_are_asked_again(tmp_path: Path) -> None:
    with SimulatedServer(tmp_path / "sim", parse_faults("latency=2")) as server:  # stopped on its way
        _stop_part_way(_backend(server), tmp_path)


def _stop_part_way(backend: batch.BedrockBatchBackend, tmp_path: Path) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(_record(i) for i in range(150)), encoding="utf-8")
    made = backend.create(backend.upload(path, "stop.jsonl"), {"lexpilot_file": "x"}, None, BatchSource(path, MODEL))
    time.sleep(0.5)  # a quarter of its records run
    info = backend.cancel_live(made.id)
    for _ in range(400):
        if info.terminal:
            break
        time.sleep(0.05)
        info = backend.retrieve(made.id)
    assert info.status == BatchStatus.CANCELLED and info.output_file_id is not None
    assert info.output_file_id.startswith(batch.PARTIAL)
    dest = tmp_path / "partial.jsonl"
    backend.download(info.output_file_id, dest)
    ran = [json.loads(x) for x in dest.read_text(encoding="utf-8").splitlines()]
    # What ran is there, each record once, read as ours; what never ran has no line (and is asked again).
    assert len({r["recordId"] for r in ran}) == len(ran) < 150
    assert len(ran) == info.request_counts["completed"] + info.request_counts["failed"]
    assert all(ids.our_id(r["recordId"], TAG) for r in ran)


def test_a_file_outside_a_job_s_quotas_is_refused_before_anything_is_sent(
    server: SimulatedServer, tmp_path: Path
) -> None:
    backend = _backend(server)
    path = tmp_path / "small.jsonl"
    path.write_text("".join(_record(i) for i in range(99)), encoding="utf-8")
    with pytest.raises(ProviderError, match=r"99 records .* takes 100 to 50,000 records.*InvokeModel"):
        backend.upload(path)


# --- the minimum: a group below it travels through InvokeModel ----------------------------------


@pytest.mark.parametrize("backend", [BATCH, SIMULATED])
def test_a_group_below_the_job_minimum_goes_through_invoke_model(backend: str) -> None:
    choices = {"eval": backend} if backend == SIMULATED else {}
    route = resolve_route("eval", f"bedrock/{MODEL}", "bedrock", RouteRules(choices=choices, environ={}))
    assert route.limits.min_requests == 100
    assert below_minimum(route, 99) and not below_minimum(route, 100)
    assert wave_backend(route, 99, 0) == SYNC and wave_backend(route, 100, 0) == route.backend
    assert wave_backend(route, 150, 200) == SYNC  # --tail-sync as for every provider


def test_a_study_runs_to_a_report_with_jobs_for_large_groups_and_invoke_model_for_small_ones(
    in_process: Any, tmp_path: Path
) -> None:
    """`run --provider simulated` with two runs of the bundled sample: its first wave (180 eval
    requests) is a job, its last ones (a few requests) go through InvokeModel, saying so; the
    report covers the model."""
    import sqlite3

    root = tmp_path / "study"
    args = ["run", "--stage", "all", "--provider", "simulated", "--run-id", "r1", "--run-id", "r2"]
    code, out = in_process([*args, "--model", f"bedrock/{MODEL}", "--root", str(root)])
    text = out.decode("utf-8")
    assert code == 0, text[-3000:]
    assert "at once, through sync or flex" in text and f"== bedrock/{MODEL}" in text
    db = sqlite3.connect(root / "state" / "lexpilot.sqlite3")
    found = db.execute("SELECT backend, n_requests, batch_status FROM files WHERE model LIKE 'bedrock/%'").fetchall()
    db.close()
    assert any(b == SIMULATED and n >= 100 and s == "completed" for b, n, s in found), found
    assert any(b == SYNC and n < 100 for b, n, _ in found), found
    assert all(n >= 100 for b, n, _ in found if b == SIMULATED), found


# --- contract, ids, settings, credentials ------------------------------------------------------


def test_only_claude_goes_through_bedrock_with_bedrock_s_body() -> None:
    assert claude_name("us.anthropic.claude-sonnet-4-5-20250929-v1:0") == "claude-sonnet-4-5-20250929"
    body = lines.empty(MODEL, "", {"max_tokens": 64})["modelInput"]
    body["messages"][0]["content"] = "hi"
    assert problems(MODEL, body) == []
    assert [p.field for p in problems("meta.llama3-70b-instruct-v1:0", body)] == ["model"]
    assert [p.field for p in problems(MODEL, {**body, "model": MODEL})] == ["model"]
    assert [p.field for p in problems(MODEL, {k: v for k, v in body.items() if k != "anthropic_version"})] == [
        "anthropic_version"
    ]


@pytest.mark.parametrize("cid", ["r1-0-t-1-abc", "run.x-12-dcg.q-3-Xz", "案-1", "a_b c"])
def test_record_ids_are_alphanumeric_and_read_back(cid: str) -> None:
    mapped = ids.line_id(cid, TAG)
    assert ids.RECORD_ID.fullmatch(mapped) and ids.our_id(mapped, TAG) == cid
    assert ids.our_id(mapped, "ffffffff") is None


def test_the_bucket_and_role_are_asked_for_by_name_and_credentials_come_from_boto3_s_chain() -> None:
    real = Endpoint("eval", aws.DEFAULT_URL, "AWS_SECRET_ACCESS_KEY", keyless=True)
    with pytest.raises(ConfigError, match=r"BEDROCK_S3_URI=s3://<bucket>/<prefix>.*not set"):
        aws.place(real, {})
    with pytest.raises(ConfigError, match=r"BEDROCK_ROLE_ARN=arn:aws:iam::<account>:role/<name>"):
        aws.place(real, {"BEDROCK_S3_URI": "s3://my-bucket/lexpilot"})
    found = aws.place(
        real, {"BEDROCK_S3_URI": "s3://my-bucket/lexpilot/", "BEDROCK_ROLE_ARN": "arn:aws:iam::123456789012:role/x"}
    )
    assert (found.bucket, found.prefix) == ("my-bucket", "lexpilot/")
    assert real.require_key() == ""  # no key variable is asked for: boto3 finds the credentials
    failure = errors.failure_of(NoCredentialsError())
    assert failure is not None and failure.status == 403 and "default chain" in failure.message


def test_tag_values_outside_the_tag_pattern_are_kept_readable() -> None:
    for value in ("requests/w0001/eval.jsonl", "requests/案/a b.jsonl", ""):
        assert batch.tag_read(batch.tag_value(value)) == value
        assert batch._TAG_VALUE.fullmatch(batch.tag_value(value))
    name = batch.job_name({"lexpilot_workspace": "f" * 32, "lexpilot_file": "x"})
    assert len(name) <= 63 and name.startswith(batch.NAME_PREFIX)
