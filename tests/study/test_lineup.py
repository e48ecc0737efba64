"""Several models on several providers in one workspace (`lineup`, `providers.routes`, end to end)."""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine.loop import prepare, submit
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.state.compaction import read_saved, saved_files
from lexpilot_batch.state.workspace import Workspace, slug
from lexpilot_batch.status import detail
from lexpilot_batch.study.model_list import ModelOptions
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.crash import SimServer
from tests.helpers.engine import finish, records, thread_counts, wave_count

OPENAI, DASHSCOPE, DEEPSEEK = (
    "https://api.openai.com/v1",
    "https://dashscope.aliyuncs.com/compatible-mode/v1",
    "https://api.deepseek.com/v1",
)
STUDY = RunSpec(
    ("r1",),
    ("openai/gpt-4o-mini", "dashscope/qwen-plus", "openai/o4-mini"),
    "all",
    Settings(user_model="deepseek/deepseek-chat", judge_model="openai/o4-mini"),
    limit=2,
)


@pytest.fixture
def clean_env(monkeypatch):
    """No provider setting of this machine: keys, URLs and backends all unset."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "LEXPILOT_", "DASHSCOPE_", "DEEPSEEK_", "AZURE_OPENAI_", "SIMA_", "SIMB_")):
            monkeypatch.delenv(name)


def lines(ws: Workspace, role: str | None = None) -> list[tuple[dict, dict]]:
    """(file row, request line) of every compiled request, optionally of one role's files."""
    out = []
    for row in ws.store.conn.execute("SELECT * FROM files ORDER BY pk"):
        if role is None or role in row["roles"].split("+"):
            for raw in read_saved(ws.path(row["path"])).decode("utf-8").splitlines():
                out.append((dict(row), json.loads(raw)))
    return out


def manifests(ws: Workspace) -> dict[str, dict]:
    return {r["model"]: json.loads(r["manifest"]) for r in ws.store.conn.execute("SELECT model, manifest FROM runs")}


def test_one_workspace_compiles_each_model_for_its_provider_without_keys(tmp_path, clean_env):
    with Workspace(tmp_path / "ws") as ws:
        session = Session(ws, ProviderOptions())
        result = prepare(ws, session, STUDY)
        assert result.compiled.compiled and result.models == list(STUDY.models)
        files = {
            (r["model"], r["provider"], r["endpoint"], r["backend"])
            for r in ws.store.conn.execute("SELECT * FROM files")
        }
        assert files == {
            ("openai/gpt-4o-mini", "openai", OPENAI, "batch"),
            ("dashscope/qwen-plus", "dashscope", DASHSCOPE, "batch"),
            ("openai/o4-mini", "openai", OPENAI, "batch"),
        }
        bodies = defaultdict(list)
        for row, line in lines(ws):
            assert line["url"] == "/v1/chat/completions"
            body = {k: v for k, v in line["body"].items() if k != "messages"}
            # OpenAI's own API takes a prompt_cache_key (`providers.prefixes`); DashScope is sent none.
            key = body.pop("prompt_cache_key", None)
            assert (key is not None) == row["model"].startswith("openai/")
            assert key is None or re.fullmatch(r"lp-[0-9a-f]{16}", key)
            bodies[row["model"]].append(body)
        for body in bodies["openai/o4-mini"]:
            assert body == {"model": "o4-mini", "max_completion_tokens": 8192, "n": 1}
        for body in bodies["openai/gpt-4o-mini"]:
            assert body == {"model": "gpt-4o-mini", "temperature": 0.7, "max_completion_tokens": 8192, "n": 1}
        for body in bodies["dashscope/qwen-plus"]:
            assert body == {"model": "qwen-plus", "temperature": 0.7, "max_tokens": 8192, "n": 1}
        for model, manifest in manifests(ws).items():
            provider_url = DASHSCOPE if model.startswith("dashscope/") else OPENAI
            assert manifest["endpoints"] == {"eval": provider_url, "user": DEEPSEEK, "judge": OPENAI}
            judge = manifest["requests"]["judge"]
            assert judge == {
                "provider": "openai",
                "model": "o4-mini",
                "body": {"max_completion_tokens": 8192, "n": 1},
                "not_applied": ["temperature"],
                "cache": "key",  # pinned: its lines send a prompt_cache_key
            }
            assert manifest["settings"]["judge_temperature"] is None  # never sent, so not recorded
            assert manifest["requests"]["user"]["provider"] == "deepseek"
        # Keys are needed to send, and the message names the provider's variable.
        with pytest.raises(ConfigError, match=r"openai/gpt-4o-mini\) at https://api.openai.com/v1: set OPENAI_API_KEY"):
            submit(ws, session)


