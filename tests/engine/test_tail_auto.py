"""`--tail auto`: per wave, the groups go together on the flex tier (batch price) or through sync
(within `--max-premium`) when running them is quicker than a batch round trip; the same records,
fewer round trips (`engine.tail`). Flex is OpenAI's `service_tier: "flex"`
(platform.openai.com/docs/guides/flex-processing) and Gemini's (ai.google.dev/gemini-api/docs/flex-inference)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.engine.loop import prepare
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.engine.tail import Expected, Spent, TailPolicy, group_usd, wave_travel
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.routing.flex import parse_flex_flags, takes_flex
from lexpilot_batch.providers.routing.routes import RouteRules, resolve_route
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import finish, open_session, prepare_runs, records, request_key

LIMIT = 6
RUNS = ("r1", "r2")
# A batch is expected to take 40 s and a call 1 s, one at a time: a wave of fewer than 40 requests
# goes without a batch, a larger one waits for one.
EXPECT = {"batch": 40.0, "flex": 1.0, "sync": 1.0}


def run(root: Path, **options: Any) -> dict[str, Any]:
    with Workspace(root) as ws:
        session = open_session(ws, concurrency=1, **options)
        prepare_runs(ws, session, stage="all", runs=RUNS, limit=LIMIT, speculate=True)
        finish(ws, session)
        stats = dict(session._server.stats) if session._server else {}
        session.close()
        db = ws.store.conn
        return {
            "records": records(ws),
            "requests": {
                request_key(r[0]): (r[1], r[2]) for r in db.execute("SELECT custom_id, status, text FROM requests")
            },
            "files": [dict(r) for r in db.execute("SELECT wave, roles, model, backend, n_requests, tokens FROM files")],
            "chat_calls": stats.get("calls:chat_completion", 0),
        }


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run(tmp_path_factory.mktemp("plain") / "ws")


def by_wave(files: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for f in files:
        out[f["wave"]].append(f)
    return out


def test_auto_sends_the_small_waves_on_the_flex_tier_with_the_same_records(tmp_path: Path, plain: dict) -> None:
    # The default User Model and judge are real names (DeepSeek's), which a rehearsal judges as
    # their real run would (no flex tier): forced on here, as the bench does.
    auto = run(tmp_path / "ws", tail="auto", expect_latency=EXPECT, flex={"*": True})
    assert auto["records"] == plain["records"]
    assert auto["requests"] == plain["requests"]
    assert [(f["wave"], f["roles"], f["n_requests"]) for f in auto["files"]] == [
        (f["wave"], f["roles"], f["n_requests"]) for f in plain["files"]
    ]
    # The rule, independently: a wave goes flex as a whole when its requests, one at a time, take
    # less than the expected batch; otherwise every group of it is a batch.
    for wave, files in by_wave(auto["files"]).items():
        n = sum(f["n_requests"] for f in files)
        expected = "flex" if n * EXPECT["flex"] < EXPECT["batch"] else "simulated"
        assert {f["backend"] for f in files} == {expected}, (wave, n)
    flexed = sum(f["n_requests"] for f in auto["files"] if f["backend"] == "flex")
    assert flexed > 0 and auto["chat_calls"] == flexed  # each sent once
    trips = len({f["wave"] for f in auto["files"] if f["backend"] != "flex"})
    assert trips < len(by_wave(plain["files"]))


def test_premium_zero_never_pays_list_price_and_a_budget_allows_some(tmp_path: Path, plain: dict) -> None:
    """Flex off for every model (`--flex MODEL=off`): with `--max-premium 0` nothing leaves the
    batches; with a budget, sync groups stay within it."""
    off = {f["model"]: False for f in plain["files"]}
    none = run(tmp_path / "none", tail="auto", expect_latency=EXPECT, flex=off)
    assert {f["backend"] for f in none["files"]} == {"simulated"}
    some = run(tmp_path / "some", tail="auto", expect_latency=EXPECT, flex=off, max_premium=10.0)
    assert some["records"] == plain["records"]
    synced = [f for f in some["files"] if f["backend"] == "sync"]
    assert synced and not [f for f in some["files"] if f["backend"] == "flex"]
    # Premium at the 50% batch discount: a synced token costs one more batch-priced token.
    total = sum(f["tokens"] for f in some["files"])
    assert sum(f["tokens"] for f in synced) <= 0.10 * total


def route(model: str, provider: str | None, **choices: str):
    env = {
        "OPENAI_API_KEY": "k",
        "AZURE_OPENAI_BASE_URL": "https://r.openai.azure.com/openai/v1",
        "GEMINI_API_KEY": "k",
    }
    return resolve_route("eval", model, provider, RouteRules(choices=choices, environ=env))


def test_which_models_take_flex_is_one_table_a_flag_overrides() -> None:
    assert takes_flex(route("openai/o4-mini", "openai"))
    assert takes_flex(route("openai/gpt-5-mini", "openai"))
    assert not takes_flex(route("openai/gpt-4o-mini", "openai"))  # not on the pricing page's Flex list
    assert takes_flex(route("openai/gpt-4o-mini", "openai"), {"openai/gpt-4o-mini": True})
    assert not takes_flex(route("openai/o4-mini", "openai"), {"openai/o4-mini": False})
    assert not takes_flex(route("azure/my-deployment", "azure"))  # a deployment name tells no model
    assert not takes_flex(route("anthropic/claude-sonnet-4-5", "anthropic"))  # no flex tier
    assert takes_flex(route("google/gemini-3-flash-preview", "google"))
    assert parse_flex_flags(["a=on", "b=OFF"]) == {"a": True, "b": False}
    with pytest.raises(ConfigError, match="MODEL=on or MODEL=off"):
        parse_flex_flags(["a=maybe"])


def test_a_rehearsal_judges_flex_as_the_real_run_and_no_flag_puts_an_api_without_one_on_it() -> None:
    def rehearsed(model: str, provider: str | None):
        return route(model, provider, eval="simulated")

    # As the real run: the table for each provider's models; the simulator's own bare names always.
    for model, provider in [
        ("openai/gpt-5-mini", "openai"),
        ("openai/gpt-4o-mini", "openai"),
        ("openai-api/sima/gpt-5-mini", "openai-api/sima"),
        ("google/gemini-3-flash-preview", "google"),
        ("google/gemini-2.5-flash", "google"),
        ("anthropic/claude-sonnet-4-5", "anthropic"),
    ]:
        env = {"SIMA_BASE_URL": "https://sima.example/v1", "SIMA_API_KEY": "k", "GEMINI_API_KEY": "k"}
        real = resolve_route("eval", model, provider, RouteRules(environ=env))
        assert takes_flex(rehearsed(model, provider)) == takes_flex(real), model
    assert takes_flex(rehearsed("sim-eval", None))
    # Anthropic's, Mistral's and Together's APIs have no flex tier: `*=on` passes them by, a flag
    # naming one is refused before anything is compiled for it (its file could never be sent).
    for model, provider in [("anthropic/claude-sim", "anthropic"), ("mistral/mistral-sim", "mistral")]:
        for r in (rehearsed(model, provider), route(model, provider)):
            assert not takes_flex(r, {"*": True})
            with pytest.raises(ConfigError, match=rf"--flex {model}=on: .* has no flex tier .*: --flex {model}=off\)"):
                takes_flex(r, {model: True})
    assert takes_flex(rehearsed("google/gemini-2.5-flash", "google"), {"*": True})
    # A bare name that is not the simulator's own is judged as at an OpenAI-compatible endpoint:
    # flex only when forced (the default User Model and judge are DeepSeek's).
    assert not takes_flex(rehearsed("DeepSeek-R1", None))
    assert takes_flex(rehearsed("DeepSeek-R1", None), {"*": True})
    # A platform that speaks OpenAI's API but has no flex tier: `*` passes it by, a flag is refused;
    # an endpoint of your own may be a gateway to one that has: on when forced.
    for r in (rehearsed("dashscope/qwen-plus", "dashscope"), rehearsed("groq/llama-3.3-70b-versatile", "groq")):
        assert not takes_flex(r, {"*": True})
        with pytest.raises(ConfigError, match=rf"--flex {r.model}=on: .* has no flex tier"):
            takes_flex(r, {r.model: True})
    assert takes_flex(
        rehearsed("openai-api/sima/gpt-4o-mini", "openai-api/sima"), {"openai-api/sima/gpt-4o-mini": True}
    )


def test_a_wave_waiting_for_a_batch_anyway_sends_everything_as_batches() -> None:
    r = route("openai/o4-mini", "openai")
    slow = route("openai/gpt-4o-mini", "openai")
    policy = TailPolicy(auto=True, concurrency=10, expected=Expected(batch=100, flex=10, sync=1))
    # 95 flex requests: ceil(95 / 10) * 10 = 100 s, not less than the batch: stays a batch.
    assert wave_travel(policy, {"a": (r, 95, 1000)}) == {"a": "batch"}
    assert wave_travel(policy, {"a": (r, 89, 1000)}) == {"a": "flex"}
    # The other group is not flex-capable and premium 0 forbids sync: both stay batches.
    assert wave_travel(policy, {"a": (r, 10, 1000), "b": (slow, 10, 1000)}) == {"a": "batch", "b": "batch"}
    budget = TailPolicy(auto=True, concurrency=10, max_premium=10, expected=Expected(batch=100, flex=10, sync=1))
    # (Weighed in tokens: an earlier wave held a model without a bundled price.)
    spent = Spent(batch_tokens=20_000, batch_usd=None)
    # b's 1,000 tokens at list price add a 1,000-token premium: within 10% of 22,000.
    assert wave_travel(budget, {"a": (r, 10, 1000), "b": (slow, 10, 1000)}, spent) == {"a": "flex", "b": "sync"}
    assert spent.sync_tokens == 1000 and spent.batch_tokens == 22_000
    # Now the budget is 10% of 32,000 = 3,200, of which 1,000 is spent: 3,000 more does not fit,
    # nor does everything through sync (4,000 more premium).
    assert wave_travel(budget, {"a": (r, 10, 1000), "b": (slow, 10, 3000)}, spent) == {"a": "batch", "b": "batch"}
    assert math.isclose(spent.sync_tokens, 1000)


def test_the_premium_is_weighed_at_each_models_price() -> None:
    """A group of an expensive model sent through sync weighs what it costs, not its tokens: beside
    cheap batched tokens it would take the premium far past the budget (Claude Opus at 15 USD per
    1M input tokens against GPT-4.1 nano's 0.10, bundled prices)."""
    cheap = route("openai/gpt-4.1-nano", "openai")
    dear = resolve_route(
        "judge", "anthropic/claude-opus-4-1", "anthropic", RouteRules(environ={"ANTHROPIC_API_KEY": "k"})
    )
    expected = Expected(batch=100, flex=10, sync=1)
    # The cheap model forced on flex; Claude has no flex tier (`*` passes it by): its group is sync or batch.
    policy = TailPolicy(auto=True, concurrency=10, max_premium=10, flex={"*": True}, expected=expected)
    groups = {"eval": (cheap, 10, 100_000), "judge": (dear, 10, 9_000)}
    # An earlier wave of the cheap model, batched: 100,000 tokens.
    before = group_usd("eval", cheap.model, 10, 100_000)
    assert before is not None
    # In tokens the judge's 9,000 fit 10% of 100,000 ...
    assert wave_travel(policy, groups, Spent(batch_tokens=100_000, batch_usd=None)) == {"eval": "flex", "judge": "sync"}
    # ... in dollars they are about ten times the budget: the wave waits for its batches.
    spent = Spent(batch_tokens=100_000, batch_usd=before)
    assert wave_travel(policy, groups, spent) == {"eval": "batch", "judge": "batch"}
    assert spent.sync_usd == 0 and spent.batch_usd is not None and spent.batch_usd > 0.2
    # Cheap tokens through sync beside dear ones batched before fit, as they cost little.
    no_flex = TailPolicy(auto=True, concurrency=10, max_premium=10, flex={"*": False}, expected=expected)
    spent = Spent()
    spent.add(group_usd("judge", dear.model, 100, 1_000_000), 1_000_000, sync=False)  # an earlier wave of the judge
    assert wave_travel(no_flex, {"eval": (cheap, 10, 9_000)}, spent) == {"eval": "sync"}
    assert spent.sync_usd is not None and 0 < spent.sync_usd < 0.01


def test_the_workspace_remembers_the_tail_policy(tmp_path: Path) -> None:
    with Workspace(tmp_path / "ws") as ws:
        prices = {"sim-eval": {"input": 3.0, "output": 9.0}}
        session = open_session(
            ws, tail="auto", max_premium=5.0, flex={"sim-eval": False}, expect_latency={"batch": 99.0}, prices=prices
        )
        prepare_runs(ws, session, stage="lca", limit=1)
        session.close()
        policy = Session(ws, ProviderOptions()).tail_policy()
        assert (policy.auto, policy.max_premium, dict(policy.flex), policy.expected.batch) == (
            True,
            5.0,
            {"sim-eval": False},
            99.0,
        )
        assert policy.measures.prices == prices  # what --max-premium weighs dollars at
        assert not Session(ws, ProviderOptions(tail="off")).tail_policy().auto
        with pytest.raises(ConfigError, match="--tail must be"):
            Session(ws, ProviderOptions(tail="sometimes"))
        assert json.loads(ws.store.meta("tail_policy") or "{}")["tail"] == "auto"


PRICES = {role: {"input": 1.0, "output": 4.0} for role in ("eval", "user", "judge")}


def estimate(**options: Any) -> Any:
    from lexpilot_batch.benchmark.settings import Settings
    from lexpilot_batch.estimate import dry_run_prepare
    from lexpilot_batch.study.runs import RunSpec

    spec = RunSpec(RUNS, ("sim-eval",), "all", Settings(), limit=LIMIT, speculate=True)
    session = Session(None, ProviderOptions(provider="simulated", concurrency=1, expect_latency=EXPECT, **options))
    return dry_run_prepare(None, session, spec, prices=PRICES)


def test_the_projection_shows_batch_only_against_auto_wave_by_wave() -> None:
    from lexpilot_batch.estimate import render

    flex = estimate(tail="auto", flex={"*": True}).tail_auto
    assert flex is not None and flex.batch_round_trips == 8 == len(flex.waves)
    assert 0 < flex.auto_round_trips < 8 and flex.premium_usd == 0 and flex.auto_seconds < flex.batch_seconds
    for w in flex.waves:  # the compiler's rule on the expected counts
        fits = math.ceil(w.requests - 1e-9) * EXPECT["flex"] < EXPECT["batch"]
        assert (w.flex, w.batch) == ((w.requests, 0) if fits else (0, w.requests))
    no_flex = estimate(tail="auto", flex={"*": False}).tail_auto
    assert no_flex is not None and (no_flex.auto_round_trips, no_flex.premium_usd) == (8, 0)
    paid = estimate(tail="auto", flex={"*": False}, max_premium=50.0).tail_auto
    assert paid is not None and paid.auto_round_trips < 8 and paid.premium_usd is not None and paid.premium_usd > 0
    assert paid.cost_usd is not None and paid.premium_usd <= 0.5 * paid.cost_usd
    text = render(estimate(tail="auto"))
    assert "Batch-only against --tail auto (--max-premium 0" in text and "auto s" in text


@pytest.mark.parametrize(
    ("model", "flex", "said"),
    [
        # A model whose API has no flex tier, forced on: its file could never be sent.
        ("anthropic/claude-sim", {"anthropic/claude-sim": True}, "has no flex tier"),
        # A flag naming no model of the command or the workspace: it would be remembered and do nothing.
        ("anthropic/claude-sim", {"claude-sim": True}, "names no model of this command or workspace"),
    ],
)
def test_a_flex_flag_that_cannot_be_carried_out_is_refused_before_anything_is_registered(
    tmp_path: Path, model: str, flex: dict[str, bool], said: str
) -> None:
    pytest.importorskip("anthropic")
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, tail="auto", flex=flex)
        try:
            with pytest.raises(ConfigError, match=said):
                prepare_runs(ws, session, model=model, limit=2)
        finally:
            session.close()
        db = ws.store.conn
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM files").fetchone()[0] == 0
        assert ws.store.meta("tail_policy") is None  # not remembered either
        assert not list(ws.root.rglob("*.jsonl"))
        # Without the flag the same command prepares.
        session = open_session(ws, tail="auto")
        try:
            assert prepare_runs(ws, session, model=model, limit=2).new_threads > 0
        finally:
            session.close()


