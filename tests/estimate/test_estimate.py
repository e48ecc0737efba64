"""Estimates: the dry run compiles in memory exactly what `prepare` compiles, writes nothing, and
its projection brackets what a fault-free run really sends; costs and calibration by hand."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.settings import ROLES, Settings
from lexpilot_batch.data import Case, DatasetFile, load_dataset
from lexpilot_batch.engine.loop import poll_and_advance, submit
from lexpilot_batch.engine.session import ProviderOptions
from lexpilot_batch.errors import DataError, ManifestMismatch
from lexpilot_batch.estimate import (
    CHARS_PER_TOKEN,
    COMPLETION_TOKENS,
    RESPONSE_CHARS,
    Estimate,
    dry_run_prepare,
    estimate_workspace,
    open_readonly,
    render,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import RunSpec
from lexpilot_batch.util.resources import sample_dataset
from tests.helpers.cases import make_case
from tests.helpers.engine import finish, open_session, prepare_runs, wave_count

SIMULATED = ProviderOptions(provider="simulated", sim_faults="")


@pytest.fixture(autouse=True)
def _no_backend_env(monkeypatch):
    for role in ROLES:
        monkeypatch.delenv(f"LEXPILOT_{role.upper()}_BACKEND", raising=False)
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


def dry_run(root: Path, stage: str, runs=("r1",), options: ProviderOptions = SIMULATED, **kwargs) -> Estimate:
    extra = {k: kwargs.pop(k) for k in ("prices", "batch_discount", "clarify_probability") if k in kwargs}
    spec = RunSpec(tuple(runs), ("sim-eval",), stage, **kwargs)
    with open_readonly(root, options) as (ws, session):
        return dry_run_prepare(ws, session, spec, **extra)


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def compiled_per_role(ws: Workspace, wave: int) -> dict[str, tuple[int, int]]:
    """(requests, prompt characters) per role in the wave's request files."""
    requests: Counter[str] = Counter()
    chars: Counter[str] = Counter()
    for path in sorted(ws.wave_dir("requests", wave).glob("*.jsonl")):
        role = path.name.split("__")[0]
        assert "+" not in role, "each role has its own model in these tests"
        for line in path.read_text(encoding="utf-8").splitlines():
            requests[role] += 1
            chars[role] += len(json.loads(line)["body"]["messages"][0]["content"])
    return {role: (requests[role], chars[role]) for role in requests}


def estimated_per_role(estimate: Estimate) -> dict[str, tuple[int, int]]:
    return {role: (w.requests, w.prompt_chars) for role, w in estimate.next_wave.items()}


def sent_per_role(ws: Workspace, where: str = "1", args: tuple = ()) -> Counter:
    rows = ws.store.conn.execute(f"SELECT role, COUNT(*) AS n FROM requests WHERE {where} GROUP BY role", args)
    return Counter({r["role"]: r["n"] for r in rows})


def advance_one_wave(ws: Workspace, session) -> None:
    """Submit the compiled wave, then poll until it is ingested and the next one compiled."""
    submit(ws, session)
    for _ in range(200):
        left = poll_and_advance(ws, session, do_submit=False, wait=False, poll_interval=0)
        if left["in_flight"] == 0:
            return
    raise AssertionError("the wave did not finish")


def assert_ordered(estimate: Estimate) -> None:
    spans = [estimate.projection_requests]
    for p in estimate.projection.values():
        spans += [p.requests, p.prompt_chars, p.prompt_tokens, p.completion_tokens]
    for s in spans:
        assert s.min <= s.expected + 1e-9 and s.expected <= s.max + 1e-9, s


