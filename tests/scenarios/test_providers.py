"""The providers of issue 28 offline: Mistral's Batch API (native: `{custom_id, body}` lines, batch
jobs, content chunks), and the OpenAI-compatible Groq, Zhipu BigModel, Baidu Qianfan, SiliconFlow and
Moonshot batch APIs and Volcengine Ark's batch chat route (profiles), each through the simulated server's
routes in its own shape (each platform on its own path, answered with its documented differences:
`simulated.profiles`), in the same waves, with the records of the in-process rehearsal;
then their faults (lost creates, expired batches, errored lines, HTTP 429/500 on Mistral's and the
platforms' routes; Ark's 429s, 500s and a crash after its answers are saved) ending with the
fault-free records, nothing sent twice. Together AI's Batch API (native:
signed-URL uploads, jobs without metadata) is in the same lineups; `test_together.py` has the rest of it,
and `test_native_apis.py` what Mistral and Together share with every native API (a create whose
answer was lost, groups sent at once, each API's faults alone).

Sources: https://docs.mistral.ai/capabilities/batch and the `mistralai` SDK (`client/jobs.py`,
`models/batchjob.py`); the `groq` SDK (`resources/batches.py`, `resources/files.py`);
https://docs.bigmodel.cn/cn/guide/tools/batch; https://cloud.baidu.com/doc/qianfan/s/Oml4r78ea; https://docs.siliconflow.cn/cn/userguide/guides/batch;
https://platform.kimi.com/docs/api/batch-create; https://www.volcengine.com/docs/82379/1449576;
https://docs.together.ai/docs/inference/batch/overview and the `together` SDK (`resources/batches.py`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine.loop import prepare
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.errors import ProviderError
from lexpilot_batch.providers.registry import PROVIDERS, file_api
from lexpilot_batch.providers.routing.routes import RouteRules, resolve_route
from lexpilot_batch.providers.sync import runner as sync_module
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.state.compaction import read_saved
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.engine import finish, open_session
from tests.helpers.native import outcome, point_at, quick, run_on_routes  # noqa: F401 - `quick` is an autouse fixture

MISTRAL = "mistral/mistral-sim"
TOGETHER = "together/llama-sim"
# One model of each OpenAI-compatible profile; Ark's is a batch inference endpoint id.
PROFILED = (
    "groq/llama-sim",
    "zhipu/glm-sim",
    "qianfan/ernie-sim",
    "siliconflow/Qwen/Qwen3-sim",
    "moonshot/kimi-sim",
    "ark/ep-bi-sim",
)
MODELS = (MISTRAL, *PROFILED, TOGETHER)
# Mistral's reasoning model judges every evaluated model: its answers arrive as content chunks.
SETTINGS = Settings(judge_model="mistral/magistral-sim")
LIMIT = 1
STAGE = "dcg"  # every role: the evaluated model, the User Model and the judge


def run_providers(root: Path, monkeypatch, faults: str = "", models=MODELS, crash=ProviderError, **options) -> dict:
    spec = RunSpec(("r1",), tuple(models), STAGE, SETTINGS, limit=LIMIT)
    return run_on_routes(root, monkeypatch, spec, faults, crash, **options)


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory) -> dict:
    """The same study rehearsed in-process (`--provider simulated`): each model on its own API's
    routes of the simulated provider (or its platform's path), as the variables send it above."""
    with Workspace(tmp_path_factory.mktemp("rehearsed") / "ws") as ws:
        session = open_session(ws)
        try:
            prepare(ws, session, RunSpec(("r1",), MODELS, STAGE, SETTINGS, limit=LIMIT))
            finish(ws, session)
        finally:
            session.close()
        return outcome(ws)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict:
    with pytest.MonkeyPatch.context() as env:
        return run_providers(tmp_path_factory.mktemp("clean") / "ws", env)


def first_lines(root: Path, f: dict) -> tuple[dict, dict]:
    sent = json.loads(read_saved(root / f["path"]).decode("utf-8").splitlines()[0])
    saved = json.loads(read_saved(root / f["output_path"]).decode("utf-8").splitlines()[0])
    return sent, saved


def test_every_new_provider_in_the_same_waves_gives_the_records_of_the_in_process_rehearsal(clean, rehearsed):
    assert set(clean["threads"]) == {"done"} and clean["threads"] == rehearsed["threads"]
    assert clean["records"] == rehearsed["records"]
    assert clean["requests"] == rehearsed["requests"]  # request for request, usage mapped back
    assert clean["anomalies"] == 0
    by_wave: dict[int, set[str]] = {}
    for f in clean["files"]:
        by_wave.setdefault(f["wave"], set()).add(f["model"])
    assert sum(1 for models in by_wave.values() if set(MODELS) <= models) >= 2
    stats = clean["server"]
    # Mistral's requests went through its batch jobs, Ark's through its batch chat route, Together's
    # through its signed-URL uploads and its jobs.
    assert stats["calls:mistral_create"] >= 3 and stats["calls:mistral_get"] >= 3
    assert stats["calls:together_upload_put"] >= 2 and stats["calls:together_create"] >= 2  # its two eval waves
    assert not [k for k in stats if k.startswith("calls:") and stats[k] and "404" in k]
    # The keys reached the providers and no file of the workspace.
    assert not [p for p in clean["root"].rglob("*") if p.is_file() and b"sk-simulated" in p.read_bytes()]


@pytest.mark.parametrize(
    ("model", "backend", "sent_keys", "url"),
    [
        (MISTRAL, "batch", ["body", "custom_id"], None),
        ("groq/llama-sim", "batch", ["body", "custom_id", "method", "url"], "/v1/chat/completions"),
        ("zhipu/glm-sim", "batch", ["body", "custom_id", "method", "url"], "/v4/chat/completions"),
        ("qianfan/ernie-sim", "batch", ["body", "custom_id", "method", "url"], "/v2/chat/completions"),
        ("siliconflow/Qwen/Qwen3-sim", "batch", ["body", "custom_id", "method", "url"], "/v1/chat/completions"),
        ("moonshot/kimi-sim", "batch", ["body", "custom_id", "method", "url"], "/v1/chat/completions"),
        ("ark/ep-bi-sim", "sync", ["body", "custom_id", "method", "url"], "/v1/chat/completions"),
        (TOGETHER, "batch", ["body", "custom_id"], None),
    ],
)
def test_each_provider_sends_its_own_lines_to_its_own_endpoint(clean, model, backend, sent_keys, url):
    files = [f for f in clean["files"] if f["model"] == model]
    assert files and {f["backend"] for f in files} == {backend}
    prefix = model.partition("/")[0]
    provider = PROVIDERS[prefix]
    sent, saved = first_lines(clean["root"], files[0])
    assert sorted(sent) == sent_keys and sent.get("url") == url
    assert sent["body"]["model"] == model.partition("/")[2]  # the name after the prefix
    assert "max_tokens" in sent["body"] and "temperature" in sent["body"]  # the max_tokens dialect
    # Together's output lines are `{custom_id, response}` (its documented output format).
    assert sorted(saved) == (
        ["custom_id", "response"] if prefix == "together" else ["custom_id", "error", "id", "response"]
    )
    if prefix in ("mistral", "together"):
        assert all(len(f["batch_id"]) == 36 and f["batch_id"].count("-") == 4 for f in files)  # a job's UUID
    assert provider.key_var in (f"{prefix.upper()}_API_KEY", "ZHIPUAI_API_KEY")
    # Compiled, submitted, polled and ingested through its own platform's routes (`simulated.profiles`):
    # uploads, creates, polls and downloads on its path, one batch per file; Ark's every request
    # once through its batch chat route.
    stats = clean["server"]
    if prefix == "ark":
        assert stats["calls:ark:chat_completion"] == sum(f["n_requests"] for f in files)
    elif prefix not in ("mistral", "together"):  # the native APIs' own routes: their own tests
        for route in ("upload_file", "create_batch", "file_content"):
            assert stats[f"calls:{prefix}:{route}"] >= len(files), (prefix, route)
        assert stats[f"calls:{prefix}:retrieve_batch"] + stats[f"calls:{prefix}:list_batches"] >= len(files)
        assert clean["held"][prefix] == len({f["batch_id"] for f in files})
        assert {f["batch_status"] for f in files} == {"completed"}


def test_mistral_reasoning_answers_arrive_as_content_chunks_and_are_read_as_answer_and_reasoning(clean):
    """The simulated judge sometimes thinks (`reasoning_content` on OpenAI's route): Mistral's output
    file holds that as a thinking chunk before the text, and ingest keeps the text alone as the
    answer (the records matched the rehearsal's above) and counts the reasoning."""
    chunked = 0
    for f in clean["files"]:
        if f["model"] != SETTINGS.judge_model or not f["output_path"]:
            continue
        for raw in read_saved(clean["root"] / f["output_path"]).decode("utf-8").splitlines():
            content = json.loads(raw)["response"]["body"]["choices"][0]["message"]["content"]
            if isinstance(content, list):
                assert [c["type"] for c in content] == ["thinking", "text"]
                chunked += 1
    assert chunked >= 1, chunked


# Lost creates (a create committed after the client gave up), expired batches, errored lines, downloads
# broken off half-way and HTTP 429/500 on Mistral's routes and the platforms' uploads, downloads and
# creates; per-request faults drawn on the workspace's own custom_ids.
MISTRAL_ROUTES = "mistral_create+mistral_list+mistral_get+mistral_cancel+upload_file+file_content+create_batch"
FAULTS = (
    "line_error=0.1,expire_batch=0.5,late_create=0.3,slow_seconds=0.45,cut_download=0.5,"
    f"http_429=0.05,http_500=0.05,http_routes={MISTRAL_ROUTES},retry_after=0.001,seed=5"
)


FAULTY = (MISTRAL, "zhipu/glm-sim", TOGETHER)  # the native APIs and a profile with its own url


@pytest.mark.slow  # two providers through about ten waves of faults: about 13 s
def test_lost_creates_expired_batches_and_errored_lines_end_with_the_fault_free_records(tmp_path, monkeypatch, clean):
    faulty = run_providers(tmp_path / "faulty", monkeypatch, FAULTS, FAULTY, retries=8, timeout=0.3, create_grace=3.0)
    assert set(faulty["threads"]) == {"done"}
    assert faulty["records"] == {k: v for k, v in clean["records"].items() if k[1] in FAULTY}
    assert faulty["anomalies"] == 0
    stats = faulty["server"]
    assert stats["cut_download:file_content"] >= 1, stats  # downloads broken off half-way, fetched again
    assert stats["late_create:mistral_create"] >= 1 and stats["late_create:create_batch"] >= 1, stats
    expired = [f for f in faulty["files"] if f["batch_status"] == "expired"]
    expired_at = {f["model"].partition("/")[0] for f in expired}
    assert {"mistral", "zhipu"} <= expired_at, expired_at  # Mistral's TIMEOUT_EXCEEDED jobs too
    # (Together's EXPIRED jobs, lost creates and errored lines: test_native_apis.py, on more of its batches.)
    kinds = Counter(v[4] for v in faulty["requests"].values() if v[3] == "failed")
    assert {"transport", "unexecuted"} <= set(kinds), kinds
    # Creating is not idempotent: no create was sent twice blindly; lost ones were found again.
    assert stats["retried:mistral_create"] == 0 and stats["retried:together_create"] == 0
    assert_one_batch_per_file(faulty, ("zhipu",))


def assert_one_batch_per_file(out: dict, platforms: tuple[str, ...]) -> None:
    """No create was retried blindly on a platform's routes, nor made twice for one file: lost
    creates were found again by their tag, so the platform holds one batch per file sent it."""
    for platform in platforms:
        batched = {f["batch_id"] for f in out["files"] if f["model"].startswith(platform + "/") and f["batch_id"]}
        assert out["server"][f"retried:{platform}:create_batch"] == 0, platform
        assert out["held"][platform] == len(batched) >= 2, (platform, out["held"])


BATCH_PLATFORMS = ("groq", "zhipu", "qianfan", "siliconflow", "moonshot")
# Every platform with Files + Batches and Mistral in one workspace; seed 8 expires a batch of each.
EVERY_FAULTY = (MISTRAL, *(m for m in PROFILED if not m.startswith("ark/")))
EVERY_FAULTS = FAULTS.replace("expire_batch=0.5", "expire_batch=0.4").replace("seed=5", "seed=8")


@pytest.mark.slow  # six providers through about ten waves of faults: 8-20 s on a shared 2-core machine
def test_every_platforms_lost_creates_expired_batches_and_errored_lines_end_with_the_fault_free_records(
    tmp_path, monkeypatch, clean
):
    """The test above for Groq, Zhipu, Qianfan, SiliconFlow and Moonshot at once, each on its own
    path with its own differences (SiliconFlow's `in_queue`, Qianfan's and SiliconFlow's 5,000
    requests per file, each error body its platform's)."""
    faulty = run_providers(
        tmp_path / "faulty", monkeypatch, EVERY_FAULTS, EVERY_FAULTY, retries=8, timeout=0.3, create_grace=3.0
    )
    assert set(faulty["threads"]) == {"done"}
    assert faulty["records"] == {k: v for k, v in clean["records"].items() if k[1] in EVERY_FAULTY}
    assert faulty["anomalies"] == 0
    stats = faulty["server"]
    assert stats["late_create:mistral_create"] >= 1 and stats["late_create:create_batch"] >= 1, stats
    assert stats["http_429"] + stats["http_500"] >= 1, stats
    expired_at = {f["model"].partition("/")[0] for f in faulty["files"] if f["batch_status"] == "expired"}
    assert {"mistral", *BATCH_PLATFORMS} <= expired_at, expired_at
    kinds = Counter(v[4] for v in faulty["requests"].values() if v[3] == "failed")
    assert {"transport", "unexecuted"} <= set(kinds), kinds
    assert stats["retried:mistral_create"] == 0
    assert_one_batch_per_file(faulty, BATCH_PLATFORMS)


class Crash(Exception):
    """The process dying right after the last answer of an Ark file is saved, before it is recorded."""


ARK = "ark/ep-bi-sim"
ARK_FAULTS = "http_429=0.3,http_500=0.3,http_routes=chat_completion,retry_after=0.001,seed=4"  # at least one 429 and one 500 (asserted below)


def test_arks_429s_500s_and_a_crash_between_its_answers_and_their_record_end_with_the_fault_free_records(
    tmp_path, monkeypatch, clean
):
    """Ark's batch chat route answering 429 and 500 (in Ark's error body), and the process dying
    after each file's last answer is saved but before the file is recorded: the next command sends
    none of them again (a call the SDK retried after a fault never ran the route), and the records
    are the fault-free run's."""
    crashes: list[str] = []
    original = sync_module._Run._write

    def write_then_crash(self: sync_module._Run, result: sync_module.CallResult) -> None:
        original(self, result)
        last = self.stats.already_done + self.stats.ok + self.stats.failed == self.stats.total
        where = str(self.out.name)  # the output file, of its wave
        if "ark-" in self.file_name and last and where not in crashes:
            crashes.append(where)
            raise Crash()

    monkeypatch.setattr(sync_module._Run, "_write", write_then_crash)
    models = (ARK,)
    out = run_providers(tmp_path / "ws", monkeypatch, ARK_FAULTS, models, crash=Crash, retries=8)
    assert set(out["threads"]) == {"done"}
    assert out["records"] == {k: v for k, v in clean["records"].items() if k[1] in models}
    assert out["anomalies"] == 0
    stats = out["server"]
    ark = [f for f in out["files"] if f["model"] == ARK]
    assert ark and {f["backend"] for f in ark} == {"sync"}
    assert len(crashes) == len(ark) and out["stopped"] >= len(crashes)
    assert stats["http_429:chat_completion"] >= 1 and stats["http_500:chat_completion"] >= 1, stats
    assert stats["retried:ark:chat_completion"] >= 2, stats
    first_sends = stats["calls:ark:chat_completion"] - stats["retried:ark:chat_completion"]
    assert first_sends == sum(f["n_requests"] for f in ark), (first_sends, ark)


# --- one workspace, the labs and the Chinese platforms, the seed's judge in batch -----------------

LINEUP = ("openai/gpt-sim", "anthropic/claude-sim", "mistral/mistral-sim", "dashscope/qwen-plus")
# The seed's default judge, DeepSeek-R1, at batch prices where it is served in batch (DashScope's
# `deepseek-r1`), and a DeepSeek chat model as the User Model on SiliconFlow's Batch API.
LINEUP_SETTINGS = Settings(judge_model="dashscope/deepseek-r1", user_model="siliconflow/deepseek-ai/DeepSeek-V3")


@pytest.mark.slow  # two whole studies of five providers: about 25 s on a shared 2-core machine
def test_an_openai_a_claude_a_mistral_and_a_qwen_model_with_a_deepseek_r1_judge_share_the_waves(tmp_path, monkeypatch):
    pytest.importorskip("anthropic")
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        point_at(monkeypatch, server)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.root_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-simulated")
        monkeypatch.setenv("DASHSCOPE_BASE_URL", server.base_url)
        monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-simulated")
        with Workspace(tmp_path / "ws") as ws:
            session = Session(ws, ProviderOptions(create_grace=0.3))
            try:
                prepare(ws, session, RunSpec(("r1",), LINEUP, STAGE, LINEUP_SETTINGS, limit=LIMIT))
                finish(ws, session)
            finally:
                session.close()
            native = outcome(ws)
        stats = Counter(server.stats)
    with Workspace(tmp_path / "rehearsed") as ws:
        session = open_session(ws)
        try:
            prepare(ws, session, RunSpec(("r1",), LINEUP, STAGE, LINEUP_SETTINGS, limit=LIMIT))
            finish(ws, session)
        finally:
            session.close()
        reference = outcome(ws)
    assert set(native["threads"]) == {"done"} and native["records"] == reference["records"]
    assert native["anomalies"] == 0
    by_wave: dict[int, set[str]] = {}
    for f in native["files"]:
        by_wave.setdefault(f["wave"], set()).add(f["model"])
        assert f["backend"] == "batch", f["model"]  # every role at batch prices
    assert sum(1 for models in by_wave.values() if set(LINEUP) <= models) >= 2
    roles = {(f["roles"], f["model"]) for f in native["files"]}
    assert ("judge", "dashscope/deepseek-r1") in roles and ("user", "siliconflow/deepseek-ai/DeepSeek-V3") in roles
    # Each through its own API: Message Batches, Mistral's jobs, the OpenAI-shaped Batches of the rest.
    assert stats["calls:anthropic_create"] and stats["calls:mistral_create"] and stats["calls:create_batch"]


def test_a_platform_batch_whose_create_answer_was_lost_is_adopted_from_its_own_accounts_listing(
    tmp_path, monkeypatch, clean
):
    """A crash between a platform's create and its record, on SiliconFlow (whose listing says
    `in_queue` for a batch not started) and Qianfan: the next command finds the batch by its
    `metadata` tag in that platform's own listing and never creates a second one."""
    from lexpilot_batch.providers.batch import CreateUncertain
    from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend

    real = OpenAIBatchBackend.create
    lost: list[str] = []

    def create_then_lose_the_answer(self, input_file_id, metadata, endpoint=None, source=None):
        info = real(self, input_file_id, metadata, endpoint, source)
        platform = self.endpoint.base_url.split("/")[3]
        if platform in ("siliconflow", "qianfan") and len(lost) < 4:
            lost.append(info.id)
            raise CreateUncertain("the answer was lost")
        return info

    monkeypatch.setattr(OpenAIBatchBackend, "create", create_then_lose_the_answer)
    models = ("siliconflow/Qwen/Qwen3-sim", "qianfan/ernie-sim")
    out = run_providers(tmp_path / "ws", monkeypatch, models=models, create_grace=5.0)
    assert set(out["threads"]) == {"done"}
    assert out["records"] == {k: v for k, v in clean["records"].items() if k[1] in models}
    batched = {f["batch_id"] for f in out["files"] if f["model"] in models}
    assert len(lost) == 4 and set(lost) <= batched  # adopted
    assert_one_batch_per_file(out, ("siliconflow", "qianfan"))


def test_a_rehearsal_sends_each_platforms_models_to_its_own_path_within_its_limits(rehearsed, tmp_path):
    """`--provider simulated` rehearses a Files + Batches platform (Groq, Zhipu, Qianfan, SiliconFlow,
    Moonshot) on its own path of the simulated server (`simulated.profiles`), its lines naming the
    platform's url and its files cut within its limits, so the rehearsal refuses what the platform
    would; the records stay the OpenAI routes' (the test above). A file compiled before, which names
    the endpoint `simulated`, is still sent to the OpenAI routes, where its batch is."""
    from lexpilot_batch.providers.registry import PROFILES

    files = {f["model"]: f for f in rehearsed["files"] if f["wave"] == 1}
    for model in PROFILED:
        prefix = model.partition("/")[0]
        f = files[model]
        if prefix == "ark":  # no Files + Batches on Ark: its synchronous calls on its own path, as for real
            assert f["endpoint"] == "simulated/ark" and f["backend"] == "sync", f
            continue
        assert f["endpoint"] == f"simulated/{prefix}", f
        assert f["url"] == PROFILES[prefix].endpoint
        assert f["n_requests"] <= PROFILES[prefix].max_requests
        assert f["batch_status"] == "completed"
    for model in (MISTRAL, TOGETHER):  # the native APIs on their own routes
        api = model.partition("/")[0]
        assert files[model]["endpoint"] == f"simulated/{api}" and files[model]["batch_status"] == "completed"
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            route = session.route("eval", "zhipu/glm-sim", "zhipu")
            assert route.endpoint.base_url == "simulated/zhipu" and route.limits.endpoint == "/v4/chat/completions"
            assert session._live(route).base_url.endswith("/zhipu/api/paas/v4")
            assert session._live(route, "simulated").base_url.endswith("/v1")  # a file compiled before
            native = session.route("eval", TOGETHER, "together")
            assert (native.api, native.endpoint.base_url) == ("together", "simulated/together")
            for model, prefix in ((MISTRAL, "mistral"), (TOGETHER, "together")):  # within the real run's limits
                env = {PROVIDERS[prefix].url_var: "https://example.invalid/v1", PROVIDERS[prefix].key_var: "k"}
                real = resolve_route("eval", model, prefix, RouteRules(environ=env))
                assert session.route("eval", model, prefix).limits == real.limits == PROFILES[prefix]
            assert session._live(native).base_url.endswith("/together/v1")
            # A file compiled before native rehearsals, which names `simulated`, stays on the OpenAI
            # routes where its batch is, and its results read as OpenAI's.
            assert session._live(native, "simulated").base_url.endswith("/v1")
            assert file_api({"backend": "simulated", "endpoint": "simulated", "provider": "together"}) == "openai"
        finally:
            session.close()