def test_a_flex_flag_for_a_model_an_earlier_command_registered_is_taken(tmp_path: Path) -> None:
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, limit=2)
        session.close()
        session = open_session(ws, tail="auto", flex={"sim-eval": False, "DeepSeek-R1": True})
        try:
            prepare_runs(ws, session, stage="dcg", model="sim-eval", limit=2)
        finally:
            session.close()


def test_tail_auto_and_tail_sync_together_are_refused_and_one_given_wins_over_the_other_remembered(
    tmp_path: Path,
) -> None:
    """`--tail auto` decides every group itself: an N beside it would be ignored while an estimate
    showed it. Given together, the command says to choose; given one, it wins over the other the
    workspace remembers; both remembered (as an earlier version kept them), auto decides."""
    with pytest.raises(ConfigError, match=r"--tail auto and --tail-sync 50 are two ways"):
        Session(None, ProviderOptions(provider="simulated", tail="auto", tail_sync=50))
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, tail_sync=50)
        prepare_runs(ws, session, limit=1)
        session.close()
        auto = open_session(ws, tail="auto")
        assert (auto.tail_policy().auto, auto.tail_sync) == (True, 0)
        auto.close()
        ws.store.set_meta(
            "tail_policy", json.dumps({"tail": "auto", "max_premium": 0.0, "flex": {}, "expect_latency": {}})
        )
        both = open_session(ws)  # both remembered
        assert (both.tail_policy().auto, both.tail_policy().limit) == (True, 0)
        both.close()
        manual = open_session(ws, tail_sync=20)
        assert (manual.tail_policy().auto, manual.tail_policy().limit) == (False, 20)
        manual.close()


