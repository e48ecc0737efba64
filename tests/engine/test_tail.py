"""`--tail-sync N`: a wave's groups of at most N requests travel through chat completions, with
the same records, the same manifests and fewer batch round trips; and the estimate projects it."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine import budgets
from lexpilot_batch.engine.loop import submit
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.engine.tail import wave_backend
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.estimate import dry_run_prepare, render
from lexpilot_batch.providers.routing.routes import RouteRules, resolve_route
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.engine import finish, open_session, prepare_runs, records, request_key

LIMIT = 6
RUNS = ("r1", "r2")
N = 12


def run(root, tail_sync: int) -> dict:
    with Workspace(root) as ws:
        session = open_session(ws, tail_sync=tail_sync)
        prepare_runs(ws, session, stage="all", runs=RUNS, limit=LIMIT, speculate=True)
        finish(ws, session)
        chat_calls = session._server.stats["calls:chat_completion"] if session._server else 0
        session.close()
        db = ws.store.conn
        return {
            "records": records(ws),
            "manifests": [  # but when each was written
                {k: v for k, v in json.loads(r[0]).items() if k != "created_at"}
                for r in db.execute("SELECT manifest FROM runs ORDER BY run_id")
            ],
            "requests": {
                request_key(r[0]): (r[1], r[2]) for r in db.execute("SELECT custom_id, status, text FROM requests")
            },
            "files": [dict(r) for r in db.execute("SELECT wave, roles, model, backend, n_requests FROM files")],
            "chat_calls": chat_calls,
        }


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict:
    return run(tmp_path_factory.mktemp("plain") / "ws", 0)


def round_trips(files: list[dict]) -> int:
    return len({f["wave"] for f in files if f["backend"] != "sync"})


def test_a_waves_small_groups_go_through_chat_completions_with_the_same_records(tmp_path, plain):
    tailed = run(tmp_path / "ws", N)
    assert tailed["records"] == plain["records"]
    assert tailed["manifests"] == plain["manifests"]
    assert tailed["requests"] == plain["requests"]  # every answer, attempts included, the same
    # The same waves and groups; a group goes through sync exactly when it has at most N requests.
    assert [(f["wave"], f["roles"], f["n_requests"]) for f in tailed["files"]] == [
        (f["wave"], f["roles"], f["n_requests"]) for f in plain["files"]
    ]
    sizes: dict[tuple, int] = defaultdict(int)
    for f in tailed["files"]:
        sizes[(f["wave"], f["roles"], f["model"])] += f["n_requests"]
    for f in tailed["files"]:
        expected = "sync" if sizes[(f["wave"], f["roles"], f["model"])] <= N else "simulated"
        assert f["backend"] == expected, f
    assert {f["backend"] for f in plain["files"]} == {"simulated"} and plain["chat_calls"] == 0
    synced = sum(f["n_requests"] for f in tailed["files"] if f["backend"] == "sync")
    assert synced > 0 and tailed["chat_calls"] == synced  # each sent once, through chat completions
    assert round_trips(plain["files"]) == 8
    assert round_trips(tailed["files"]) < 8


def test_the_workspace_remembers_tail_sync_and_a_command_may_change_it(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, tail_sync=500)
        prepare_runs(ws, session, stage="lca", limit=1)
        session.close()
        assert Session(ws, ProviderOptions()).tail_sync == 500
        assert Session(ws, ProviderOptions(tail_sync=0)).tail_sync == 0


def test_only_batched_groups_whose_provider_answers_chat_completions_go_through_sync():
    env = {"AZURE_OPENAI_BASE_URL": "https://r.openai.azure.com/openai/v1", "OPENAI_API_KEY": "k"}

    def route(model: str, provider: str | None, **choices: str):
        return resolve_route("eval", model, provider, RouteRules(choices=choices, environ=env))

    openai, azure = route("openai/gpt-4o-mini", "openai"), route("azure/batch-deployment", "azure")
    assert wave_backend(openai, 10, 10) == "sync"
    assert wave_backend(openai, 11, 10) == "batch"
    assert wave_backend(openai, 1, 0) == "batch"  # 0: off
    assert wave_backend(azure, 1, 10) == "batch"  # a Global Batch deployment answers no chat
    assert wave_backend(route("gpt-4o-mini", None), 1, 10) == "sync"  # bare names: OpenAI-compatible
    assert wave_backend(route("gpt-4o-mini", None, eval="manual"), 1, 10) == "manual"
    assert wave_backend(route("gpt-4o-mini", None, eval="simulated"), 1, 10) == "sync"


PRICES = {role: {"input": 1.0, "output": 4.0} for role in ("eval", "user", "judge")}


def estimate(tail_sync: int):
    spec = RunSpec(RUNS, ("sim-eval",), "all", Settings(), limit=LIMIT, speculate=True)
    session = Session(None, ProviderOptions(provider="simulated", tail_sync=tail_sync))
    return dry_run_prepare(None, session, spec, prices=PRICES)


def test_the_estimate_projects_the_batch_round_trips_and_the_premium_of_tail_sync():
    off, some, every = estimate(0), estimate(N), estimate(10**6)
    assert off.tail_sync.batch_round_trips == off.tail_sync.batch_round_trips_without == 8 == off.waves_remaining.max
    assert off.tail_sync.sync_requests == 0 and off.tail_sync.premium_usd == 0
    assert some.tail_sync.batch_round_trips_without == 8 and 0 < some.tail_sync.batch_round_trips < 8
    assert 0 < some.tail_sync.premium_usd < every.tail_sync.premium_usd
    # Everything through chat completions: no round trip, every request at list price, i.e. a
    # premium of the whole batch-priced cost at the default 50% batch discount.
    assert every.tail_sync.batch_round_trips == 0
    assert every.tail_sync.sync_requests == round(every.projection_requests.expected)
    assert every.tail_sync.premium_usd == pytest.approx(every.projection_cost_usd.expected)
    assert every.tail_sync.premium_share == pytest.approx(1.0)
    assert {w.backend for w in every.next_wave.values()} == {"sync"}
    assert every.next_wave_cost_usd == pytest.approx(2 * off.next_wave_cost_usd)
    text = render(some)
    assert f"Batch round trips, expected path: 8; {some.tail_sync.batch_round_trips} with --tail-sync {N}" in text
    assert "premium" in text and json.dumps(some.to_json())  # the JSON form carries it too


def test_groups_sent_through_sync_are_cut_by_tokens_but_never_wait_for_a_token_budget(tmp_path):
    """Enqueued-token budgets count batches only (`budgets`): a group `--tail-sync` sends through
    chat completions is cut by tokens like any other (the cut happens while lines are written, the
    decision once the group is whole), but none of its files waits for room or counts as enqueued."""
    seen: dict[int, tuple[Any, ...]] = {}
    for limit in (0, 1000):
        with Workspace(tmp_path / f"ws{limit}") as ws:
            session = open_session(ws, tail_sync=limit, max_enqueued_tokens={"sim-eval": 6000})
            prepare_runs(ws, session, stage="lca", limit=LIMIT)
            sent = submit(ws, session)
            db = ws.store.conn
            files = [r[0] for r in db.execute("SELECT backend FROM files WHERE wave = 1 AND model = 'sim-eval'")]
            usage = budgets.usage_by_model(db)["sim-eval"]
            seen[limit] = (files, sent.waiting, budgets.enqueued(db, "sim-eval"), usage)
            finish(ws, session)
            session.close()
            seen[limit] += (records(ws),)
    batched, synced = seen[0], seen[1000]
    assert len(batched[0]) > 2 and set(batched[0]) == {"simulated"}
    assert batched[1] and batched[2] > 0 and batched[3]["submitted_tokens"] > 0
    assert synced[0] == ["sync"] * len(batched[0])  # the same cut, every shard through chat completions
    assert synced[1] == [] and synced[2] == 0
    assert (synced[3]["queued_tokens"], synced[3]["submitted_tokens"]) == (0, 0)
    assert synced[4] == batched[4]


def test_tail_sync_is_an_operational_choice_not_a_stored_setting(tmp_path):
    """`--tail-sync` is remembered like a backend choice and may change at any command; the settings
    a workspace stores once (file limits, profiles...) refuse a different value."""
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, tail_sync=500, max_requests=40)
        prepare_runs(ws, session, stage="lca", limit=1)
        session.close()
        assert Session(ws, ProviderOptions(tail_sync=50)).tail_sync == 50
        assert Session(ws, ProviderOptions(tail_sync=50)).settings["max_requests"] == 40
        with pytest.raises(ConfigError, match=r"--max-requests-per-file 7 \(this workspace uses 40\)"):
            Session(ws, ProviderOptions(tail_sync=50, max_requests=7))