@pytest.mark.parametrize("speculate", [False, True])
def test_dry_run_without_a_workspace_writes_nothing_and_brackets_the_real_run(tmp_path, speculate):
    root = tmp_path / "ws"
    estimate = dry_run(root, "all", speculate=speculate)
    assert not root.exists(), "a dry run must not create the workspace"
    assert estimate.wave == 1 and estimate.next_wave_source == "due"
    assert_ordered(estimate)
    assert estimate.waves_remaining.min == 4  # lca 2, dcg 4, direct/gold 2, interaction ≥ 3
    assert estimate.waves_remaining.max == (8 if speculate else 11)

    with Workspace(root) as ws:
        session = open_session(ws)
        try:
            result = prepare_runs(ws, session, stage="all", speculate=speculate)
            assert result.compiled.wave == 1
            assert compiled_per_role(ws, 1) == estimated_per_role(estimate)
            finish(ws, session)
        finally:
            session.close()
        sent = sent_per_role(ws)
        assert set(sent) == set(estimate.projection)
        for role, p in estimate.projection.items():
            assert p.requests.min <= sent[role] <= p.requests.max, role
        total = sum(sent.values())
        assert estimate.projection_requests.min <= total <= estimate.projection_requests.max
        # The bracket is not trivially wide: consultations really ended at different rounds.
        assert estimate.projection_requests.min < total < estimate.projection_requests.max
        assert estimate.waves_remaining.min <= wave_count(ws) <= estimate.waves_remaining.max


@pytest.mark.parametrize("moment", ["lca finished", "lca wave 2 compiled"])
def test_dry_run_on_an_existing_workspace_changes_nothing_and_matches_prepare(tmp_path, moment):
    root = tmp_path / "ws"
    with Workspace(root) as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="lca")
            if moment == "lca finished":
                finish(ws, session)
            else:
                advance_one_wave(ws, session)
        finally:
            session.close()
    before = snapshot(root)
    with Workspace(root, writable=False) as ws:
        db_before = list(ws.store.conn.iterdump())

    estimate = dry_run(root, "all", runs=("r1", "r2"))

    assert snapshot(root) == before
    with Workspace(root, writable=False) as ws:
        assert list(ws.store.conn.iterdump()) == db_before
    assert [(r.run_id, r.new) for r in estimate.runs] == [("r1", False), ("r2", True)]
    wave = 3 if moment == "lca finished" else 2
    assert estimate.wave == wave
    with Workspace(root) as ws:
        session = open_session(ws)
        try:
            result = prepare_runs(ws, session, stage="all", runs=("r1", "r2"))
        finally:
            session.close()
        assert result.compiled.wave == wave
        compiled = compiled_per_role(ws, wave)
        assert compiled == estimated_per_role(estimate)
        # r1's interaction threads start from its answered LCA steps: user replies or extractions.
        if moment == "lca finished":
            assert {"user", "judge"} <= set(compiled)


def test_dry_run_while_a_wave_is_in_flight_compiles_nothing(tmp_path):
    root = tmp_path / "ws"
    with Workspace(root) as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="lca")
            submit(ws, session)
        finally:
            session.close()
    n_cases = len(load_dataset(None).cases)
    estimate = dry_run(root, "ljp-direct", runs=("r2",))
    assert estimate.next_wave_source == "in_flight" and estimate.next_wave == {} and estimate.wave is None
    assert estimate.in_flight_wave == 1 and estimate.in_flight_requests == {"eval": 2 * n_cases}
    # The LCA wave in flight, still to be paid for; then its labels (n_cases each variant), then r2's
    # direct gen, then its extraction.
    assert estimate.projection["judge"].requests.max == 2 * n_cases + n_cases
    assert estimate.projection["eval"].requests.max == 2 * n_cases + n_cases
    assert estimate.waves_remaining.max == 2
    assert "Wave 1 is under way" in render(estimate)
    with Workspace(root) as ws:
        session = open_session(ws)
        try:
            result = prepare_runs(ws, session, stage="ljp-direct", runs=("r2",))
        finally:
            session.close()
        assert result.compiled.in_flight and not result.compiled.compiled


