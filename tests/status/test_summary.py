"""`status` on one screen (issue 29 item 2): it used to print every run's every task and file (9
runs made 115 lines) with no next command, no batch age and no cost. Now: per model threads done
/ active / failed, tokens and cost so far against the projection, the batches in flight with
their age, what blocks, the next command; `--verbose` for the detail, `--run-id`/`--model`
filters, `--format json` for scripts."""

from __future__ import annotations

import json
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
