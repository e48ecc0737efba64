"""The Inspect export (`export --format inspect`, `report/exports/inspect_logs.py`): the logs of a
finished simulated study, read back with inspect_ai's own `read_eval_log`, agree with our own numbers
— every sample's score with the per-case export's row, every metric with the report's per-run value
and with `helpers.independent_metrics` scoring the samples read back, the usage and cost with the
report's — and `inspect view` shows them: a sample's judge explanation, found in headless Chromium."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from typing import Any

import pytest
from inspect_ai.log import EvalLog, read_eval_log
from typer.testing import CliRunner

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.cli import app
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.report import build_report
from lexpilot_batch.report.exports.cases import case_rows
from lexpilot_batch.report.exports.inspect_logs import export_inspect
from lexpilot_batch.report.results import load_run_results
from lexpilot_batch.state.workspace import seed_name
from tests.helpers import independent_metrics
from tests.helpers.browser import DevTools, chromium
from tests.helpers.engine import STUDY_MODELS, STUDY_RUNS, prepare_runs

PRICES = {
    "sim-a": {"input": 0.4, "output": 1.6},
    "openai/sim-b": {"input": 2.0, "output": 8.0, "cached_input": 0.5},
    "DeepSeek-V4.1-Flash": {"input": 0.27, "output": 1.1},
    "DeepSeek-R1": {"input": 0.55, "output": 2.19},
}
ROLES = ("eval", "user", "judge")


@pytest.fixture(scope="module")
def logs(study, tmp_path_factory) -> dict[tuple[str, str, str], EvalLog]:
    """(run id, model, task) -> its log, as inspect_ai reads it back."""
    out = tmp_path_factory.mktemp("inspect")
    exported = export_inspect(study, out, prices=PRICES)
    assert not exported.notes
    found = {}
    for run_id in STUDY_RUNS:
        for model in STUDY_MODELS:
            for task in TASKS:
                path = out / f"{seed_name(run_id)}_{seed_name(model)}_{task}.eval"
                assert path in exported.files
                found[(run_id, model, task)] = read_eval_log(str(path))
    assert sorted(exported.files) == sorted(out.iterdir())  # one log per (run, model, task), nothing else
    return found


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def test_every_samples_score_is_the_per_case_exports_row(study, logs):
    rows = {
        (r["run_id"], r["model"], r["task"], str(r["case_number"]), r["variant"]): r
        for r in case_rows(load_run_results(study))
    }
    compared, mismatches = 0, []
    for (run_id, model, task), log in logs.items():
        assert log.status == "success" and log.samples is not None
        assert log.eval.task == f"lexpilot/{task}" and log.eval.model == model
        for sample in log.samples:
            number, _, variant = str(sample.id).partition("/")
            row = rows.pop((run_id, model, task, number, variant))
            assert sample.scores is not None
            score = sample.scores[task]
            value = score.value
            assert isinstance(value, dict)
            expected: dict[str, Any] = {"correct": int(row["correct"])}
            if task == "lca":
                answer = row["label"]
            elif task == "dcg":
                expected = {"success": int(row["success"])}
                expected |= {f"round_{k}": int(d == "是") for k, d in enumerate(row["decisions"], 1)}
                answer = " / ".join(row["decisions"])
            else:
                expected |= {"claims_correct": row["claims_correct"], "claims": row["claims"]}
                answer = " / ".join(row["predicted"])
            checks = [
                (value, expected),
                (score.answer, answer),
                (sample.metadata["cause_class"], row["cause_class"]),
                ({k: row[k] for k in score.metadata["outcome"]}, score.metadata["outcome"]),
            ]
            for got, want in checks:
                compared += 1
                if got != want:
                    mismatches.append((run_id, model, task, sample.id, got, want))
    assert mismatches == [] and compared > 4 * len(logs)
    assert not rows  # every row has its sample


def test_every_metric_is_the_reports_per_run_value_and_an_independent_scorer_s(study, logs):
    report = build_report(load_run_results(study))
    groups = {g["model"]: g for g in report["groups"]}
    compared, mismatches = 0, []
    for (run_id, model, task), log in logs.items():
        assert log.results is not None
        (score,) = log.results.scores
        assert (score.name, score.scorer, score.scored_samples, score.unscored_samples) == (
            task,
            task,
            len(log.samples or []),
            0,
        )
        got: dict[tuple[str | None, str], float | None] = {(None, m): None for m in TASKS[task].metrics}
        for metric in score.metrics.values():
            key = (None, metric.name) if metric.group is None else (metric.name, metric.group)
            got[key] = metric.value
        # the report's: overall and per class, this run's value
        entry = groups[model]["tasks"][task]
        want = {(None, m): v["per_run"][run_id] for m, v in entry["overall"].items()}
        for cls, of_class in entry["by_class"].items():
            want |= {(cls, m): v["per_run"][run_id] for m, v in of_class.items()}
        got |= {key: None for key in want if key not in got}  # an undefined metric is left out ...
        for name in score.metadata["undefined"]:  # ... and named
            metric, _, cls = name.partition("/")
            assert got[(cls or None, metric)] is None
        # an independent scorer of the samples read back
        by_class: dict[str | None, list[dict]] = defaultdict(list)
        for sample in log.samples or []:
            outcome = sample.scores[task].metadata["outcome"] if sample.scores else {}
            record = {**outcome, "cause_class": sample.metadata["cause_class"]}
            if task == "lca":
                record["history_type"] = sample.metadata["history_type"]
            by_class[None].append(record)
            by_class[record["cause_class"]].append(record)
        independent: dict[tuple[str | None, str], float | None] = {}
        for cls, records in by_class.items():
            if task == "lca":
                scored = independent_metrics.lca(records)
            elif task == "dcg":
                scored = independent_metrics.dcg(records)
            else:
                claims = [
                    {"gold": g, "predicted": p} for r in records for g, p in zip(r["gold"], r["predicted"], strict=True)
                ]
                scored = independent_metrics.ljp([{"claims": claims}])
            independent |= {(cls, m): v for m, v in scored.items()}
        assert set(got) == set(want) == set(independent)
        for key in want:
            compared += 1
            if not (_close(got[key], want[key]) and _close(got[key], independent[key])):
                mismatches.append((run_id, model, task, key, got[key], want[key], independent[key]))
    assert mismatches == [] and compared > 0


def test_usage_and_cost_per_sample_add_up_to_the_reports(study, logs):
    """Each request is counted once, in one sample: over a model's runs and tasks, the samples' usage
    is the report's, role by role, and so is its cost at the same prices."""
    report = build_report(load_run_results(study), PRICES)
    for group in report["groups"]:
        model = group["model"]
        tallies = {role: {"prompt": 0, "completion": 0, "cost": 0.0} for role in ROLES}
        for (_, m, _), log in logs.items():
            if m != model:
                continue
            for sample in log.samples or []:
                for role, usage in sample.role_usage.items():
                    prompt = (
                        usage.input_tokens
                        + (usage.input_tokens_cache_read or 0)
                        + (usage.input_tokens_cache_write or 0)
                    )
                    tallies[role]["prompt"] += prompt
                    tallies[role]["completion"] += usage.output_tokens
                    assert usage.total_tokens == prompt + usage.output_tokens
                    assert usage.total_cost is not None
                    tallies[role]["cost"] += usage.total_cost
        for role in ROLES:
            want = group["usage"]["roles"][role]
            assert tallies[role]["prompt"] == want["prompt_tokens"], (model, role)
            assert tallies[role]["completion"] == want["completion_tokens"], (model, role)
            assert math.isclose(tallies[role]["cost"], want["cost_usd"], rel_tol=1e-9), (model, role)