@pytest.mark.parametrize(
    "waves,moment",
    [
        (1, "compiled"),
        pytest.param(1, "in flight", marks=pytest.mark.slow),  # the other two moments: `-m slow`
        pytest.param(2, "compiled", marks=pytest.mark.slow),
        (2, "in flight"),
    ],
)
def test_estimate_workspace_mid_run_brackets_what_remains(tmp_path, waves, moment):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="all", limit=8)
            for _ in range(waves):
                advance_one_wave(ws, session)
            if moment == "in flight":
                submit(ws, session)
            estimate = estimate_workspace(ws, session)
            open_wave = waves + 1
            if moment == "compiled":
                assert estimate.wave == open_wave and estimate.next_wave_source == "compiled"
                pending = sent_per_role(ws, "wave = ? AND status = 'pending'", (open_wave,))
                assert {r: w.requests for r, w in estimate.next_wave.items()} == dict(pending)
                already = sent_per_role(ws, "wave < ?", (open_wave,))
            else:
                assert estimate.wave is None and estimate.in_flight_wave == open_wave
                assert estimate.next_wave == {}
                already = sent_per_role(ws, "status != 'pending'")  # what is in flight is projected
            assert_ordered(estimate)
            finish(ws, session)
        finally:
            session.close()
        final = sent_per_role(ws)
        for role in ROLES:
            p = estimate.projection.get(role)
            low, high = (p.requests.min, p.requests.max) if p else (0, 0)
            assert already[role] + low <= final[role] <= already[role] + high, role
        total = sum(final.values()) - sum(already.values())
        assert estimate.projection_requests.min <= total <= estimate.projection_requests.max
        assert estimate_workspace(ws, open_session(ws)).projection == {}


def test_cost_by_hand_on_one_case(tmp_path):
    case = load_dataset(None).cases[0]
    gen_chars = len(prompts.force_judge_prompt(case.underspecified_history))
    ext_chars = len(prompts.extract_verdicts_prompt(case.claims, "某" * RESPONSE_CHARS["eval"]))
    prices = {"eval": {"input": 2.0, "output": 8.0}, "judge": {"input": 1.0, "output": 4.0}}
    options = ProviderOptions(backends={"eval": "sync", "user": "batch", "judge": "batch"})

    e = dry_run(tmp_path / "none", "ljp-direct", limit=1, options=options, prices=prices)
    gen_tokens, ext_tokens = round(gen_chars / CHARS_PER_TOKEN), round(ext_chars / CHARS_PER_TOKEN)
    assert list(e.next_wave) == ["eval"]
    w = e.next_wave["eval"]
    assert (w.requests, w.prompt_chars, w.prompt_tokens, w.completion_tokens) == (
        1,
        gen_chars,
        gen_tokens,
        COMPLETION_TOKENS["eval"],
    )
    eval_cost = (gen_tokens * 2.0 + COMPLETION_TOKENS["eval"] * 8.0) / 1e6  # sync: list price
    judge_cost = (ext_tokens * 1.0 + COMPLETION_TOKENS["judge"] * 4.0) / 1e6 * 0.5  # batch: half
    assert w.cost_usd == pytest.approx(eval_cost) and e.next_wave_cost_usd == pytest.approx(eval_cost)
    judge = e.projection["judge"]
    assert (judge.requests.min, judge.requests.max, judge.prompt_chars.max) == (1, 1, ext_chars)
    assert judge.cost_usd is not None
    assert judge.cost_usd.expected == pytest.approx(judge_cost)
    for k in ("min", "expected", "max"):
        assert getattr(e.projection_cost_usd, k) == pytest.approx(eval_cost + judge_cost)
    assert "cost USD" in render(e)

    manual = ProviderOptions(backends={"eval": "batch", "user": "batch", "judge": "manual"})
    e = dry_run(tmp_path / "none", "ljp-direct", limit=1, options=manual, prices=prices, batch_discount=0.25)
    assert e.next_wave["eval"].cost_usd == pytest.approx(
        (gen_tokens * 2.0 + COMPLETION_TOKENS["eval"] * 8.0) / 1e6 * 0.75
    )
    assert e.projection["judge"].cost_usd is None and e.projection_cost_usd is None

    unpriced = dry_run(tmp_path / "none", "ljp-direct", limit=1, options=options, prices={"eval": prices["eval"]})
    assert unpriced.projection["judge"].cost_usd is None and unpriced.projection_cost_usd is None
    assert unpriced.next_wave_cost_usd == pytest.approx(eval_cost)  # the next wave has no judge request

    free = dry_run(tmp_path / "none", "ljp-direct", limit=1, options=options)
    assert free.next_wave_cost_usd is None and free.projection_cost_usd is None and not free.prices_given
    assert not (tmp_path / "none").exists()


