"""Claude on Vertex AI (issue 50): the `vertex_anthropic/` folder held to Google's and Anthropic's
documented shapes (`tests/providers/documented/vertex-anthropic.json`, read by `test_documented`),
the simulated Vertex routes driven by the official SDKs unmodified (`google-genai`'s Vertex client
creating a Claude job, as Google's own example does; the `anthropic` SDK's `AnthropicVertex` on
`rawPredict`; `google-cloud-storage` reading a job's rows), and the backend's and the call's own
behaviour. What every native API goes through (a lost create, faults, SIGKILLs) is
`tests/scenarios/`'s, this API among them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.engine.answers import judge_line
from lexpilot_batch.providers.anthropic import ids
from lexpilot_batch.providers.batch import BatchSource
from lexpilot_batch.providers.routing.endpoints import simulated_endpoint
from lexpilot_batch.providers.vertex import batch as gemini_batch
from lexpilot_batch.providers.vertex import gcs, settings
from lexpilot_batch.providers.vertex_anthropic import batch, chat, contract, lines, results
from lexpilot_batch.providers.vertex_anthropic.spec import LIMITS, NAME, PUBLISHED
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from tests.helpers.vertex import BUCKET, service_account_file

pytest.importorskip("google.genai")
pytest.importorskip("anthropic")

TAG = "9f8e7d6c"
CID = "1a2b3c4d-17-lca.u.gen-1-9f8e7d6c0a1b2c3d"
MODEL = "claude-haiku-4-5@20251001"


def _cid(i: int) -> str:
    return CID.replace("-17-", f"-{i}-")


def _lines(n: int) -> bytes:
    rows = []
    for i in range(n):
        line = lines.empty(MODEL, "", {"max_tokens": 64})
        line["custom_id"] = ids.line_id(_cid(i), TAG)
        line["request"]["messages"][0]["content"] = f"问题 {i}"
        rows.append(json.dumps(line, ensure_ascii=False) + "\n")
    return "".join(rows).encode("utf-8")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SimulatedServer]:
    with SimulatedServer(tmp_path / "sim", parse_faults("latency=0.3")) as running:
        yield running


def _finish(backend: Any, job_id: str) -> Any:
    info = backend.retrieve(job_id)
    for _ in range(200):
        if info.terminal:
            return info
        time.sleep(0.05)
        info = backend.retrieve(job_id)
    raise AssertionError(f"job {job_id} did not end: {info.status}")


# --- the contract ---------------------------------------------------------------------------------


def test_the_contract_takes_claude_s_vertex_body_and_refuses_what_vertex_refuses() -> None:
    body = lines.sample_body(MODEL, {"max_tokens": 64})
    assert contract.problems(MODEL, body) == []
    assert [p.field for p in contract.problems(MODEL, {**body, "model": MODEL})] == ["model"]  # named by the URL
    assert [p.field for p in contract.problems(MODEL, {**body, "anthropic_version": "bedrock-2023-05-31"})] == [
        "anthropic_version"
    ]
    assert [p.field for p in contract.problems(MODEL, {**body, "max_tokenz": 5})] == ["max_tokenz"]  # Anthropic's own
    assert [p.field for p in contract.problems("gemini-2.5-flash", body)] == ["model"]  # no Claude model
    assert contract.claude_name("claude-opus-4-6") == "claude-opus-4-6"  # a newer id, without a date


# --- the official SDKs on the simulated routes ------------------------------------------------------


def _genai(server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    import google.auth
    from google import genai

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account_file(tmp_path, server.root_url)))
    credentials, _ = google.auth.default(scopes=list(settings.SCOPES))
    client = genai.Client(
        vertexai=True,
        project="p1",
        location="us-east5",
        credentials=credentials,
        http_options={"base_url": server.root_url, "api_version": "v1"},
    )
    return client, credentials


def test_google_genai_creates_a_claude_job_whose_rows_google_cloud_storage_reads_as_anthropic_messages(
    server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Google's example does: `client.batches.create(model="publishers/anthropic/models/...",
    src=gs://..., config={dest})`; the job's rows keep `custom_id` and `request` and add `response`
    (a Message the `anthropic` SDK's own type takes) and `status`."""
    storage = pytest.importorskip("google.cloud.storage")
    from anthropic.types import Message
    from google.auth.transport.requests import AuthorizedSession

    client, credentials = _genai(server, tmp_path, monkeypatch)
    documented = {
        "custom_id": "request-1",
        "request": {
            "messages": [{"role": "user", "content": "Hello!"}],
            "anthropic_version": "vertex-2023-10-16",
            "max_tokens": 50,
        },
    }
    data = (json.dumps(documented) + "\n").encode() + _lines(2)
    gcs.Gcs(AuthorizedSession(credentials), server.root_url, 10.0).upload(BUCKET, "in/c.jsonl", data)
    made: Any = client.batches.create(
        model=PUBLISHED + MODEL, src=f"gs://{BUCKET}/in/c.jsonl", config={"dest": f"gs://{BUCKET}/out"}
    )
    assert made.model == PUBLISHED + MODEL
    job: Any = made
    for _ in range(200):
        if job.state.value in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"):
            break
        time.sleep(0.05)
        job = client.batches.get(name=made.name)
    assert job.state.value == "JOB_STATE_SUCCEEDED" and job.completion_stats.successful_count == 3
    gemini: Any = client.batches.create(model="gemini-2.5-flash", src=f"gs://{BUCKET}/in/c.jsonl")
    assert {j.name for j in client.batches.list()} == {made.name, gemini.name}  # one listing, both publishers
    with pytest.raises(Exception) as refused:
        client.batches.create(model=PUBLISHED + "claude-9-ultra@20990101", src=f"gs://{BUCKET}/in/c.jsonl")
    assert getattr(refused.value, "code", None) == 404
    reader = storage.Client(project="p1", credentials=credentials, client_options={"api_endpoint": server.root_url})
    directory = job.output_info.gcs_output_directory.removeprefix(f"gs://{BUCKET}/")
    [blob] = [b for b in reader.list_blobs(BUCKET, prefix=directory) if b.name.endswith("predictions.jsonl")]
    rows = [json.loads(x) for x in blob.download_as_bytes().decode("utf-8").splitlines()]
    assert sorted(r["custom_id"] for r in rows) == sorted(["request-1", *(ids.line_id(_cid(i), TAG) for i in range(2))])
    for row in rows:
        assert row["status"] == "" and row["request"]["anthropic_version"] == "vertex-2023-10-16"
        assert Message.model_validate(row["response"]).content[0].type == "text"