def test_a_model_flex_kept_refusing_is_named_by_status_and_a_flag_puts_it_back(tmp_path: Path) -> None:
    from lexpilot_batch.engine.tail import FLEX_REFUSED
    from lexpilot_batch.status.summary import render_summary, summarize

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, tail="auto")
        prepare_runs(ws, session, limit=1)
        session.close()
        ws.store.set_meta(FLEX_REFUSED, json.dumps(["sim-eval"]))  # as `poll` leaves it after a fallback
        assert open_session(ws).tail_policy().refused == {"sim-eval"}
        shown = render_summary(summarize(ws), "ws")
        assert "Flex: sim-eval kept refusing flex calls and travel by batch from now on" in shown
        assert "--flex sim-eval=on" in shown
        again = open_session(ws, flex={"sim-eval": True})
        assert again.tail_policy().refused == frozenset()  # this command tries it again
        retried = open_session(ws, flex={"sim-eval": True})
        retried.flex_refused_now("sim-eval")  # ... and when flex refuses it again during a command, it stays off
        assert retried.tail_policy().refused == {"sim-eval"}
        retried.close()
        prepare_runs(ws, again, stage="dcg", limit=1)  # and, prepared, the workspace forgets the refusal
        again.close()
        assert json.loads(ws.store.meta(FLEX_REFUSED) or "[]") == []
        assert "Flex:" not in render_summary(summarize(ws), "ws")