def test_a_rehearsal_keeps_every_models_dialect_and_the_simulated_provider_accepts_it(tmp_path, clean_env):
    spec = RunSpec(
        STUDY.run_ids,
        STUDY.models,
        "all",
        STUDY.settings,
        limit=2,
        model_options={"openai/o4-mini": ModelOptions({"reasoning_effort": "low"})},
    )
    with Workspace(tmp_path / "ws") as ws:
        session = Session(ws, ProviderOptions(provider="simulated"))
        try:
            prepare(ws, session, spec)
            finish(ws, session)
        finally:
            session.close()
        assert set(thread_counts(ws)) == {"done"}
        assert ws.store.conn.execute("SELECT COUNT(*) FROM requests WHERE status = 'failed'").fetchone()[0] == 0
        judged = lines(ws, "judge")
        assert judged and {r["backend"] for r, _ in judged} == {"simulated"}
        for _, line in judged:
            assert line["body"]["model"] == "o4-mini" and line["body"]["reasoning_effort"] == "low"
            assert "temperature" not in line["body"] and "max_tokens" not in line["body"]
        assert manifests(ws)["openai/o4-mini"]["requests"]["judge"]["model_args"] == {"reasoning_effort": "low"}
        assert manifests(ws)["openai/o4-mini"]["endpoints"] == dict.fromkeys(("eval", "user", "judge"), "simulated")


def test_prepare_refuses_what_a_reasoning_model_refuses(tmp_path, clean_env):
    """The control of the rehearsal above: put max_tokens back on o4-mini and `prepare` refuses it,
    naming model and field, before anything is compiled (the simulated provider refuses it as well:
    `providers/bodies/test_contract.py`)."""
    spec = RunSpec(
        ("r1",),
        ("sim-eval",),
        "lca",
        Settings(judge_model="openai/o4-mini"),
        limit=1,
        model_options={"openai/o4-mini": ModelOptions({"max_tokens": 64})},
    )
    with Workspace(tmp_path / "ws") as ws:
        session = Session(ws, ProviderOptions(provider="simulated"))
        try:
            with pytest.raises(ConfigError, match=r"openai/o4-mini \(judge role\).*max_tokens.*max_completion_tokens"):
                prepare(ws, session, spec)
        finally:
            session.close()
        assert ws.store.conn.execute("SELECT COUNT(*) FROM files").fetchone()[0] == 0
        assert ws.store.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


@pytest.mark.slow  # two providers, two models, two runs, every stage: a long simulation
def test_two_models_on_two_providers_move_in_the_same_waves_as_on_one(tmp_path, clean_env, monkeypatch):
    spec = RunSpec(
        ("r1", "r2"),
        ("openai-api/sima/m1", "openai-api/simb/m2"),
        "all",
        Settings(user_model="openai-api/sima/sim-user", judge_model="openai-api/simb/sim-judge"),
        limit=3,
    )
    with (
        SimServer(tmp_path / "sima", 0, "", tmp_path / "sima.log") as sima,
        SimServer(tmp_path / "simb", 0, "", tmp_path / "simb.log") as simb,
    ):
        monkeypatch.setenv("SIMA_BASE_URL", sima.url)
        monkeypatch.setenv("SIMA_API_KEY", "key-a")
        monkeypatch.setenv("SIMB_BASE_URL", simb.url)
        monkeypatch.setenv("SIMB_API_KEY", "key-b")
        with Workspace(tmp_path / "two") as ws:
            session = Session(ws, ProviderOptions())
            try:
                prepare(ws, session, spec)
                finish(ws, session)
            finally:
                session.close()
            two, two_waves = records(ws), wave_count(ws)
            by_wave = defaultdict(set)
            for r in ws.store.conn.execute("SELECT wave, model, endpoint FROM files"):
                by_wave[r["wave"]].add((r["model"], r["endpoint"]))
            shown = detail.collect(ws)["runs"][0]
        batches = [len(list((tmp_path / name / "batches").glob("*.json"))) for name in ("sima", "simb")]
    assert all(n > 0 for n in batches)  # both providers ran batches
    assert {("openai-api/sima/m1", sima.url), ("openai-api/simb/m2", simb.url)} <= by_wave[1]  # the same wave
    assert shown["models"] == {
        "eval": "openai-api/sima/m1",
        "user": "openai-api/sima/sim-user",
        "judge": "openai-api/simb/sim-judge",
    }
    assert shown["endpoints"] == {
        "eval": "http://127.0.0.1:*/v1",
        "user": "http://127.0.0.1:*/v1",
        "judge": "http://127.0.0.1:*/v1",
    }

    with Workspace(tmp_path / "one") as ws:
        session = Session(ws, ProviderOptions(provider="simulated"))
        try:
            prepare(ws, session, spec)
            finish(ws, session)
        finally:
            session.close()
        one, one_waves = records(ws), wave_count(ws)
    assert len(two) == 2 * 2 * (6 + 3 * 4) and set(two) == set(one)
    assert two == one and two_waves == one_waves