def test_anthropic_vertex_sends_messages_to_the_simulated_raw_predict_route(server: SimulatedServer) -> None:
    """The `anthropic` SDK's `AnthropicVertex`, unmodified: `messages.create` becomes
    `.../publishers/anthropic/models/{model}:rawPredict`; a body Claude refuses is a 400 in
    Anthropic's error shape, a model Vertex does not serve a 404."""
    import anthropic

    client = anthropic.AnthropicVertex(
        region="us-east5", project_id="p1", access_token="simulated-key", base_url=server.root_url + "/v1"
    )
    message = client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hello!"}])
    assert message.type == "message" and message.content[0].type == "text" and message.usage.output_tokens > 0
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "system", "content": "x"}])
    body: Any = bad.value.body
    assert body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(
            model="claude-9-ultra@20990101", max_tokens=8, messages=[{"role": "user", "content": "x"}]
        )


# --- the backend and the call -------------------------------------------------------------------------


def _endpoint(server: SimulatedServer, model: str = MODEL) -> Any:
    return simulated_endpoint("eval", server.native_url(NAME), f"vertex-anthropic/{model}")


def test_a_claude_job_s_rows_come_back_keyed_by_our_ids_and_found_again_by_its_tag(
    server: SimulatedServer, tmp_path: Path
) -> None:
    backend = batch.VertexClaudeBatchBackend(_endpoint(server), LIMITS, 10.0, 5)
    path = tmp_path / "in.jsonl"
    path.write_bytes(_lines(4))
    uploaded = backend.upload(path, "in.jsonl")
    assert uploaded.startswith("gs://lexpilot-simulated/lexpilot/input/")
    tag = {"lexpilot_workspace": "w1", "lexpilot_file": "requests/in.jsonl"}
    made = backend.create(uploaded, tag, None, BatchSource(path, MODEL))
    # A Gemini job of another file beside it, in the same listing: each found by its own tag.
    other = gemini_batch.VertexBatchBackend(
        simulated_endpoint("eval", server.native_url("vertex"), "vertex/gemini-sim"), LIMITS, 10.0, 5
    )
    gemini_path = tmp_path / "g.jsonl"
    gemini_path.write_text('{"key": "k", "request": {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}}\n')
    other.create(
        other.upload(gemini_path, "g.jsonl"), {"lexpilot_file": "g"}, None, BatchSource(gemini_path, "gemini-sim")
    )
    assert sorted(b.metadata.get("lexpilot_file", "") for b in backend.batches()) == ["g", "requests/in.jsonl"]
    done = _finish(backend, made.id)
    assert done.status == "completed" and done.output_file_id
    out = tmp_path / "out.jsonl"
    backend.download(done.output_file_id, out)
    read = [results.result(json.loads(x), TAG) for x in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["custom_id"] for line in read) == sorted(_cid(i) for i in range(4))
    assert all(judge_line(line, "text", 0)[0] for line in read)
    # The uploaded object is the workspace file itself: its lines are Vertex's.
    assert b"".join(backend.gcs.chunks(*gcs.split(uploaded))) == path.read_bytes()