def test_calibration_from_answered_requests(tmp_path):
    fresh = dry_run(tmp_path / "ws", "lca")
    a = fresh.assumptions
    assert a.chars_per_token == CHARS_PER_TOKEN and a.chars_per_token_measured_on == 0
    assert a.completion_tokens == COMPLETION_TOKENS and a.clarify_probability == 0.5

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="lca")
            finish(ws, session)
        finally:
            session.close()
        db = ws.store.conn
        chars, tokens, n = db.execute(
            "SELECT SUM(prompt_chars), SUM(prompt_tokens), COUNT(*) FROM requests WHERE prompt_tokens > 0"
        ).fetchone()
        eval_completion = db.execute(
            "SELECT AVG(completion_tokens) FROM requests WHERE role = 'eval' AND status = 'answered'"
        ).fetchone()[0]
        eval_text = db.execute(
            "SELECT AVG(LENGTH(text)) FROM requests WHERE role = 'eval' AND status = 'answered'"
        ).fetchone()[0]
        labels = [
            json.loads(r[0])
            for r in db.execute("SELECT value FROM requests WHERE step = 'lca.u.cls' AND status = 'answered'")
        ]
        shares = dict(
            db.execute(
                "SELECT role, 1.0 * SUM(cached_tokens) / SUM(prompt_tokens) FROM requests WHERE prompt_tokens > 0"
                " GROUP BY role"
            )
        )

    measured = dry_run(tmp_path / "ws", "lca", runs=("r2",))
    a = measured.assumptions
    assert a.chars_per_token == pytest.approx(chars / tokens) and a.chars_per_token_measured_on == n
    assert 1.45 < a.chars_per_token < 1.6  # the simulated provider counts about 1.5 characters a token
    assert a.completion_tokens["eval"] == round(eval_completion) and a.completion_tokens_measured_on["eval"] > 0
    assert a.response_chars["eval"] == round(eval_text)
    assert a.clarify_probability == pytest.approx(labels.count("clarification") / len(labels))
    assert a.clarify_probability_measured_on == len(labels)
    assert set(fresh.assumptions.cached_share.values()) == {0.0}  # no saving assumed unmeasured
    assert {r: a.cached_share[r] for r in shares} == pytest.approx(shares) and a.cached_share_measured_on["judge"] > 0
    w = measured.next_wave["eval"]
    assert w.prompt_tokens == round(w.prompt_chars / (chars / tokens))
    assert w.prompt_tokens != round(w.prompt_chars / CHARS_PER_TOKEN)
    assert w.completion_tokens == w.requests * round(eval_completion)
    assert "measured on" in render(measured)


def test_clarification_probability_weights_the_expectation(tmp_path):
    never = dry_run(tmp_path / "ws", "ljp-interaction", clarify_probability=0.0)
    always = dry_run(tmp_path / "ws", "ljp-interaction", clarify_probability=1.0)
    n = len(load_dataset(None).cases)
    for e in (never, always):
        assert e.projection_requests.min == 3 * n  # a1, its label, extraction
        assert e.projection_requests.max == 11 * n  # a1 c1 r1 a2 c2 r2 a3 c3 r3 final extraction
        assert e.assumptions.clarify_probability_given
    assert never.projection_requests.expected == pytest.approx(never.projection_requests.min)
    assert always.projection_requests.expected == pytest.approx(always.projection_requests.max)
    assert always.projection["user"].requests.expected == pytest.approx(3 * n)
    assert never.waves_remaining.min == 3 and never.waves_remaining.max == 11


def test_changed_settings_are_refused_as_prepare_refuses_them(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="lca")
        finally:
            session.close()
    with pytest.raises(ManifestMismatch) as err:
        dry_run(tmp_path / "ws", "lca", settings=replace(Settings(), temperature=0.3))
    assert "settings.temperature" in str(err.value)


def test_render_and_json(tmp_path):
    e = dry_run(tmp_path / "ws", "lca", runs=("r1", "r2"))
    text = render(e)
    assert "Dry run: nothing was written." in text and "Next wave 1" in text
    assert "Waves remaining: 2 to 2" in text and "Assumptions: 1.30 prompt chars/token (default)" in text
    data = json.loads(json.dumps(e.to_json(), ensure_ascii=False))
    n = len(load_dataset(None).cases)
    assert data["next_wave"]["eval"]["requests"] == 4 * n
    assert data["projection"]["judge"]["requests"] == {"min": 4 * n, "expected": 4 * n, "max": 4 * n}
    assert [r["run_id"] for r in data["runs"]] == ["r1", "r2"]
    assert data["assumptions"]["backends"] == {"eval": "simulated", "user": "simulated", "judge": "simulated"}