def test_the_expected_batch_is_measured_on_a_providers_batches_not_a_rehearsals(tmp_path: Path) -> None:
    """The simulator answers a batch at once: counted, a rehearsal's `--tail auto` would expect
    every later batch to take a moment and send nothing flex, unlike its real run."""
    from lexpilot_batch.state.queries import measured_batch_seconds

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, tail="auto")
        prepare_runs(ws, session, limit=1)
        session.close()
        db = ws.store.conn
        with ws.store.transaction() as tx:
            tx.execute(
                "UPDATE files SET batch_status = 'completed', submitted_at = 100, finished_at = 100.05"
            )  # a rehearsal's wave 1, answered at once
        assert measured_batch_seconds(db) is None
        assert open_session(ws).tail_policy().expected.batch == Expected().batch
        with ws.store.transaction() as tx:
            tx.execute("UPDATE files SET backend = 'batch', finished_at = 100 + 1800")  # a provider's
        assert measured_batch_seconds(db) == 1800
        assert open_session(ws).tail_policy().expected.batch == 1800


def test_the_dry_runs_next_wave_travels_as_the_compiler_would_send_it() -> None:
    """`prepare --dry-run --tail auto`: the next wave's table shows its groups on flex when the
    compiler would send them so (it showed every wave on its batch backend)."""
    from lexpilot_batch.benchmark.settings import Settings
    from lexpilot_batch.estimate import dry_run_prepare
    from lexpilot_batch.study.runs import RunSpec

    def next_wave(flex: dict[str, bool]) -> Any:
        spec = RunSpec(RUNS, ("sim-eval",), "all", Settings(), limit=LIMIT, speculate=True)
        options = ProviderOptions(provider="simulated", concurrency=64, expect_latency=EXPECT, tail="auto", flex=flex)
        return dry_run_prepare(None, Session(None, options), spec, prices=PRICES)

    flexed = next_wave({"*": True})
    assert flexed.tail_auto is not None and flexed.tail_auto.waves[0].flex > 0
    assert {entry.backend for entry in flexed.next_wave.values()} == {"flex"}
    batched = next_wave({"*": False})
    assert {entry.backend for entry in batched.next_wave.values()} == {"simulated"}