def test_a_refused_request_s_row_reads_as_its_status_never_as_an_answer() -> None:
    row = {
        "custom_id": ids.line_id(CID, TAG),
        "request": {},
        "status": 'Bad Request: {"error": {"code": 400, "message": "messages: bad role", "status": "INVALID_ARGUMENT"}}',
    }
    line = results.result(row, TAG)
    assert line["custom_id"] == CID and line["response"]["status_code"] == 400
    assert not judge_line(line, "text", 0)[0]
    assert results.result({"custom_id": "theirs"}, TAG)["error"]["code"] == "unreadable_result"


def test_the_call_sends_a_line_through_anthropic_vertex_and_its_line_reads_as_a_batch_row(
    server: SimulatedServer,
) -> None:
    call = chat.VertexClaudeChat(_endpoint(server), 10.0, 2, MODEL)
    [raw] = _lines(1).decode("utf-8").splitlines()
    line = json.loads(raw)
    sent = call.send(line["custom_id"], call.payload(line, "in.jsonl:1"))
    assert sent.line is not None and call.answered(sent.line)
    read = results.result(sent.line, TAG)
    assert read["custom_id"] == _cid(0) and judge_line(read, "text", 0)[0]
    refused = call.send(line["custom_id"], {**line["request"], "model": MODEL, "max_tokens": 0})
    assert refused.line is not None and not call.answered(refused.line)
    assert results.result(refused.line, TAG)["response"]["status_code"] == 400


def test_credentials_google_auth_cannot_refresh_are_a_401_of_the_call(server: SimulatedServer) -> None:
    """AnthropicVertex asks google-auth for a token before each call: a refresh refused there is
    no SDK error of Anthropic's, and is read as Vertex's calls read it (the run stops, saying so)."""
    from google.auth.exceptions import RefreshError

    call = chat.VertexClaudeChat(_endpoint(server), 10.0, 0, MODEL)
    found = call.failure(RefreshError("invalid_grant: Token has been expired or revoked."))
    assert found is not None and found.status == 401 and "refreshed" in found.message
    assert call.failure(ValueError("ours")) is None


def test_what_to_install_names_whichever_sdk_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from lexpilot_batch.providers import spec as declarations
    from lexpilot_batch.providers.vertex_anthropic.spec import EXTRA

    monkeypatch.setattr(
        declarations,
        "requirement_problem",
        lambda module, extra, what: f"install [{extra}]" if module == "anthropic" else None,
    )
    assert EXTRA.problem() == "install [anthropic]"  # google-genai there, the anthropic SDK missing
    monkeypatch.setattr(declarations, "requirement_problem", lambda module, extra, what: f"install [{extra}]")
    assert EXTRA.problem() == "install [google]"


# --- a study --------------------------------------------------------------------------------------


def test_a_study_of_a_claude_on_vertex_model_runs_on_the_simulated_provider_to_its_priced_report(
    in_process: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    model = f"vertex-anthropic/{MODEL}"
    roles = ["--user-model", model, "--judge-model", model]
    code, out = in_process(
        ["run", "--stage", "all", "--provider", "simulated", "--run-id", "r1", "--model", model, *roles]
        + ["--limit", "2", "--root", "ws"]
    )
    text = out.decode("utf-8")
    assert code == 0, text[-2000:]
    from lexpilot_batch.simulated.store import Store

    jobs = [
        r
        for r in Store(tmp_path / "ws" / "state" / "simulated").batches_newest_first()
        if r["sim"]["native"]["api"] == NAME
    ]
    from lexpilot_batch.state.workspace import Workspace

    with Workspace(tmp_path / "ws", writable=False) as ws:
        files = [dict(r) for r in ws.store.conn.execute("SELECT path, batch_id FROM files WHERE batch_id IS NOT NULL")]
    assert jobs and len(jobs) == len(files)  # one job per file
    [total] = [line.split() for line in text.splitlines() if line.strip().startswith("total ")]
    assert total[-1] != "n/a" and float(total[-1]) > 0  # priced from the bundled `vertex-anthropic/` row
