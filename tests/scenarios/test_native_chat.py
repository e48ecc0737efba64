"""Claude and Gemini through their synchronous calls (`providers.anthropic.chat`, `providers.google.chat`): the groups
`--tail-sync N` sends at once go through Anthropic's Messages and Gemini's generateContent, with the
real SDKs against the simulated provider, and give the records of the same requests sent in
batches; faults and outages of those routes lose nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.native import CLAUDE, GEMINI, LIMIT, clean_native, point_at, quick, run_native  # noqa: F401 - fixtures

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine.loop import prepare
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.errors import ProviderError  # noqa: E402
from lexpilot_batch.estimate import dry_run_prepare  # noqa: E402
from lexpilot_batch.providers.registry import file_api
from lexpilot_batch.simulated import SimulatedServer, parse_faults  # noqa: E402
from lexpilot_batch.state.compaction import read_saved
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.engine import finish, open_session, records  # noqa: E402

N = 6  # at LIMIT cases, the first wave's groups (25 requests) travel as batches, the later ones at once
SYNC_ROUTES = {CLAUDE: "anthropic_message", GEMINI: "gemini_generate"}


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict:
    return clean_native(tmp_path_factory)


def test_small_groups_go_through_messages_and_generate_content_with_the_records_of_batches(
    tmp_path,
    monkeypatch,
    clean,
):
    tailed = run_native(tmp_path / "ws", monkeypatch, models=(CLAUDE, GEMINI), tail_sync=N)
    assert tailed["records"] == clean["records"]
    assert tailed["requests"] == clean["requests"]  # the same waves, attempts, answers and token counts
    assert tailed["anomalies"] == 0
    for model, route in SYNC_ROUTES.items():
        files = [f for f in tailed["files"] if f["model"] == model]
        synced = [f for f in files if f["backend"] == "sync"]
        assert synced and any(f["backend"] == "batch" for f in files)
        assert all(f["n_requests"] <= N for f in synced)
        # Each request sent once, through its API's own synchronous call.
        assert tailed["server"][f"calls:{route}"] == sum(f["n_requests"] for f in synced)
        # Sent as compiled, saved as that API's batch results would hold it (kept compressed now).
        sent = json.loads(read_saved(tailed["root"] / synced[0]["path"]).decode("utf-8").splitlines()[0])
        saved = json.loads(read_saved(tailed["root"] / synced[0]["output_path"]).decode("utf-8").splitlines()[0])
        expected = (
            (["custom_id", "params"], ["custom_id", "result"])
            if model == CLAUDE
            else (["key", "request"], ["key", "response"])
        )
        assert (sorted(sent), sorted(saved)) == expected
    assert tailed["server"]["calls:chat_completion"] > 0  # the OpenAI-shaped roles' small groups too


def test_the_estimate_counts_native_groups_as_sent_at_once():
    """With every group small enough, no wave of a Claude and Gemini study waits for a batch."""
    spec = RunSpec(("r1",), (CLAUDE, GEMINI), "all", Settings(), limit=LIMIT)
    estimate = dry_run_prepare(None, Session(None, ProviderOptions(tail_sync=10**6)), spec)
    assert estimate.tail_sync.batch_round_trips_without > 0
    assert estimate.tail_sync.batch_round_trips == 0 and estimate.tail_sync.sync_requests > 0


FAULTS = (
    "truncate=0.05,malformed_judge=0.03,refusal=0.03,empty_content=0.03,http_429=0.1,http_500=0.1,http_529=0.1,"
    "http_routes=anthropic_message+gemini_generate,retry_after=0.001,seed=9"
)


def test_faults_on_the_synchronous_routes_change_no_record(tmp_path, monkeypatch, clean):
    """Everything at once (no batch at all): the content faults are drawn by each request's id as in
    a batch, the HTTP ones are retried; the records are those of the fault-free batches."""
    faulty = run_native(tmp_path / "ws", monkeypatch, FAULTS, models=(CLAUDE, GEMINI), tail_sync=10**6, retries=8)
    assert faulty["records"] == clean["records"] and faulty["anomalies"] == 0
    assert {f["backend"] for f in faulty["files"]} == {"sync"}
    stats = faulty["server"]
    for route in SYNC_ROUTES.values():
        assert stats[f"http_500:{route}"] + stats[f"http_529:{route}"] + stats[f"http_429:{route}"] > 0, stats
    retried = [v for v in faulty["requests"].values() if v[2] > 1]
    assert retried  # unusable answers (truncated, refused, empty) were asked again


@pytest.mark.parametrize("route", SYNC_ROUTES.values())
def test_an_outage_of_a_synchronous_route_stops_the_command_and_uses_no_attempt(tmp_path, monkeypatch, route):
    with Workspace(tmp_path / "ws") as ws:
        for faults in (f"http_500=1,retry_after=0.001,http_routes={route}", ""):
            with SimulatedServer(tmp_path / "sim", parse_faults(faults)) as server:
                point_at(monkeypatch, server)
                session = Session(ws, ProviderOptions(tail_sync=10**6, create_grace=0.0))
                try:
                    if faults:
                        prepare(ws, session, RunSpec(("r1",), (CLAUDE, GEMINI), "lca", Settings(), limit=2))
                        with pytest.raises(ProviderError, match="HTTP 500.*nothing was lost"):
                            finish(ws, session)
                    else:
                        finish(ws, session)
                finally:
                    session.close()
        db = ws.store.conn
        assert {r[0] for r in db.execute("SELECT status FROM threads")} == {"done"}
        assert db.execute("SELECT COUNT(*) FROM requests WHERE status = 'failed'").fetchone()[0] == 0


def test_the_in_process_simulated_provider_sends_a_native_models_small_groups_through_its_own_call(tmp_path):
    """`--provider simulated` rehearses a Claude model on Anthropic's routes: a group sent at once
    goes as Messages calls, its results read as Anthropic's (`registry.file_api`), its records
    those of its batches."""
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, tail_sync=N)
        try:
            prepare(ws, session, RunSpec(("r1",), (CLAUDE,), "all", Settings(), limit=LIMIT))
            finish(ws, session)
            calls = session._server.stats if session._server else {}
        finally:
            session.close()
        rows = [dict(r) for r in ws.store.conn.execute("SELECT * FROM files WHERE model = ?", (CLAUDE,))]
        assert {r["backend"] for r in rows} == {"simulated", "sync"}
        assert {r["endpoint"] for r in rows} == {"simulated/anthropic"}
        assert all(file_api(r) == "anthropic" for r in rows)
        assert calls["calls:anthropic_message"] > 0 and calls["calls:anthropic_create"] > 0
        assert ws.store.conn.execute("SELECT COUNT(*) FROM anomalies").fetchone()[0] == 0
        assert records(ws) == batched_claude(tmp_path)


def batched_claude(tmp_path) -> dict:
    with Workspace(tmp_path / "batched") as ws:
        session = open_session(ws)
        try:
            prepare(ws, session, RunSpec(("r1",), (CLAUDE,), "all", Settings(), limit=LIMIT))
            finish(ws, session)
        finally:
            session.close()
        return records(ws)


def test_a_request_refused_on_its_merits_reads_as_the_same_request_in_a_batch(tmp_path, monkeypatch):
    """A Message without max_tokens, a Gemini request without contents: refused with a 400, saved as
    the API's error line, read (`shapes`) exactly as the batch's result line for the same request."""
    import time

    from lexpilot_batch.providers.anthropic.batch import AnthropicBatchBackend
    from lexpilot_batch.providers.anthropic.chat import AnthropicChat
    from lexpilot_batch.providers.anthropic.spec import NAME as ANTHROPIC
    from lexpilot_batch.providers.batch import BatchSource
    from lexpilot_batch.providers.google.batch import GoogleBatchBackend
    from lexpilot_batch.providers.google.chat import GeminiChat
    from lexpilot_batch.providers.google.spec import NAME as GOOGLE
    from lexpilot_batch.providers.ids import id_tag
    from lexpilot_batch.providers.lines import line_id
    from lexpilot_batch.providers.registry import PROFILES
    from lexpilot_batch.providers.registry import result_reader as normaliser
    from lexpilot_batch.providers.routing.endpoints import Endpoint
    from lexpilot_batch.providers.sync.call import REFUSED

    tag = id_tag("ws")
    bad: dict[str, dict[str, Any]] = {
        ANTHROPIC: {
            "custom_id": line_id("r1-0-lca.c.gen-1", ANTHROPIC, tag),
            "params": {"model": "claude-sim", "messages": [{"role": "user", "content": "你好"}]},
        },
        GOOGLE: {"key": "r1-0-lca.c.gen-1", "request": {"contents": [], "generationConfig": {"maxOutputTokens": 64}}},
    }
    kinds = {
        ANTHROPIC: (AnthropicBatchBackend, AnthropicChat, "claude-sim"),
        GOOGLE: (GoogleBatchBackend, GeminiChat, "gemini-sim"),
    }
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        for api, line in bad.items():
            backend_class, chat_class, model = kinds[api]
            endpoint = Endpoint("eval", server.root_url, "KEY", "k")
            path = tmp_path / f"{api}.jsonl"
            path.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
            backend = backend_class(endpoint, PROFILES[api])
            info = backend.create(backend.upload(path), {}, None, BatchSource(path, model))
            while not info.terminal:
                time.sleep(0.01)
                info = backend.retrieve(info.id)
            assert info.output_file_id is not None
            backend.download(info.output_file_id, tmp_path / f"{api}.out.jsonl")
            [batched] = [json.loads(x) for x in (tmp_path / f"{api}.out.jsonl").read_text("utf-8").splitlines()]
            call = chat_class(endpoint, 10.0, 0, model)
            result = call.send(line[call.id_key], line["params" if api == ANTHROPIC else "request"])
            assert result.kind == REFUSED and result.line is not None
            read = normaliser(api, tag)
            assert read is not None
            assert read(result.line) == read(batched), api
            assert read(result.line)["response"]["status_code"] == 400
