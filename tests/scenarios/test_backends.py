"""Mixing backends per role: batch, sync and manual (vLLM run-batch output) in one run."""

from __future__ import annotations

import json
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest

from lexpilot_batch.engine.ingest import ingest_external
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.providers.registry import resolve_limits
from lexpilot_batch.simulated import SimulatedServer
from lexpilot_batch.simulated.batches import sample_key
from lexpilot_batch.simulated.completions import complete
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import finish, open_session, prepare_runs, records, thread_counts


@pytest.fixture
def server(tmp_path, monkeypatch):
    with SimulatedServer(tmp_path / "provider") as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        yield srv


def vllm_output(request_file: Path, out: Path, broken: AbstractSet[str] = frozenset()) -> None:
    """What `vllm run-batch` writes: one file, input order, errors inline as plain strings."""
    lines = []
    for raw in request_file.read_text(encoding="utf-8").splitlines():
        req = json.loads(raw)
        cid = req["custom_id"]
        if cid in broken:
            lines.append({"id": f"vllm-{cid}", "custom_id": cid, "response": None, "error": "CUDA out of memory"})
            continue
        body = complete(req["body"], 0, key=cid, sample=sample_key(cid))
        lines.append(
            {
                "id": f"vllm-{cid}",
                "custom_id": cid,
                "response": {"status_code": 200, "request_id": f"vllm-{cid}", "body": body},
                "error": None,
            }
        )
    out.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")


def drive_with_manual_judge(ws: Workspace, session: Session, tmp_path: Path) -> int:
    ingested = 0
    for _ in range(100):
        left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
        manual = ws.store.conn.execute(
            "SELECT path FROM files WHERE backend = 'manual' AND status != 'ingested' ORDER BY pk"
        ).fetchall()
        for row in manual:
            request_file = ws.path(row["path"])
            out = tmp_path / f"vllm-{ingested}.jsonl"
            first = json.loads(request_file.read_text(encoding="utf-8").splitlines()[0])["custom_id"]
            vllm_output(request_file, out, broken={first} if ingested == 0 else set())
            ingest_external(ws, out)
            ingested += 1
        if left["in_flight"] == 0 and left["unsubmitted"] == 0 and not manual:
            return ingested
    raise AssertionError("did not finish")


def shape(recs: dict) -> dict:
    """Records with their values reduced to their types and keys: the shape, not the content."""

    def reduce(value):
        if isinstance(value, dict):
            return {k: reduce(v) for k, v in sorted(value.items())}
        if isinstance(value, list):
            return [reduce(value[0])] if value else []
        return type(value).__name__

    return {key[2:]: reduce(rec) for key, rec in recs.items()}


def test_batch_eval_sync_user_manual_judge_completes_like_all_batch(server, tmp_path):
    with Workspace(tmp_path / "mixed") as ws:
        session = Session(ws, ProviderOptions(backends={"eval": "batch", "user": "sync", "judge": "manual"}))
        try:
            prepare_runs(ws, session, stage="all", limit=6)
            ingested = drive_with_manual_judge(ws, session, tmp_path)
            backends = {r["backend"] for r in ws.store.conn.execute("SELECT DISTINCT backend FROM files")}
            assert backends == {"batch", "sync", "manual"}
            assert ingested >= 3
            assert set(thread_counts(ws)) == {"done"}
            # The vLLM line that failed inline was retried as a new attempt and then answered.
            retried = ws.store.conn.execute(
                "SELECT COUNT(*) FROM requests WHERE role = 'judge' AND attempt = 2"
            ).fetchone()
            assert retried[0] == 1
            mixed = records(ws)
            # Every saved response file is under responses/, including the ingested vLLM files.
            assert list(ws.responses_dir.rglob("ingested-*"))
        finally:
            session.close()
    with Workspace(tmp_path / "batch") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="all", limit=6)
            finish(ws, session)
            all_batch = records(ws)
        finally:
            session.close()
    assert mixed.keys() == all_batch.keys()
    assert shape(mixed) == shape(all_batch)


