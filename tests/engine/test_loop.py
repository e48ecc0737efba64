"""The wave engine end to end against the simulated provider over real HTTP."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.data import load_dataset
from lexpilot_batch.errors import WorkspaceBusy
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status import detail
from tests.helpers.engine import finish, open_session, prepare_runs, records, request_lines, thread_counts, wave_count


@pytest.fixture
def ws(tmp_path):
    with Workspace(tmp_path / "ws") as workspace:
        yield workspace


@pytest.fixture
def session(ws):
    s = open_session(ws)
    yield s
    s.close()


def test_lca_finishes_in_two_waves_with_valid_batch_files(ws, session):
    result = prepare_runs(ws, session, stage="lca")
    assert result.compiled.wave == 1
    n_cases = len(load_dataset(None).cases)
    assert result.compiled.requests == 2 * n_cases
    finish(ws, session)

    assert wave_count(ws) == 2
    assert thread_counts(ws) == {"done": 2 * n_cases}
    recs = records(ws)
    assert {r["label"] for r in recs.values()} <= {"judgment", "clarification"}
    assert {r["history_type"] for r in recs.values()} == {"complete", "underspecified"}

    files = request_lines(ws)
    ids = [line["custom_id"] for lines in files.values() for line in lines]
    assert len(ids) == len(set(ids))
    assert all(len(i) <= 64 and i.isascii() for i in ids)
    for path, lines in files.items():
        assert len({line["body"]["model"] for line in lines}) == 1, path
        assert all(line["url"] == "/v1/chat/completions" and line["method"] == "POST" for line in lines)
        assert all(len(line["body"]["messages"]) == 1 and line["body"]["n"] == 1 for line in lines)


def test_an_azure_deployment_is_rehearsed_with_the_lines_of_its_real_run(ws, session):
    """Azure's v1 batch lines and batches name `/chat/completions`: a rehearsal wrote OpenAI's
    `/v1/chat/completions`, so it never sent what the real run sends (and gave other custom_ids)."""
    prepare_runs(ws, session, stage="lca", model="azure/my-deployment", limit=2)
    route = session.route("eval", "azure/my-deployment", "azure")
    assert (route.backend, route.limits.endpoint, route.limits.file_expiry) == (
        "simulated",
        "/chat/completions",
        14 * 86400,
    )
    finish(ws, session)
    azure = [line for path, lines in request_lines(ws).items() if "azure" in path for line in lines]
    assert azure and {line["url"] for line in azure} == {"/chat/completions"}
    assert thread_counts(ws) == {"done": 4}


def test_eval_files_never_contain_hidden_facts(ws, session):
    prepare_runs(ws, session, stage="all")
    finish(ws, session)
    dataset = load_dataset(None)
    hidden = set()
    for case in dataset.cases:
        rendered = prompts.render_key_details(case.key_details)
        hidden |= {line.strip("- 【】") for line in rendered.splitlines() if len(line.strip("- 【】")) >= 8}
    # The User Model's replies tell the lawyer facts, by design; everything else must not.
    replies = [
        r[0] for r in ws.store.conn.execute("SELECT text FROM requests WHERE role = 'user' AND text IS NOT NULL")
    ]
    assert any(h in reply for reply in replies for h in hidden), "control: replies should reveal facts"
    eval_files = {p: lines for p, lines in request_lines(ws).items() if "eval" in p.split("/")[-1].split("__")[0]}
    assert len(eval_files) >= 3
    for path, lines in eval_files.items():
        text = "\n".join(line["body"]["messages"][0]["content"] for line in lines)
        for reply in replies:
            text = text.replace(reply, "")
        leaked = [h for h in hidden if h in text]
        assert not leaked, f"{path} leaks hidden facts: {leaked[:3]}"


def test_running_again_sends_nothing(ws, session):
    prepare_runs(ws, session, stage="lca")
    finish(ws, session)
    before = ws.store.conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    again = prepare_runs(ws, session, stage="lca")
    assert not again.compiled.compiled and again.new_threads == 0
    finish(ws, session)
    assert ws.store.conn.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == before
    assert wave_count(ws) == 2


def test_second_writer_is_refused(ws):
    with pytest.raises(WorkspaceBusy), Workspace(ws.root):
        pass
    with Workspace(ws.root, writable=False) as reader:  # readers are welcome
        assert reader.store.meta("workspace_id") == ws.workspace_id


def test_faults_still_score_every_history_exactly_once(tmp_path):
    faults = "line_error=0.1,truncate=0.03,malformed_judge=0.1,expire_batch=0.3,fail_batch=0.15,http_500=0.05,seed=3"
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, faults, retries=6)
        try:
            prepare_runs(ws, session, stage="lca")
            finish(ws, session)
        finally:
            session.close()
        n_cases = len(load_dataset(None).cases)
        assert thread_counts(ws) == {"done": 2 * n_cases}
        answered = ws.store.conn.execute(
            "SELECT run_pk, case_idx, step, COUNT(*) AS n FROM requests WHERE status = 'answered'"
            " GROUP BY run_pk, case_idx, step"
        ).fetchall()
        assert all(r["n"] == 1 for r in answered)
        assert len(answered) == 4 * n_cases
        info = detail.collect(ws)
        assert info["retried_requests"] > 0
        assert sum(c["failed"] for c in info["requests"].values()) > 0
        assert wave_count(ws) > 2


@pytest.mark.parametrize(
    "speculate,max_waves", [pytest.param(False, 11, marks=pytest.mark.slow), (True, 8)]
)  # the whole benchmark twice over: the run without speculation is a long simulation (`-m slow`)
def test_whole_benchmark_two_models_several_runs_within_the_wave_budget(tmp_path, speculate, max_waves):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            for model in ("sim-a", "sim-b"):
                prepare_runs(ws, session, stage="all", runs=("r1", "r2", "r3"), model=model, speculate=speculate)
            finish(ws, session)
        finally:
            session.close()
        info = detail.collect(ws)
        assert info["waves"] == wave_count(ws) <= max_waves
        assert all(c["in_flight"] == 0 and c["failed"] == 0 for r in info["runs"] for c in r["tasks"].values())
        assert len(info["runs"]) == 6 and all(len(r["tasks"]) == 5 for r in info["runs"])
        # One batch per (endpoint, model) per wave, whatever the number of runs and tasks.
        per_wave = ws.store.conn.execute("SELECT wave, model, COUNT(*) AS n FROM files GROUP BY wave, model").fetchall()
        assert all(r["n"] == 1 for r in per_wave)
        discarded = sum(c["discarded"] for c in info["requests"].values())
        assert (discarded > 0) == speculate


@pytest.mark.slow  # the whole benchmark, twice: a long simulation
def test_speculation_changes_no_record(tmp_path):
    outcomes = []
    for speculate in (False, True):
        with Workspace(tmp_path / f"ws{speculate}") as ws:
            session = open_session(ws)
            try:
                prepare_runs(ws, session, stage="ljp-interaction", speculate=speculate)
                finish(ws, session)
            finally:
                session.close()
            outcomes.append(records(ws))
    assert outcomes[0] == outcomes[1]
    stops = {r["stop_reason"] for r in outcomes[0].values()}
    assert "judgment_round_1" in stops and len(stops) >= 3


@pytest.mark.slow  # every fault over the whole benchmark, and a fault-free run: a long simulation
def test_faults_change_no_record(tmp_path):
    """Retries under every per-request and per-batch fault end with the fault-free run's records."""
    outcomes: list[Any] = []
    for faults in ("", "line_error=0.1,truncate=0.03,malformed_judge=0.1,expire_batch=0.3,fail_batch=0.15,seed=5"):
        with Workspace(tmp_path / f"ws{len(outcomes)}") as ws:
            session = open_session(ws, faults, retries=8)
            try:
                prepare_runs(ws, session, stage="all", limit=8)
                finish(ws, session)
            finally:
                session.close()
            assert set(thread_counts(ws)) == {"done"}
            outcomes.append((records(ws), detail.collect(ws)["retried_requests"]))
    assert outcomes[1][1] > 0, "the faults must have caused retries"
    assert outcomes[0][0] == outcomes[1][0]