def test_an_estimate_of_a_compiled_unsent_wave_sends_it_as_the_compiler_did(tmp_path: Path) -> None:
    """The wave compiled but not sent is compiled again and projected as due: the premium budget
    the estimate starts from leaves it out, as the compiler's does (counted twice, it went sync in
    the estimate while the compiler kept it a batch)."""
    from lexpilot_batch.benchmark.settings import Settings
    from lexpilot_batch.estimate import dry_run_prepare
    from lexpilot_batch.study.runs import RunSpec

    options: dict[str, Any] = {"tail": "auto", "max_premium": 50.0, "expect_latency": EXPECT, "concurrency": 64}
    spec = RunSpec(("a",), ("openai/gpt-4o-mini",), "lca", Settings(), limit=3)
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, **options)
        prepare(ws, session, spec)
        compiled = {r[0] for r in ws.store.conn.execute("SELECT backend FROM files WHERE wave = 1")}
        estimate = dry_run_prepare(ws, session, spec, prices=PRICES)
        session.close()
    assert {entry.backend for entry in estimate.next_wave.values()} == compiled


def test_the_projection_numbers_its_waves_as_the_workspace_will(tmp_path: Path) -> None:
    """Mid-run, the projected waves are the workspace's next ones, not renumbered from 1."""
    from lexpilot_batch.engine.loop import poll_and_advance
    from lexpilot_batch.estimate import estimate_workspace

    options: dict[str, Any] = {"tail": "auto", "expect_latency": EXPECT, "concurrency": 64}
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, **options)
        try:
            prepare_runs(ws, session, stage="all", runs=("r1",), limit=2)
            first = estimate_workspace(ws, session, prices=PRICES).tail_auto
            poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            latest = ws.store.conn.execute("SELECT MAX(n) FROM waves").fetchone()[0]
            later = estimate_workspace(ws, session, prices=PRICES).tail_auto
        finally:
            session.close()
    assert first is not None and first.waves[0].wave == 1
    assert latest >= 2 and later is not None and later.waves, latest
    assert later.waves[0].wave in (latest, latest + 1)  # the target wave: compiled unsent, or the next
    assert [w.wave for w in later.waves] == list(range(later.waves[0].wave, later.waves[0].wave + len(later.waves)))