def test_a_sample_holds_the_conversation_the_judges_raw_outputs_and_the_runs_settings(study, logs):
    db = study.store.conn
    log = logs[("r1", "sim-a", "dcg")]
    manifest = log.eval.metadata["manifest"]
    assert manifest["run_id"] == "r1" and manifest["dataset_sha256"]
    settings = manifest["settings"]
    assert log.eval.model_generate_config.temperature == settings["temperature"]
    assert log.eval.model_generate_config.max_tokens == settings["max_tokens"]
    roles = log.eval.model_roles or {}
    assert roles["judge"].model == settings["judge_model"] and roles["user"].model == settings["user_model"]
    assert roles["judge"].config.temperature == settings["judge_temperature"]
    assert log.eval.dataset.location == manifest["dataset_path"]
    run_pk = db.execute("SELECT pk FROM runs WHERE run_id = 'r1' AND model = 'sim-a'").fetchone()[0]
    for sample in log.samples or []:
        idx = db.execute("SELECT idx FROM cases WHERE case_number = ?", (sample.id,)).fetchone()[0]
        asked = dict(
            db.execute(
                "SELECT step, text FROM requests WHERE run_pk = ? AND case_idx = ? AND step LIKE 'dcg.%'", (run_pk, idx)
            )
        )
        # history, q1, the User Model's reply, q2: the new turns generated, the history as given
        new = [m for m in sample.messages if m.source == "generate"]
        assert [(m.role, m.text) for m in new] == [
            ("assistant", asked["dcg.q1"]),
            ("user", asked["dcg.r1"]),
            ("assistant", asked["dcg.q2"]),
        ]
        assert sample.messages[: len(sample.messages) - 3] == sample.input
        assert sample.output.completion == asked["dcg.q2"]
        score = sample.scores["dcg"] if sample.scores else None
        assert score is not None and score.explanation is not None
        # A judge's whole output, its thinking included (`state.judge_words`): what it said, whose
        # answer part is the text the step used.
        said = dict(
            db.execute(
                "SELECT q.step, w.raw FROM requests q JOIN judge_words w ON w.request_pk = q.pk"
                " WHERE q.run_pk = ? AND q.case_idx = ? AND q.step LIKE 'dcg.%'",
                (run_pk, idx),
            )
        )
        for step in ("dcg.q1j", "dcg.q2j"):
            assert said[step].rstrip().endswith(asked[step])
            assert f"{step} (attempt 1, answered):\n{said[step]}" in score.explanation
        assert [j["output"] for j in score.metadata["judge"]] == [said["dcg.q1j"], said["dcg.q2j"]]
        assert [j["decision"] for j in score.metadata["judge"]] == score.metadata["outcome"]["decisions"]


