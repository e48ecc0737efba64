"""`status` on one screen (issue 29 item 2): it used to print every run's every task and file (9
runs made 115 lines) with no next command, no batch age and no cost. Now: per model threads done
/ active / failed, tokens and cost so far against the projection, the batches in flight with
their age, what blocks, the next command; `--verbose` for the detail, `--run-id`/`--model`
filters, `--format json` for scripts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from lexpilot_batch.cli import app

runner = CliRunner()
SIM = ["--provider", "simulated"]
MODELS = ["--model", "openai/gpt-4o-mini", "--model", "sim-eval"]


def cli(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def status(root: Path, *args: str) -> str:
    return cli("status", "--root", str(root), *args).stdout


def test_status_summarizes_per_model_and_says_what_to_run_next(tmp_path: Path) -> None:
    root = str(tmp_path / "ws")
    cli("prepare", "--stage", "lca", "--run-id", "r1", "--run-id", "r2", *MODELS, *SIM, "--limit", "3", "--root", root)
    cli("submit", *SIM, "--root", root)

    text = status(tmp_path / "ws")
    lines = text.splitlines()
    assert len(lines) <= 25, text  # one screen
    row = next(line for line in lines if line.strip().startswith("openai/gpt-4o-mini"))
    # runs, done, active, failed, tokens, cost so far (the bundled price of gpt-4o-mini), projected
    assert row.split()[1:5] == ["r1,r2", "0", "12", "0"], row
    assert "$" in row  # priced without a --prices file
    assert "In flight: 2 batch file(s) of wave 1, the oldest" in text
    assert "Next: lexpilot-batch poll-and-advance --submit --wait" in text
    assert "Waves compiled" not in text  # the detail is for --verbose
    verbose = status(tmp_path / "ws", "--verbose")
    assert "Waves compiled: 1" in verbose and "Files not yet ingested:" in verbose

    # Filters, for a workspace of many runs and models.
    only = status(tmp_path / "ws", "--model", "sim-eval")
    assert "sim-eval" in only and "openai/gpt-4o-mini" not in only
    data = json.loads(status(tmp_path / "ws", "--run-id", "r2", "--model", "sim-eval", "--format", "json"))
    assert [(r["run_id"], r["model"]) for r in data["runs"]] == [("r2", "sim-eval")]
    summary = data["summary"]
    assert summary["models"]["sim-eval"]["runs"] == ["r2"]
    assert summary["next"] == f"lexpilot-batch poll-and-advance --submit --wait --root {root}"
    assert all(f["age_s"] is not None for f in summary["in_flight"])

    # Finished: the cost so far is the projection, and the next command is the report.
    cli("poll-and-advance", "--submit", "--wait", *SIM, "--root", root)
    data = json.loads(status(tmp_path / "ws", "--format", "json"))
    mini = data["summary"]["models"]["openai/gpt-4o-mini"]
    assert mini["threads"] == {"done": 12, "active": 0, "failed": 0, "cancelled": 0} and mini["prompt_tokens"] > 0
    assert mini["cost_usd"] > 0 and mini["projected_cost_usd"] == mini["cost_usd"]
    assert data["summary"]["next"].startswith("lexpilot-batch report")


def test_failed_threads_block_and_the_next_command_is_retry(tmp_path: Path) -> None:
    root = str(tmp_path / "ws")
    faults = ["--sim-faults", "line_error=1", "--retries", "1"]
    cli("prepare", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", *SIM, "--limit", "2", "--root", root)
    cli("poll-and-advance", "--submit", "--wait", *SIM, *faults, "--root", root)
    text = status(tmp_path / "ws")
    assert "Blocked: 4 failed thread(s)" in text
    assert "Next: lexpilot-batch retry" in text


def test_a_finished_workspace_with_anomalies_says_finished_not_blocked(tmp_path: Path) -> None:
    """Ingest anomalies (result lines never applied) block nothing: with every thread finished,
    `status` said "Blocked: 2 ingest anomalies" above "Next: report (every thread is finished)"."""
    import time

    from lexpilot_batch.state.anomalies import record_anomaly
    from lexpilot_batch.state.workspace import Workspace

    root = str(tmp_path / "ws")
    cli("prepare", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", *SIM, "--limit", "1", "--root", root)
    cli("poll-and-advance", "--submit", "--wait", *SIM, "--root", root)
    with Workspace(tmp_path / "ws") as ws, ws.store.transaction() as db:
        for kind in ("foreign", "conflict"):
            record_anomaly(db, None, kind, None, "a line of another workspace", time.time())

    text = status(tmp_path / "ws")
    assert "Blocked" not in text, text
    assert (
        "Finished: every thread is finished, with 2 ingest anomalies (result lines never applied, so nothing "
        f"wrong was scored): `lexpilot-batch doctor --root {root}` lists them"
    ) in text
    assert text.rstrip().endswith(
        f"Next: lexpilot-batch report --format html --out report.html --root {root}   "
        "(every thread is finished, with 2 ingest anomalies)"
    )
    summary = json.loads(status(tmp_path / "ws", "--format", "json"))["summary"]
    assert (summary["blockers"], summary["finished"], summary["anomalies"]) == ([], True, 2)

    # Not finished: the anomalies are a note beside what the workspace waits for, never a blocker.
    cli("prepare", "--stage", "lca", "--run-id", "r2", "--model", "sim-eval", *SIM, "--limit", "1", "--root", root)
    text = status(tmp_path / "ws")
    assert "Blocked" not in text and "Finished" not in text
    assert "\nNote: 2 ingest anomalies (result lines never applied" in text
    assert "Next: lexpilot-batch poll-and-advance --submit --wait" in text


def test_the_cost_so_far_is_the_reports_cost_answers_priced_by_the_hour_included(tmp_path: Path) -> None:
    """A provider pricing by the hour (DeepSeek's off-peak, `providers.schedules`): `status` priced
    its answers at the listed peak price while the report priced each at the minute it came, so
    the two disagreed (twice the report's cost for a study answered off-peak). Both price the same
    counts now (`providers.charges`): half the judge's answers at Monday 07:30 UTC (peak), half on
    Saturday (off-peak); every model's cost so far is the sum of the report's costs of its roles."""
    root = tmp_path / "ws"
    deepseek = "deepseek/deepseek-flash"
    roles = ["--user-model", deepseek, "--judge-model", deepseek]
    cli("run", "--stage", "lca", "--run-id", "r1", "--model", "openai/gpt-4o-mini", *roles, *SIM, "--limit", "3",
        "--root", str(root))  # fmt: skip
    peak, off_peak = 1796628600, 1797065400  # 2026-12-07T07:30Z (Monday), 2026-12-12T07:30Z (Saturday)
    with sqlite3.connect(root / "state" / "lexpilot.sqlite3") as db:
        judged = [pk for (pk,) in db.execute("SELECT pk FROM requests WHERE role = 'judge' ORDER BY pk")]
        assert len(judged) >= 2
        for i, pk in enumerate(judged):
            db.execute("UPDATE requests SET answered_at = ? WHERE pk = ?", (peak if i % 2 else off_peak, pk))
    models = json.loads(status(root, "--format", "json"))["summary"]["models"]
    report = json.loads(cli("report", "--root", str(root), "--format", "json").stdout)
    by_model: dict[str, float] = {}
    for group in report["groups"]:
        of_role = {"eval": group["model"], "user": group["user_model"], "judge": group["judge_model"]}
        for role, usage in group["usage"]["roles"].items():
            by_model[of_role[role]] = by_model.get(of_role[role], 0.0) + usage["cost_usd"]
    assert set(by_model) <= set(models)
    for model, cost in by_model.items():
        assert abs(models[model]["cost_usd"] - cost) < 1e-12, (model, models[model]["cost_usd"], cost)
    judge = report["groups"][0]["usage"]["roles"]["judge"]
    assert judge["cost_usd"] < judge["peak_cost_usd"]  # the off-peak half at half price