# The study the premium was found over its cap on: every role on gpt-4o-mini (no flex tier), the
# sample's 18 cases. Its eval answers are far shorter than the 500 completion tokens assumed before
# any answer, its judges' near the 400: weighed at those sizes, the early waves' batch cost was
# counted 1.5 times over and the judge groups of the tail moved to sync against it (+10.8% at 10%).
MINI = "openai/gpt-4o-mini"
DEAR_JUDGE = {"judge": {"input": 1.0, "output": 20.0}}  # a --prices file: dear judge completions


@pytest.mark.parametrize(
    "pct,prices", [(10.0, None), pytest.param(5.0, None, marks=pytest.mark.slow), (10.0, DEAR_JUDGE)]
)
def test_the_premium_paid_stays_within_max_premium_of_the_studys_batch_priced_cost(
    tmp_path: Path, pct: float, prices: dict | None
) -> None:
    from lexpilot_batch.benchmark.settings import Settings
    from lexpilot_batch.providers.prices import cost_usd, price_for

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, tail="auto", max_premium=pct, prices=prices)
        prepare_runs(ws, session, stage="all", model=MINI, settings=Settings(MINI, MINI))
        finish(ws, session)
        session.close()
        rows = ws.store.conn.execute(
            "SELECT q.role, q.model, f.backend, q.prompt_tokens, q.completion_tokens, COALESCE(q.cached_tokens, 0)"
            " FROM requests q JOIN files f ON f.pk = q.file_pk"
        ).fetchall()
    paid = batched = 0.0
    for role, model, backend, prompt, completion, cached in rows:
        price = price_for(prices, role, model)
        paid += cost_usd(prompt, completion, price, backend, cached_tokens=cached) or 0.0
        batched += cost_usd(prompt, completion, price, "batch", cached_tokens=cached) or 0.0
    assert {r[2] for r in rows} == {"simulated", "sync"}, "the tail went through sync"
    assert batched > 0 and paid - batched <= pct / 100 * batched, (paid - batched) / batched