def test_a_restarted_standalone_provider_on_another_port_is_the_same_endpoint(tmp_path, clean_env, monkeypatch):
    """serve-simulated --port 0 picks a new port on every start: the run goes on, and prepare agrees."""
    spec = RunSpec(("r1",), ("sim-eval",), "lca", Settings(), limit=2)
    monkeypatch.setenv("OPENAI_API_KEY", "key")
    with Workspace(tmp_path / "ws") as ws:
        with SimServer(tmp_path / "sim", 0, "latency=0.5", tmp_path / "sim1.log") as first:
            monkeypatch.setenv("OPENAI_BASE_URL", first.url)
            session = Session(ws, ProviderOptions())
            prepare(ws, session, spec)
            submit(ws, session)  # a batch in flight when the provider stops
        second = SimServer(tmp_path / "sim", 0, "", tmp_path / "sim2.log")
        for attempt in range(5):  # the system may hand out the old port again: not this test's case
            if second.url != first.url:
                break
            second.stop()
            second = SimServer(tmp_path / "sim", 0, "", tmp_path / f"sim{attempt + 3}.log")
        try:
            assert second.url != first.url
            monkeypatch.setenv("OPENAI_BASE_URL", second.url)
            session = Session(ws, ProviderOptions())
            prepare(ws, session, spec)  # the same run: not refused for the new port
            finish(ws, session)
        finally:
            second.stop()
        assert thread_counts(ws) == {"done": 4}
        assert manifests(ws)["sim-eval"]["endpoints"]["eval"] == "http://127.0.0.1:*/v1"


def test_bare_names_compile_the_request_files_they_always_did(tmp_path, clean_env):
    """The request line of a bare name is `json.dumps` of the body every earlier version sent, in its
    file of the same name, and its run's manifest has no new field."""
    with Workspace(tmp_path / "ws") as ws:
        session = Session(ws, ProviderOptions(provider="simulated"))
        try:
            prepare(ws, session, RunSpec(("demo",), ("sim-eval",), "all", Settings()))
            finish(ws, session)
        finally:
            session.close()
        temperature = {"eval": 0.7, "user": 0.7, "judge": 0.1}
        seen = set()
        for path in saved_files(ws.requests_dir):
            role, model_slug, _ = path.name.split("__")
            for raw in read_saved(path).splitlines(keepends=True):
                line = json.loads(raw)
                body = line["body"]
                legacy = {
                    "custom_id": line["custom_id"],
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": body["model"],
                        "messages": [{"role": "user", "content": body["messages"][0]["content"]}],
                        "temperature": temperature[role],
                        "max_tokens": 8192,
                        "n": 1,
                    },
                }
                assert raw == (json.dumps(legacy, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
                assert model_slug == slug(body["model"])
                seen.add((role, body["model"]))
        assert seen == {("eval", "sim-eval"), ("user", "DeepSeek-V4.1-Flash"), ("judge", "DeepSeek-R1")}
        manifest = manifests(ws)["sim-eval"]
        assert "requests" not in manifest and manifest["settings"]["judge_temperature"] == 0.1


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (RunSpec(("r1",), ("sim-eval",), "lca", Settings(judge_model="o4-mini")), "write openai/o4-mini"),
        (
            RunSpec(("r1",), ("sim-eval",), "lca", Settings(judge_model="deepseek/deepseek-chat")),
            "DeepSeek has no Batch API",
        ),
        (
            RunSpec(
                ("r1",),
                ("sim-eval", "anthropic/claude-sonnet-4"),
                "lca",
                model_options={"anthropic/claude-sonnet-4": ModelOptions({"temperature": 1.3})},
            ),
            "temperature: must be between 0 and 1, not 1.3",
        ),
        (
            RunSpec(
                ("r1",),
                ("anthropic/claude-sonnet-4",),
                "lca",
                model_options={
                    "anthropic/claude-sonnet-4": ModelOptions(
                        {"thinking": {"type": "enabled", "budget_tokens": 2048}, "temperature": 0.7}
                    )
                },
            ),
            "temperature=null",
        ),
        (RunSpec(("r1",), ("sim-eval",), "lca", reasoning_effort="high"), "no model of this command is one"),
        (
            RunSpec(("r1",), ("sim-eval",), "lca", model_options={"openai/o4-mini": ModelOptions({"top_p": 1})}),
            "name no model of this command",
        ),
    ],
)
def test_a_mistake_is_refused_before_anything_is_registered_or_compiled(tmp_path, clean_env, spec, needle):
    with Workspace(tmp_path / "ws") as ws:
        backends: dict[str, str | None] = {"judge": "batch"} if "deepseek" in spec.settings.judge_model else {}
        session = Session(ws, ProviderOptions(provider="simulated" if not backends else None, backends=backends))
        with pytest.raises(ConfigError, match=needle):
            prepare(ws, session, spec)
        assert ws.store.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
        assert not list(Path(ws.requests_dir).rglob("*.jsonl"))


