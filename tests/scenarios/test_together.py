"""Together AI's Batch API offline: a study whose every role is a `together/` model compiled, uploaded
through the signed URL, created, polled and ingested through the simulated provider's Together routes,
with the records of the OpenAI-shaped simulated route request for request; two jobs of one upload,
the later cancelled; a job that appears after the grace period cancelled by the next poll; an upload
sent again. What every native API goes through (a create whose answer was lost, groups sent at once,
lost creates, expired jobs and errored lines ending with the fault-free records) is
`test_native_apis.py`'s, Together's instance among them.

Sources: https://docs.together.ai/docs/inference/batch/overview, /tutorial, /manage; the `together`
SDK (`resources/batches.py`, `types/batch_job.py`, `lib/resources/files.py`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine.loop import prepare
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.batch import CreateUncertain
from lexpilot_batch.providers.together.batch import TogetherBatchBackend
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.state.compaction import read_saved
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import RunSpec
from lexpilot_batch.util import clock as waits
from tests.helpers.engine import finish, open_session
from tests.helpers.native import outcome, quick, run_on_routes  # noqa: F401 - `quick` is an autouse fixture

EVAL = "together/meta-llama/Llama-3.3-70B-Instruct-Turbo"
# Every role on Together (simulated models under names of the kind Together serves).
SETTINGS = Settings(
    user_model="together/Qwen/Qwen2.5-7B-Instruct-Turbo", judge_model="together/deepseek-ai/DeepSeek-V3"
)
STAGE = "dcg"  # every role


def run_together(root: Path, monkeypatch, faults: str = "", limit: int = 1, **options) -> dict:
    return run_on_routes(root, monkeypatch, RunSpec(("r1",), (EVAL,), STAGE, SETTINGS, limit=limit), faults, **options)


def reference(root: Path, limit: int = 1) -> dict:
    """The same study through the OpenAI-shaped simulated route (`--provider simulated`)."""
    with Workspace(root) as ws:
        session = open_session(ws)
        try:
            prepare(ws, session, RunSpec(("r1",), (EVAL,), STAGE, SETTINGS, limit=limit))
            finish(ws, session)
        finally:
            session.close()
        return outcome(ws)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict:
    with pytest.MonkeyPatch.context() as env:
        env.setattr(waits, "pause", lambda seconds: None)
        return run_together(tmp_path_factory.mktemp("clean") / "ws", env)


@pytest.fixture(scope="module")
def openai_shaped(tmp_path_factory) -> dict:
    return reference(tmp_path_factory.mktemp("openai-shaped") / "ws")


def test_a_study_on_together_gives_the_records_of_the_openai_shaped_route(clean, openai_shaped):
    assert set(clean["threads"]) == {"done"} and clean["records"] == openai_shaped["records"]
    assert clean["requests"] == openai_shaped["requests"]  # request for request, usage included
    assert clean["anomalies"] == 0 and clean["stopped"] == 0  # no command was interrupted
    stats, files = clean["server"], clean["files"]
    assert {f["backend"] for f in files} == {"batch"} and len(files) >= 5
    # Each file: one upload (form, signed PUT, preprocess) and one job; nothing else answered for it.
    for route in ("together_upload_start", "together_upload_put", "together_preprocess", "together_create"):
        assert stats[f"calls:{route}"] == len(files), route
    assert stats["calls:create_batch"] == 0 and stats["calls:upload_file"] == 0 and stats["calls:chat_completion"] == 0
    assert all(len(f["batch_id"]) == 36 and f["batch_id"].count("-") == 4 for f in files)  # a job's UUID


def test_its_lines_and_results_are_in_togethers_documented_shape(clean):
    for f in clean["files"]:
        sent = [json.loads(x) for x in read_saved(clean["root"] / f["path"]).decode("utf-8").splitlines()]
        assert all(list(x) == ["custom_id", "body"] and len(x["custom_id"]) <= 64 for x in sent)
        assert {x["body"]["model"] for x in sent} == {f["model"].partition("/")[2]}
        saved = read_saved(clean["root"] / f["output_path"]).decode("utf-8").splitlines()
        for raw in saved:
            line = json.loads(raw)
            assert sorted(line) == ["custom_id", "response"] and line["response"]["status_code"] == 200
            message = line["response"]["body"]["choices"][0]["message"]
            # Together's word is `reasoning` (providers/together/test_lines.py)
            assert "reasoning_content" not in message


def test_of_two_jobs_made_from_one_upload_the_first_is_adopted_and_the_later_cancelled(tmp_path, monkeypatch, clean):
    """A lost create that committed twice (sent again after its answer was lost, both arriving):
    both jobs name the file's upload; the first is the file's, the later is cancelled and kept aside,
    its results never applied."""
    real = TogetherBatchBackend.create
    made: list[str] = []

    def create_twice_then_lose_the_answer(self, input_file_id, metadata, endpoint=None, source=None):
        job = real(self, input_file_id, metadata, endpoint, source)
        if not made:
            made.extend([job.id, real(self, input_file_id, metadata, endpoint, source).id])
            raise CreateUncertain("the answer was lost")
        return job

    monkeypatch.setattr(TogetherBatchBackend, "create", create_twice_then_lose_the_answer)
    out = run_together(tmp_path / "ws", monkeypatch, create_grace=5.0)
    assert set(out["threads"]) == {"done"} and out["records"] == clean["records"] and out["anomalies"] == 0
    first, later = made
    assert first in [f["batch_id"] for f in out["files"]]
    assert [(b["batch_id"], b["why"]) for b in out["other_batches"]] == [(later, "duplicate")]
    assert out["other_batches"][0]["status"] in ("cancelling", "cancelled", "completed")


def test_a_job_that_appears_after_the_grace_period_is_cancelled_by_the_next_poll(tmp_path, monkeypatch, clean):
    """A lost create that committed only after its file was created again: no tag tells it, but it
    names the file's upload, so the next poll's sweep cancels it and keeps it aside."""
    real = TogetherBatchBackend.create
    late: list[str] = []

    def lose_then_commit_late(self, input_file_id, metadata, endpoint=None, source=None):
        if not late and not getattr(self, "_lost_once", False):
            self._lost_once = True
            raise CreateUncertain("the answer was lost, and nothing shows yet")
        job = real(self, input_file_id, metadata, endpoint, source)
        if not late:
            late.append(real(self, input_file_id, metadata, endpoint, source).id)  # the first create, late
        return job

    monkeypatch.setattr(TogetherBatchBackend, "create", lose_then_commit_late)
    out = run_together(tmp_path / "ws", monkeypatch, "latency=0.3", create_grace=0.2)
    assert set(out["threads"]) == {"done"} and out["records"] == clean["records"] and out["anomalies"] == 0
    assert late and late[0] not in [f["batch_id"] for f in out["files"]]
    assert [(b["batch_id"], b["why"]) for b in out["other_batches"]] == [(late[0], "duplicate")]
    assert out["other_batches"][0]["status"] in ("cancelling", "cancelled")
    assert out["server"]["calls:together_cancel"] >= 1


def test_a_file_uploaded_again_is_the_file_together_already_holds(tmp_path):
    """An upload sent again after a crash (the same bytes): Together answers 409 with the file it
    holds (the SDK's `FileAlreadyExistsError`), and that id is the upload's; the bytes go once."""
    from lexpilot_batch.providers.registry import PROFILES
    from lexpilot_batch.providers.routing.endpoints import Endpoint

    path = tmp_path / "eval__together-sim__000.jsonl"
    path.write_bytes(b'{"custom_id":"a-1","body":{"model":"m","messages":[{"role":"user","content":"x"}]}}\n')
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        endpoint = Endpoint(
            "eval", server.native_url("together"), "TOGETHER_API_KEY", "sk-simulated", model="together/m"
        )
        backend = TogetherBatchBackend(endpoint, PROFILES["together"], timeout=5.0)
        first, again = backend.upload(path), backend.upload(path)
        assert first == again and first.startswith("file-")
        assert server.stats["calls:together_upload_put"] == 1 and server.stats["calls:together_upload_start"] == 2


def test_an_upload_refused_for_the_moment_is_sent_again_and_a_refused_put_is_an_error(tmp_path):
    """The upload's first call, sent without the SDK's retries (`_start_upload`), is retried here on
    a 5xx; a signed URL that refuses the bytes is an error naming the status, never a file id."""
    from lexpilot_batch.providers.registry import PROFILES
    from lexpilot_batch.providers.routing.endpoints import Endpoint
    from lexpilot_batch.simulated.apis.together import TogetherApi

    path = tmp_path / "eval__together-sim__000.jsonl"
    path.write_bytes(b'{"custom_id":"a-1","body":{"model":"m","messages":[{"role":"user","content":"x"}]}}\n')
    faults = "http_500=0.6,http_routes=together_upload_start,retry_after=0.001,seed=1"
    with SimulatedServer(tmp_path / "sim", parse_faults(faults)) as server:
        endpoint = Endpoint(
            "eval", server.native_url("together"), "TOGETHER_API_KEY", "sk-simulated", model="together/m"
        )
        backend = TogetherBatchBackend(endpoint, PROFILES["together"], timeout=5.0)
        assert backend.upload(path).startswith("file-")
        assert server.stats["http_500:together_upload_start"] >= 1 and server.stats["calls:together_upload_put"] == 1
        other = path.with_name("eval__together-sim__001.jsonl")
        other.write_bytes(path.read_bytes().replace(b"a-1", b"a-2"))
        real = TogetherApi.upload_put

        def refuse(self, *args):
            raise ApiError(403, "Request has expired", code="AccessDenied")

        TogetherApi.upload_put = refuse  # type: ignore[method-assign]
        try:
            with pytest.raises(LexpilotError, match="the signed upload URL answered HTTP 403"):
                backend.upload(other)
        finally:
            TogetherApi.upload_put = real  # type: ignore[method-assign]