def test_ingesting_the_same_file_twice_changes_nothing(server, tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = Session(ws, ProviderOptions(backends={"eval": "manual", "user": "manual", "judge": "manual"}))
        try:
            prepare_runs(ws, session, stage="lca", limit=3)
            request_file = ws.path(ws.store.conn.execute("SELECT path FROM files").fetchone()["path"])
            out = tmp_path / "out.jsonl"
            vllm_output(request_file, out)
            stats, done = ingest_external(ws, out, wave=1)
            assert stats.answered == 6 and len(done) == 1
            before = ws.store.conn.execute("SELECT custom_id, status, text FROM requests ORDER BY pk").fetchall()
            stats2, done2 = ingest_external(ws, out)
            assert stats2.answered == 0 and stats2.duplicates == 6 and done2 == []
            after = ws.store.conn.execute("SELECT custom_id, status, text FROM requests ORDER BY pk").fetchall()
            assert [tuple(r) for r in before] == [tuple(r) for r in after]
            with pytest.raises(LexpilotError, match="wave 2"):
                ingest_external(ws, out, wave=2)
        finally:
            session.close()


def test_partial_manual_output_leaves_the_rest_pending(server, tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = Session(ws, ProviderOptions(backends={"eval": "manual", "user": "manual", "judge": "manual"}))
        try:
            prepare_runs(ws, session, stage="lca", limit=3)
            poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            request_file = ws.path(ws.store.conn.execute("SELECT path FROM files").fetchone()["path"])
            full = tmp_path / "full.jsonl"
            vllm_output(request_file, full)
            lines = full.read_text(encoding="utf-8").splitlines(keepends=True)
            (tmp_path / "part1.jsonl").write_text("".join(lines[:2]), encoding="utf-8")
            (tmp_path / "part2.jsonl").write_text("".join(lines[2:]), encoding="utf-8")
            _, done = ingest_external(ws, tmp_path / "part1.jsonl")
            assert done == []
            pending = ws.store.conn.execute("SELECT COUNT(*) FROM requests WHERE status = 'pending'").fetchone()[0]
            assert pending == 4
            left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            assert left["waiting_manual"] == 1  # no new wave while the file is unfinished
            _, done = ingest_external(ws, tmp_path / "part2.jsonl")
            assert len(done) == 1
            poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            assert ws.store.conn.execute("SELECT COUNT(*) FROM waves").fetchone()[0] == 2
        finally:
            session.close()


def test_unrelated_file_is_refused(server, tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        bogus = tmp_path / "bogus.jsonl"
        bogus.write_text('{"custom_id": "nope-1", "response": null, "error": "x"}\n', encoding="utf-8")
        with pytest.raises(LexpilotError, match="none of its 1 custom_ids"):
            ingest_external(ws, bogus)
        bogus.write_text("not json\n", encoding="utf-8")
        with pytest.raises(LexpilotError, match="no result lines"):
            ingest_external(ws, bogus)


def test_profiles_set_limits_and_can_be_overridden():
    assert resolve_limits(None, "https://api.openai.com/v1").max_requests == 50_000
    azure = resolve_limits(None, "https://x.openai.azure.com/openai/v1")
    assert azure.max_requests == 100_000 and azure.endpoint == "/chat/completions"
    assert resolve_limits(None, "https://dashscope.aliyuncs.com/compatible-mode/v1").max_bytes > 200 * 2**20
    assert resolve_limits("openai", "http://localhost:8000/v1", max_requests=10).max_requests == 10
    with pytest.raises(ConfigError, match="unknown provider profile"):
        resolve_limits("nope", "http://x")


def test_missing_key_names_the_variable(tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "LEXPILOT_EVAL_API_KEY", "OPENAI_BASE_URL", "LEXPILOT_EVAL_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    with Workspace(tmp_path / "ws") as ws:
        session = Session(ws, ProviderOptions(provider="env"))
        prepare_runs(ws, session, stage="lca", limit=1)  # compiling needs no key
        with pytest.raises(ConfigError, match="LEXPILOT_EVAL_API_KEY or OPENAI_API_KEY"):
            poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)


def test_unknown_backend_is_a_clear_error(tmp_path):
    with Workspace(tmp_path / "ws") as ws, pytest.raises(ConfigError, match="--eval-backend"):
        Session(ws, ProviderOptions(backends={"eval": "carrier-pigeon"}))