def test_a_name_an_earlier_version_sent_bare_keeps_that_reading_in_its_workspace(tmp_path, clean_env):
    """`openai/gpt-4o-mini` registered before prefixes (an OpenRouter id, sent as it is) is not read as
    OpenAI's in a new run of the same workspace: their files would take the same names."""
    from lexpilot_batch.benchmark import prompts
    from lexpilot_batch.data import open_dataset
    from lexpilot_batch.providers.bodies.request import legacy_request
    from lexpilot_batch.study.runs import RunPlan, protocol_variants, register_run

    settings = Settings(judge_model="openai/gpt-4o-mini")
    earlier = RunPlan(
        "sim-eval",
        settings,
        {
            role: legacy_request(role, settings.model_for(role, "sim-eval"), settings)
            for role in ("eval", "user", "judge")
        },
        dict.fromkeys(("eval", "user", "judge"), "simulated"),
    )
    dataset = open_dataset(None, None, variants=protocol_variants(("lca",)))
    with Workspace(tmp_path / "ws") as ws:
        register_run(ws, "old", earlier, dataset, 1, prompts.load_templates(None), False)
        assert "requests" not in manifests(ws)["sim-eval"]  # as earlier versions wrote it
        session = Session(ws, ProviderOptions(provider="simulated"))
        with pytest.raises(ConfigError, match="'openai/gpt-4o-mini' was sent as a bare name in run 'old'"):
            prepare(ws, session, RunSpec(("new",), ("sim-eval",), "lca", settings, limit=1))
        assert ws.store.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_a_model_lists_endpoint_key_variable_and_backend_hold_for_later_commands(tmp_path, clean_env, monkeypatch):
    from lexpilot_batch.providers.routing.routes import ModelRoute
    from lexpilot_batch.simulated import SimulatedServer

    monkeypatch.setenv("MY_LOCAL_KEY", "key")
    model = "openai-api/local/m"  # no LOCAL_BASE_URL: the list's base_url is the only endpoint
    with SimulatedServer(tmp_path / "sim") as server, Workspace(tmp_path / "ws") as ws:
        own = ModelOptions(route=ModelRoute(server.base_url, "MY_LOCAL_KEY", "sync"))
        spec = RunSpec(("r1",), (model,), "lca", Settings(judge_model=model), limit=1, model_options={model: own})
        session = Session(ws, ProviderOptions())
        prepare(ws, session, spec)
        later = Session(ws, ProviderOptions())  # poll-and-advance, without the list
        route = later.route("judge", model, "openai-api/local")
        assert (route.endpoint.base_url, route.endpoint.key_var, route.backend) == (
            server.base_url,
            "MY_LOCAL_KEY",
            "sync",
        )
        finish(ws, later)
        assert thread_counts(ws) == {"done": 2}
        assert {r["backend"] for r in ws.store.conn.execute("SELECT backend FROM files")} == {"sync"}