@pytest.mark.slow  # a large dataset traced for memory: a long simulation
def test_dry_run_reads_the_cases_of_new_runs_once_and_never_holds_the_dataset(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    case = make_case()
    case["complete_history"][0]["content"] = "借款" * 20_000  # 120 KB of UTF-8 per case
    cases = [{**case, "case_number": i} for i in range(240)]  # about 30 MB
    path.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    reads: list[int | None] = []
    real_read = DatasetFile.read_cases

    def counted(self: DatasetFile, limit: int | None = None) -> Iterator[Case]:
        reads.append(limit)
        return real_read(self, limit)

    monkeypatch.setattr(DatasetFile, "read_cases", counted)
    first = dry_run(tmp_path / "ws", "all", runs=("r1", "r2"), dataset=path)
    assert reads == [240]  # one pass for both new runs
    tracemalloc.start()
    try:
        again = dry_run(tmp_path / "ws", "all", runs=("r1", "r2"), dataset=path)
        _, dry_run_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        load_dataset(path)
        _, loaded_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert again.projection_requests == first.projection_requests
    assert loaded_peak > 20 * 2**20  # the reference: every case in memory
    assert dry_run_peak < loaded_peak / 2, (dry_run_peak, loaded_peak)


def test_a_dataset_changed_during_a_dry_run_is_refused_as_prepare_refuses_it(tmp_path, monkeypatch):
    path = tmp_path / "cases.json"
    raw = sample_dataset().read_bytes()
    path.write_bytes(raw)
    real_read = DatasetFile.read_cases

    def change_then_read(self: DatasetFile, limit: int | None = None) -> Iterator[Case]:
        path.write_bytes(raw.replace("借".encode(), "贷".encode(), 1))
        return real_read(self, limit)

    monkeypatch.setattr(DatasetFile, "read_cases", change_then_read)
    with pytest.raises(DataError, match="changed while it was being read"):
        dry_run(tmp_path / "ws", "lca", dataset=path)


def test_a_role_split_over_backends_is_mixed_and_has_no_single_cost(tmp_path, monkeypatch):
    """Several evaluated models, one a provider without a Batch API: each run's model has its own
    backend, and no price factor fits the eval role as a whole."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    spec = RunSpec(("r1",), ("openai/gpt-4o-mini", "deepseek/deepseek-chat"), "lca", Settings(judge_model="openai/o3"))
    prices = {role: {"input": 1.0, "output": 2.0} for role in ROLES}
    with open_readonly(tmp_path / "ws", ProviderOptions()) as (ws, session):
        estimate = dry_run_prepare(ws, session, spec, prices=prices)
    n = len(load_dataset(None).cases)
    assert [r.model for r in estimate.runs] == ["openai/gpt-4o-mini", "deepseek/deepseek-chat"]
    assert estimate.next_wave["eval"].backend == "mixed" and estimate.next_wave["eval"].requests == 2 * 2 * n
    assert estimate.next_wave["eval"].cost_usd is None and estimate.projection["eval"].cost_usd is None
    assert estimate.projection["judge"].backend == "batch" and estimate.projection["judge"].cost_usd is not None
    assert estimate.assumptions.backends == {"eval": "mixed", "user": "batch", "judge": "batch"}


def test_two_evaluated_models_are_priced_each_at_its_own_price_in_aligned_columns(tmp_path):
    """Issue 29 item 4: prices were per role, so two evaluated models could not be priced apart,
    there was no total per model, and long numbers ran together (`38,880122,418,262`)."""
    mini = load_prices_of("gpt-4o-mini")
    twice = {"input": 2 * mini["input"], "output": 2 * mini["output"]}
    prices = {"openai/gpt-4o": twice, "user": {"input": 1.0, "output": 1.0}, "judge": {"input": 1.0, "output": 1.0}}
    spec = RunSpec(("r1",), ("openai/gpt-4o-mini", "openai/gpt-4o"), "lca")
    with open_readonly(tmp_path / "ws", SIMULATED) as (ws, session):
        e = dry_run_prepare(ws, session, spec, prices=prices)
    by_model = e.projection_cost_by_model
    small, large = by_model["openai/gpt-4o-mini"], by_model["openai/gpt-4o"]
    assert small is not None and large is not None and small.expected > 0
    assert large.expected == pytest.approx(2 * small.expected)  # the same requests at twice the price
    eval_cost = e.projection["eval"].cost_usd
    assert eval_cost is not None and eval_cost.expected == pytest.approx(small.expected + large.expected)
    assert e.projection_cost_usd is not None
    assert e.projection_cost_usd.expected == pytest.approx(sum(c.expected for c in by_model.values() if c))
    text = render(e)
    block = text.split("Projection to the end of every run", 1)[1].split("Waves remaining", 1)[0]
    table = [line for line in block.splitlines()[1:] if line.startswith("  ") and not line.startswith("  model")]
    # Every cell two spaces from the next: a row splits into exactly its columns.
    header = table[0].split()
    assert header[:2] == ["role", "requests"]
    for line in table[1:]:
        if line.strip().startswith(("eval", "user", "judge")):
            assert len([c for c in line.strip().split("  ") if c.strip()]) == 5, line
    assert "openai/gpt-4o-mini" in block and "total" in block


def load_prices_of(model: str) -> dict[str, float]:
    from lexpilot_batch.providers.prices import bundled_prices

    return dict(bundled_prices()[model])


def projected_cost(ws: Workspace, session, prices: dict) -> tuple[float, float, Estimate]:
    """`status`'s total cost so far and projected cost (`status.summary`, over the estimate)."""
    from lexpilot_batch.status.summary import summarize

    estimate = estimate_workspace(ws, session, prices)
    expected: dict[str, float | None] = {
        m: c.expected if c else None for m, c in estimate.projection_cost_by_model.items()
    }
    models = summarize(ws, prices=prices, projected=expected)["models"].values()
    return sum(e["cost_usd"] for e in models), sum(e["projected_cost_usd"] for e in models), estimate


def test_the_projected_cost_counts_the_wave_in_flight_until_it_is_paid(tmp_path):
    """Sending a compiled wave moves none of its cost: its requests are still to be paid for (the
    projection started after it, and `status`'s projected cost dropped by the wave's cost until its
    answers came in); at the end the projected cost is the cost paid."""
    prices = {role: {"input": 1.0, "output": 4.0} for role in ROLES}
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="all", limit=4)
            advance_one_wave(ws, session)  # wave 2 compiled, the assumptions measured on wave 1
            so_far, compiled, before = projected_cost(ws, session, prices)
            submit(ws, session)
            paid, in_flight, during = projected_cost(ws, session, prices)
            finish(ws, session)
            paid_at_end, at_end, _ = projected_cost(ws, session, prices)
        finally:
            session.close()
    assert so_far == paid > 0 and before.next_wave_source == "compiled" and during.in_flight_wave == 2
    assert in_flight == pytest.approx(compiled) and compiled > so_far
    assert during.projection_requests == before.projection_requests
    assert during.projection_cost_usd == pytest.approx(before.projection_cost_usd)
    # Wave by wave, the wave in flight is the first still ahead, sent as it was compiled.
    assert before.tail_auto is not None and during.tail_auto is not None
    first = during.tail_auto.waves[0]
    assert (first.wave, first.in_flight, first.requests) == (2, True, sum(during.in_flight_requests.values()))
    assert not before.tail_auto.waves[0].in_flight and before.tail_auto.waves[0].requests == first.requests
    assert [w.wave for w in during.tail_auto.waves] == [w.wave for w in before.tail_auto.waves]
    assert during.tail_auto.cost_usd == pytest.approx(before.tail_auto.cost_usd)
    assert during.tail_sync.batch_round_trips_without == before.tail_sync.batch_round_trips_without
    assert "in flight: sent as shown" in render(during) and "in flight: sent" not in render(before)
    assert at_end == pytest.approx(paid_at_end) and paid_at_end > so_far