def test_unfinished_tasks_are_refused_unless_partial_then_their_logs_say_started(tmp_path, session, ws):
    prepare_runs(ws, session, stage="lca", runs=("r1",), model="sim-eval", limit=2)
    with pytest.raises(LexpilotError, match="some tasks are not complete"):
        export_inspect(ws, tmp_path / "out")
    exported = export_inspect(ws, tmp_path / "out", partial=True)
    (log,) = (read_eval_log(str(path)) for path in exported.files)
    assert log.status == "started" and not log.samples
    assert log.results is not None and log.results.scores[0].unscored_samples == 4
    assert exported.notes == ["r1 / sim-eval / lca: partial, its log's status is 'started'"]


def test_without_the_extra_the_export_names_it(study, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(ConfigError) as caught:
        export_inspect(study, tmp_path)
    assert str(caught.value) == (
        "Inspect logs (export --format inspect) need the optional extra 'inspect': python -m pip install "
        '"lexpilot-batch[inspect]" (from a clone of the repository: python -m pip install -e ".[inspect]")'
    )
    assert not list(tmp_path.iterdir())


def test_the_command_writes_the_logs_and_says_how_to_open_them(study, tmp_path):
    out = tmp_path / "logs"
    done = CliRunner().invoke(
        app, ["export", "--format", "inspect", "--out", str(out), "--root", str(study.root), "--run-id", "r2"]
    )
    assert done.exit_code == 0, done.output
    assert f"Wrote 10 Inspect log(s) under {out}; to open them: inspect view --log-dir {out}" in done.output
    assert "the bundled sample" in done.output
    assert len(list(out.glob("r2_*.eval"))) == 10


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_inspect_view_shows_a_samples_judge_explanation(study, tmp_path):
    """`inspect view` started on the exported folder, as a user would, and its page read in headless
    Chromium: the scoring tab of an LCA sample shows the judge's raw output."""
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium found: install the Debian package chromium or set LEXPILOT_CHROMIUM")
    out = tmp_path / "logs"
    export_inspect(study, out, "r1", "sim-a")
    log = read_eval_log(str(out / "r1_sim-a_lca.eval"))
    sample = next(s for s in log.samples or [] if str(s.id).endswith("/u"))
    assert sample.scores is not None
    raw = (sample.scores["lca"].metadata or {})["judge"][-1]["output"]
    port = _free_port()
    # Its own data folder: `inspect view` ends any earlier viewer that its pid files say holds the port.
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "COLUMNS": "200"}
    viewer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspect_ai",
            "view",
            "start",
            "--log-dir",
            str(out),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline or viewer.poll() is not None:
                    pytest.fail("inspect view did not answer within 60 s")
                time.sleep(0.25)
        sample_id = urllib.parse.quote(str(sample.id), safe="")
        url = f"{base}/#/logs/r1_sim-a_lca.eval/samples/sample/{sample_id}/1/scoring"
        with DevTools(browser, tmp_path / "profile") as page:
            page.open(url)
            text = page.wait_for_text("lca.u.cls (attempt 1, answered)")
        assert f"Sample {sample.id} (Epoch 1)" in text
        assert "lca.u.cls (attempt 1, answered)" in text and raw.strip().splitlines()[0] in text, text[:3000]
    finally:
        viewer.terminate()
        try:
            viewer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            viewer.kill()
            viewer.wait()
