"""Crash and resume on the native batch APIs: SIGKILL at every commit gap of Anthropic's Message
Batches and Gemini's Batch Mode backends (a kill between a create and its record included), of their
synchronous calls (`--tail-sync`) and of compacting their finished waves, run again, lose and
duplicate nothing, leave no second batch at the provider, and end with every file compacted once.

One workspace evaluates `anthropic/claude-sim` and `google/gemini-sim` (the User Model and the judge
on the OpenAI routes of the same simulated provider, a separate process), killed again and again,
then compared with an uninterrupted run: the simulated answers and faults depend only on (seed,
custom_id, prompt) and the batches' contents, so the two must agree request for request. Message
Batches carry no metadata, so a kill after a create is the case where the batch must be found
again by when it was created and how many requests it holds (`batches._untagged`).
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.helpers.crash import (
    NATIVE_KILL_POINTS,
    Client,
    KillLog,
    SimServer,
    base_env,
    check_compacted,
    check_nothing_in_flight,
    check_same_as_reference,
    final_state,
    open_db,
)

pytest.importorskip("anthropic")
pytest.importorskip("google.genai")

from lexpilot_batch.engine.ingest import file_normaliser
from lexpilot_batch.engine.result_lines import read_lines
from lexpilot_batch.state.workspace import Workspace

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL semantics; proc.kill() is TerminateProcess")

SEED = 13
# Drawn from custom_ids and batch contents only, so both providers roll the same dice.
FAULTS = "line_error=0.05,truncate=0.02,malformed_judge=0.05,expire_batch=0.15,latency=0.05,seed=7"
CLAUDE, GEMINI = "anthropic/claude-sim", "google/gemini-sim"
# Groups of at most 3 requests of a wave go through each API's synchronous call (`--tail-sync`): the
# first waves' travel as batches, most later ones at once.
PREPARE = (
    *("prepare", "--stage", "all", "--run-id", "r1", "--model", CLAUDE, "--model", GEMINI, "--limit", "4"),
    *("--tail-sync", "3"),
)
ADVANCE = ("poll-and-advance", "--submit", "--wait", "--poll-interval", "0.05", "--create-grace", "0.5")


def client_for(root: Path, server: SimServer) -> Client:
    origin = server.url.removesuffix("/v1")
    env = base_env(
        OPENAI_BASE_URL=server.url,
        OPENAI_API_KEY="sk-dummy",
        ANTHROPIC_BASE_URL=origin,
        ANTHROPIC_API_KEY="sk-ant-dummy",
        GOOGLE_GEMINI_BASE_URL=origin,
        GOOGLE_API_KEY="g-dummy",
    )
    return Client(root, env, log_path=root.parent / f"{root.name}.log")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("native-reference")
    with SimServer(base / "sim", SEED, FAULTS, base / "server.log") as server:
        client = client_for(base / "ws", server)
        client.run(*PREPARE)
        client.run(*ADVANCE)
    state = final_state(base / "ws")
    assert Counter(s for s, _, _ in state["threads"].values()) == Counter(done=2 * (4 * 6))
    assert any(attempt > 1 for _, _, attempt, *_ in state["requests"].values())  # the faults forced retries
    return state


def check_bookkeeping(root: Path) -> None:
    """Every saved result line (read as its API's) is one request of its file, ingested once."""
    db = open_db(root)
    assert db is not None
    try:
        requests = {r["custom_id"]: dict(r) for r in db.execute("SELECT * FROM requests")}
        files = {r["pk"]: dict(r) for r in db.execute("SELECT * FROM files")}
        assert db.execute("SELECT COUNT(*) FROM anomalies").fetchone()[0] == 0
    finally:
        db.close()
    assert {f["status"] for f in files.values()} == {"ingested"}
    batched = [f for f in files.values() if f["backend"] == "batch"]
    assert len({f["batch_id"] for f in batched}) == len(batched), "two workspace files share a batch"
    assert {f["model"] for f in files.values() if f["backend"] == "sync"} >= {CLAUDE, GEMINI}
    seen: dict[int, Counter] = defaultdict(Counter)
    with Workspace(root, writable=False) as ws:
        for f in files.values():
            read = file_normaliser(ws, f)
            for column in ("output_path", "error_path"):
                if not f[column]:
                    continue
                for _number, line, _raw, _flaw in read_lines(root / f[column]):
                    assert line is not None
                    cid = (read(line) if read else line)["custom_id"]
                    assert requests[cid]["file_pk"] == f["pk"], f"{cid} answered in another file's results"
                    seen[f["pk"]][cid] += 1
    assert all(max(c.values()) == 1 for c in seen.values()), "a custom_id answered twice in one file's results"


def check_provider(server: SimServer, root: Path) -> None:
    """At the provider, every batch of each API is a recorded file's, and no file has two."""
    import anthropic
    from google import genai
    from openai import OpenAI

    db = open_db(root)
    assert db is not None
    try:
        recorded = {r["batch_id"]: dict(r) for r in db.execute("SELECT * FROM files WHERE backend = 'batch'")}
        refused = {r[0] for r in db.execute("SELECT batch_id FROM other_batches WHERE why = 'token_limit'")}
    finally:
        db.close()
    origin = server.url.removesuffix("/v1")
    claude = anthropic.Anthropic(base_url=origin, api_key="sk-ant-dummy")
    message_batches = [b.id for b in claude.messages.batches.list(limit=100)]
    gemini = genai.Client(api_key="g", http_options={"base_url": origin, "api_version": "v1beta"})
    gemini_batches = [(j.name or "", j.display_name or "") for j in gemini.batches.list(config={"page_size": 100})]
    openai_batches = [b.id for b in OpenAI(base_url=server.url, api_key="sk").batches.list(limit=100)]
    for model, ids in ((CLAUDE, message_batches), (GEMINI, [name for name, _ in gemini_batches])):
        mine = {batch_id for batch_id, f in recorded.items() if f["model"] == model}
        assert sorted(ids) == sorted(mine), f"{model}: provider batches and recorded batches differ"
    files = Counter(json.dumps(name.split(" file=")[1].split(" ")[0]) for _, name in gemini_batches)
    assert max(files.values()) == 1, f"a Gemini file batched twice: {files}"
    others = {batch_id for batch_id, f in recorded.items() if f["model"] not in (CLAUDE, GEMINI)}
    assert set(openai_batches) - refused == others


@pytest.mark.slow  # a campaign of processes over two APIs: a minute
def test_sigkill_at_every_commit_gap_of_both_native_backends(reference, tmp_path):
    # Each kill starts a fresh process (":2" is the second pass after the previous kill), in the
    # order the waves reach them: Claude's and Gemini's first waves travel as batches, most later
    # groups at once (`--tail-sync 3`). The gaps every backend shares (compiling, closing a wave)
    # are `scenarios/test_crash.py`'s.
    points = [
        "anthropic.after_upload:1",  # checked and hashed: nothing has left the workspace
        "anthropic.after_create:1",  # the batch exists, holds no tag, and the database does not know it
        "google.after_upload:1",  # the File API holds the file; the database does not know it
        "google.after_create:1",
        "anthropic.after_download:1",  # results saved under responses/, not recorded
        "google.after_download:1",
        "ingest.before_commit:1",  # a native result file read and applied, not committed
        "compact.before_record:1",  # the first finished wave's file compressed, not recorded
        "anthropic.after_call:2",  # a Message answered, its line not written: sent again, saved once
        "google.after_call:2",
        "compact.before_unlink:3",  # recorded, the plain file not removed
    ]
    assert {p.split(":")[0] for p in points} >= set(NATIVE_KILL_POINTS)
    with SimServer(tmp_path / "sim", SEED, FAULTS, tmp_path / "server.log") as server:
        client = client_for(tmp_path / "ws", server)
        log = KillLog(client.root, server.state_dir)
        client.run(*PREPARE)
        for point in points:
            log.before()
            assert client.kill_at(point, *ADVANCE), f"the run finished before reaching {point}"
            log.landed(point)
        client.run(*ADVANCE)
        print(log.summary("native backends, chosen points"))
        check_same_as_reference(client.root, reference)
        check_nothing_in_flight(client)
        check_bookkeeping(client.root)
        check_provider(server, client.root)
        check_compacted(client.root)  # every file, the native batches' and calls' included
