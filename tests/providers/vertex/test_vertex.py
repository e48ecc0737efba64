"""Vertex AI batch prediction (issue 50): the `vertex/` folder held to Google's own documented
shapes (`tests/providers/documented/vertex.json`, read by `test_documented`), the simulated Vertex
and Cloud Storage routes driven by Google's official SDKs unmodified (`google-genai` in its Vertex
mode, `google-cloud-storage`), with Application Default Credentials found and refreshed by
google-auth itself (a service account key file whose token URI is the simulated provider's), and
the backend's own behaviour: ids carried in labels, the tag in the output prefix, a cancelled
job's partial output, a broken-off download fetched again. What every native API goes through (a
lost create, groups sent at once, faults, damaged downloads, echoed keys) is
`tests/scenarios/`'s, Vertex among them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.engine.answers import judge_line
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.batch import BatchSource
from lexpilot_batch.providers.routing.endpoints import Endpoint, simulated_endpoint
from lexpilot_batch.providers.vertex import batch, gcs, ids, results, settings
from lexpilot_batch.providers.vertex.spec import LIMITS
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from tests.helpers.vertex import BUCKET, service_account_file

pytest.importorskip("google.genai")

CID = "1a2b3c4d-17-lca.u.gen-1-9f8e7d6c0a1b2c3d"


def _lines(n: int) -> bytes:
    rows = []
    for i in range(n):
        cid = CID.replace("-17-", f"-{i}-")
        request = {
            "contents": [{"role": "user", "parts": [{"text": f"问题 {i}"}]}],
            "generationConfig": {"maxOutputTokens": 64},
        }
        rows.append(json.dumps({"key": ids.line_id(cid), "request": request}, ensure_ascii=False) + "\n")
    return "".join(rows).encode("utf-8")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SimulatedServer]:
    with SimulatedServer(tmp_path / "sim", parse_faults("latency=0.3")) as running:
        yield running


def _finish(backend: batch.VertexBatchBackend, job_id: str) -> Any:
    info = backend.retrieve(job_id)
    for _ in range(200):
        if info.terminal:
            return info
        time.sleep(0.05)
        info = backend.retrieve(job_id)
    raise AssertionError(f"job {job_id} did not end: {info.status}")


# --- ids and tags -------------------------------------------------------------------------------


def test_an_id_rides_in_a_label_and_comes_back_only_to_its_own_workspace() -> None:
    mapped = ids.line_id(CID)
    assert ids.LABEL_VALUE.fullmatch(mapped) and mapped != CID
    assert ids.our_id(mapped) == CID and ids.our_id(mapped, "9f8e7d6c") == CID
    assert ids.our_id(mapped, "00000000") is None  # another workspace's request
    assert ids.our_id(ids.line_id("Case.Ünï-1")) == "Case.Ünï-1"  # upper case and non-ASCII, mapped and back
    with pytest.raises(ValueError, match="63 characters"):
        ids.line_id("x" * 64)


def test_the_workspace_s_tag_is_read_back_from_the_output_prefix_it_was_written_into() -> None:
    tag = {"lexpilot_workspace": "w1", "lexpilot_file": "requests/r1 é/a.jsonl", "lexpilot_sha256": "ab" * 16}
    dest = f"gs://b/some/prefix/{batch.TAGGED}{batch.tag_path(tag)}/0123456789ab/"
    assert batch.tag_of(dest) == tag
    assert batch.tag_of(dest + "prediction-model-2026/") == tag  # the output directory under it
    assert batch.tag_of("gs://b/their/own/output") == {}


# --- settings -----------------------------------------------------------------------------------


def test_a_real_run_names_what_it_lacks_before_anything_is_sent() -> None:
    endpoint = Endpoint(
        "eval", settings.DEFAULT_URL, "GOOGLE_OAUTH_ACCESS_TOKEN", None, "batch", "vertex/gemini-2.5-flash"
    )
    with pytest.raises(ConfigError, match="GOOGLE_CLOUD_PROJECT"):
        settings.settings_of(endpoint, {})
    with pytest.raises(ConfigError, match="LEXPILOT_VERTEX_BUCKET"):
        settings.settings_of(endpoint, {"GOOGLE_CLOUD_PROJECT": "p"})
    env = {"GOOGLE_CLOUD_PROJECT": "p", "LEXPILOT_VERTEX_BUCKET": "gs://b/x/y/", "GOOGLE_CLOUD_LOCATION": "us-east4"}
    found = settings.settings_of(endpoint, env)
    # The default endpoint: google-genai picks the location's own; Cloud Storage is Google's.
    assert (found.project, found.location, found.bucket, found.prefix) == ("p", "us-east4", "b", "x/y/")
    assert found.vertex_url is None and found.storage_url == "https://storage.googleapis.com"


def test_an_access_token_in_its_variable_is_used_instead_of_adc_and_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from lexpilot_batch.util import redaction

    monkeypatch.setattr(redaction, "_registered", {})
    token = "ya29.a0AfH6SMB-not-a-real-token-0123456789"
    endpoint = Endpoint(
        "eval", settings.DEFAULT_URL, "GOOGLE_OAUTH_ACCESS_TOKEN", None, "batch", "vertex/x", keyless=True
    )
    assert endpoint.require_key() == ""  # keyless: nothing is asked for
    found = settings.credentials(endpoint, {"GOOGLE_OAUTH_ACCESS_TOKEN": token})
    assert found.token == token and found.valid
    assert redaction.redact(f"Bearer {token}") == "Bearer [redacted GOOGLE_OAUTH_ACCESS_TOKEN]"


# --- the official SDKs on the simulated routes ------------------------------------------------------


def test_google_genai_s_vertex_client_creates_gets_lists_and_cancels_jobs_on_the_simulated_routes(
    server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """google-genai's own Vertex client, credentials from google-auth's own ADC search (a service
    account file), the simulated provider as its base URL: the SDK's request converters
    (`_CreateBatchJobParameters_to_vertex`) and response types (`BatchJob`) meet the routes."""
    import google.auth
    from google import genai

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account_file(tmp_path, server.root_url)))
    credentials, _ = google.auth.default(scopes=list(settings.SCOPES))
    client = genai.Client(
        vertexai=True,
        project="p1",
        location="us-central1",
        credentials=credentials,
        http_options={"base_url": server.root_url, "api_version": "v1"},
    )
    from google.auth.transport.requests import AuthorizedSession

    gcs.Gcs(AuthorizedSession(credentials), server.root_url, 10.0).upload(
        BUCKET, "in/a.jsonl", batch.vertex_lines(_lines(3))
    )
    made: Any = client.batches.create(
        model="gemini-2.5-flash",
        src=f"gs://{BUCKET}/in/a.jsonl",
        config={"display_name": "sdk job", "dest": f"gs://{BUCKET}/out"},
    )
    assert made.name.startswith("projects/p1/locations/us-central1/batchPredictionJobs/")
    assert made.model == "publishers/google/models/gemini-2.5-flash" and made.display_name == "sdk job"
    assert made.src.gcs_uri == [f"gs://{BUCKET}/in/a.jsonl"] and made.dest.gcs_uri == f"gs://{BUCKET}/out"
    job: Any = made
    for _ in range(200):
        if job.state.value in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"):
            break
        time.sleep(0.05)
        job = client.batches.get(name=made.name)
    assert job.state.value == "JOB_STATE_SUCCEEDED" and job.completion_stats.successful_count == 3
    assert job.output_info.gcs_output_directory.startswith(f"gs://{BUCKET}/out/prediction-model-")
    assert [j.name for j in client.batches.list(config={"page_size": 1})] == [made.name]  # a page at a time
    other: Any = client.batches.create(model="gemini-2.5-flash", src=f"gs://{BUCKET}/in/a.jsonl")  # dest: the SDK's own
    client.batches.cancel(name=other.name)
    seen: Any = client.batches.get(name=other.name)
    assert seen.state.value in ("JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED")
    with pytest.raises(genai.errors.ClientError) as refused:
        client.batches.create(model="gemini-9-ultra", src=f"gs://{BUCKET}/in/a.jsonl")
    assert refused.value.code == 404 and "Publisher Model" in str(refused.value.message)


def test_google_cloud_storage_uploads_lists_and_downloads_on_the_simulated_routes(
    server: SimulatedServer, tmp_path: Path
) -> None:
    """The official Cloud Storage client, unmodified, on the routes the backend's three calls use:
    its multipart upload, its listing and its media download (credentials: a service account's)."""
    storage = pytest.importorskip("google.cloud.storage")
    from google.oauth2 import service_account

    key = service_account_file(tmp_path, server.root_url)
    credentials = service_account.Credentials.from_service_account_file(str(key), scopes=list(settings.SCOPES))
    client = storage.Client(project="p1", credentials=credentials, client_options={"api_endpoint": server.root_url})
    data = batch.vertex_lines(_lines(2))
    client.bucket(BUCKET).blob("in/b.jsonl").upload_from_string(data, content_type="application/jsonl")
    listed = list(client.list_blobs(BUCKET, prefix="in/"))
    assert [(b.name, b.size) for b in listed] == [("in/b.jsonl", len(data))]
    assert client.bucket(BUCKET).blob("in/b.jsonl").download_as_bytes() == data
    from google.auth.transport.requests import AuthorizedSession

    ours = gcs.Gcs(AuthorizedSession(credentials), server.root_url, 10.0)
    assert [o.name for o in ours.objects(BUCKET, "in/")] == ["in/b.jsonl"]  # ours reads what it wrote
    assert b"".join(ours.chunks(BUCKET, "in/b.jsonl")) == data


# --- the backend ----------------------------------------------------------------------------------


def _backend(server: SimulatedServer) -> batch.VertexBatchBackend:
    return batch.VertexBatchBackend(
        simulated_endpoint("eval", server.native_url("vertex"), "vertex/gemini-sim"), LIMITS, 10.0, 5
    )


def test_a_job_s_predictions_come_back_keyed_by_the_ids_its_labels_carried(
    server: SimulatedServer, tmp_path: Path
) -> None:
    backend = _backend(server)
    path = tmp_path / "in.jsonl"
    path.write_bytes(_lines(4))
    uploaded = backend.upload(path, "in.jsonl")
    assert uploaded.startswith("gs://lexpilot-simulated/lexpilot/input/") and uploaded.endswith("/in.jsonl")
    tag = {"lexpilot_workspace": "w1", "lexpilot_file": "requests/in.jsonl"}
    made = backend.create(uploaded, tag, None, BatchSource(path, "gemini-sim"))
    assert made.metadata == tag and made.input_file_id == uploaded
    assert [b.metadata for b in backend.batches()] == [tag]  # found again by its tag
    done = _finish(backend, made.id)
    assert done.status == "completed" and done.output_file_id
    out = tmp_path / "out.jsonl"
    backend.download(done.output_file_id, out)
    lines = [results.result(json.loads(x), "9f8e7d6c") for x in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["custom_id"] for line in lines) == sorted(CID.replace("-17-", f"-{i}-") for i in range(4))
    assert all(judge_line(line, "text", 0)[0] for line in lines)


def test_a_cancelled_job_keeps_the_rows_it_finished_and_they_are_downloaded(tmp_path: Path) -> None:
    """`stall_batch`: the job stops part-way; cancelled, Vertex exports "all completed rows"."""
    with SimulatedServer(tmp_path / "sim", parse_faults("latency=0.3,stall_batch=1,seed=3")) as server:
        backend = _backend(server)
        path = tmp_path / "in.jsonl"
        path.write_bytes(_lines(12))
        made = backend.create(
            backend.upload(path, "in.jsonl"), {"lexpilot_file": "f"}, None, BatchSource(path, "gemini-sim")
        )
        time.sleep(0.5)
        assert backend.retrieve(made.id).status == "in_progress"  # stalled
        cancelled = backend.cancel(made.id)
        assert cancelled.status in ("cancelling", "cancelled")
        done = _finish(backend, made.id)
        assert done.status == "cancelled" and done.output_file_id
        out = tmp_path / "out.jsonl"
        backend.download(done.output_file_id, out)
        kept = [results.result(json.loads(x)) for x in out.read_text(encoding="utf-8").splitlines()]
        assert 0 < len(kept) < 12 and all(judge_line(line, "text", 0)[0] for line in kept)


def test_a_download_that_breaks_off_is_fetched_again_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch.clock, "pause", lambda seconds: None)
    with SimulatedServer(tmp_path / "sim", parse_faults("latency=0.2,cut_download=0.5,seed=1")) as server:
        backend = _backend(server)
        path = tmp_path / "in.jsonl"
        path.write_bytes(_lines(5))
        made = backend.create(backend.upload(path, "in.jsonl"), {}, None, BatchSource(path, "gemini-sim"))
        done = _finish(backend, made.id)
        outs = []
        for i in range(4):
            out = tmp_path / f"out{i}.jsonl"
            backend.download(str(done.output_file_id), out)
            outs.append(out.read_bytes())
        assert server.stats["cut_download"] > 0, server.stats
        assert len(set(outs)) == 1 and len(outs[0].splitlines()) == 5