def test_auto_plans_flex_with_the_rate_a_providers_flex_files_ran_at_not_a_rehearsals(tmp_path: Path) -> None:
    """`--tail auto` takes a group's time from the requests a second its model's flex files ran at
    (what the adaptive window and the rate limits allowed), once a real provider ran some."""
    from lexpilot_batch.state.queries import measured_call_rates

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, tail="auto")
        prepare_runs(ws, session, limit=1)
        session.close()
        db = ws.store.conn
        model = db.execute("SELECT model FROM files").fetchone()[0]
        with ws.store.transaction() as tx:  # a rehearsal's flex file: not measured
            tx.execute("UPDATE files SET backend = 'flex', n_requests = 100, submitted_at = 0, finished_at = 10")
        assert measured_call_rates(db) == {}
        with ws.store.transaction() as tx:  # a provider's: 100 requests in 50 s
            tx.execute("UPDATE files SET endpoint = 'https://api.openai.com/v1', finished_at = 50")
        assert measured_call_rates(db) == {("flex", model): 2.0}
        policy = open_session(ws, tail="auto", concurrency=64).tail_policy()
        assert policy.group_seconds("flex", model, 1000) == 500.0  # at the measured 2 a second
        # Another model, or the sync backend, still takes --concurrency at a time at its latency.
        assert policy.group_seconds("flex", "other", 1000) == math.ceil(1000 / 64) * policy.expected.flex
        assert policy.group_seconds("sync", model, 64) == policy.expected.sync