def test_every_protocol_branch_is_reached_on_the_bundled_sample(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="all", runs=("r1", "r2", "r3"))
            finish(ws, session)
        finally:
            session.close()
        recs = records(ws)
    stops = {r["stop_reason"] for k, r in recs.items() if k[2] == "ljp_interaction"}
    assert stops == {"judgment_round_1", "judgment_round_2", "judgment_round_3", "forced_final_prediction"}
    dcg = [r for k, r in recs.items() if k[2] == "dcg"]
    decisions = {tuple(round_["decision"] for round_ in r["rounds"]) for r in dcg}
    assert {("否", "是"), ("是", "否"), ("否", "否")} <= decisions  # incl. success only in round 2
    labels = {(r["history_type"], r["label"]) for k, r in recs.items() if k[2] == "lca"}
    assert len(labels) == 4
    verdicts = {c["predicted"] for k, r in recs.items() if k[2].startswith("ljp") for c in r["claims"]}
    assert verdicts == {"支持", "部分支持", "驳回"}


def test_runs_with_different_settings_are_reported_apart(tmp_path):
    from lexpilot_batch import report as report_mod
    from lexpilot_batch.report import results

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        try:
            prepare_runs(ws, session, stage="lca", runs=("a1", "a2"), limit=6)
            prepare_runs(ws, session, stage="lca", runs=("b1",), limit=6, settings=replace(Settings(), temperature=0.2))
            finish(ws, session)
        finally:
            session.close()
        built = report_mod.build_report(results.load_run_results(ws))
    groups = {tuple(g["runs"]): g for g in built["groups"]}
    assert set(groups) == {("a1", "a2"), ("b1",)}
    single = groups[("b1",)]["tasks"]["lca"]["overall"]["macro_f1"]
    assert single["sd"] is None and single["mean"] is not None
    pair = groups[("a1", "a2")]["tasks"]["lca"]["overall"]["macro_f1"]
    assert set(pair["per_run"]) == {"a1", "a2"} and pair["sd"] is not None