def test_a_failed_row_reads_as_the_status_it_names_and_never_as_an_answer() -> None:
    row = {
        "status": 'Bad Request: {"error": {"code": 400, "message": "bad field", "status": "INVALID_ARGUMENT"}}',
        "request": {"labels": {ids.LABEL: ids.line_id(CID)}},
    }
    line = results.result(row)
    assert line["custom_id"] == CID and line["response"]["status_code"] == 400
    assert line["response"]["body"]["error"]["message"] == "bad field"
    assert results.result({"status": "Service Unavailable"})["response"]["status_code"] == 503
    assert results.result({"status": "something new"})["response"]["status_code"] == 500  # tried again
    assert not judge_line(line, "text", 0)[0]


# --- a study --------------------------------------------------------------------------------------


def test_a_study_of_a_vertex_gemini_model_runs_on_the_simulated_provider_to_its_report(
    in_process: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --provider simulated` with `vertex/gemini-2.5-flash` in every role: its batches go
    through the simulated Vertex and Cloud Storage routes, one job per file, and the report prices
    them from the bundled table's `vertex/` row."""
    monkeypatch.chdir(tmp_path)
    model = "vertex/gemini-2.5-flash"
    roles = ["--user-model", model, "--judge-model", model]
    code, out = in_process(
        ["run", "--stage", "all", "--provider", "simulated", "--run-id", "r1", "--model", model, *roles]
        + ["--limit", "2", "--root", "ws"]
    )
    text = out.decode("utf-8")
    assert code == 0, text[-2000:]
    code, out = in_process(["report", "--format", "csv", "--out", "report.csv", "--root", "ws"])
    assert code == 0, out.decode("utf-8")[-2000:]
    report = (tmp_path / "report.csv").read_text(encoding="utf-8")
    assert model in report
    from lexpilot_batch.simulated.store import Store

    jobs = [
        r
        for r in Store(tmp_path / "ws" / "state" / "simulated").batches_newest_first()
        if r["sim"]["native"]["api"] == "vertex"
    ]
    from lexpilot_batch.state.workspace import Workspace

    with Workspace(tmp_path / "ws", writable=False) as ws:
        files = [dict(r) for r in ws.store.conn.execute("SELECT path, batch_id FROM files WHERE batch_id IS NOT NULL")]
    assert jobs and len(jobs) == len(files)  # one job per file
    [total] = [line.split() for line in text.splitlines() if line.strip().startswith("total ")]
    assert total[-1] != "n/a" and float(total[-1]) >= 0  # priced from the bundled `vertex/` row


def test_a_simulated_job_s_numeric_id_names_its_batch_whatever_its_leading_digits() -> None:
    """(The simulated routes' own: a batch whose id began with zeros was once named by a job id that
    lost them, and its poll answered 404 until the study timed out.)"""
    from lexpilot_batch.simulated.apis.vertex import _batch_id, _job_id

    for batch_id in ("batch_00228bc8513519c3b5cd41d682776c06", "batch_f" + "0" * 31, "batch_0"):
        assert _job_id(batch_id).isdigit() and _batch_id(_job_id(batch_id)) == batch_id
