"""A single-value option given twice (issue 48, point 4): `--stage lca --stage dcg` ran only DCG and
`--speculate --no-speculate` did not speculate, the parser keeping the last without a word. Now
both are refused naming both values; the same value twice passes; repeatable options are not
concerned; and what the refusal advises (`prepare` once per stage, into the same runs) works."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app
from lexpilot_batch.errors import ConfigError

runner = CliRunner()
PREPARE = ["prepare", "--run-id", "r1", "--model", "sim-eval", "--provider", "simulated", "--limit", "2"]


def invoke(args: list[str], root: Path) -> Any:
    return runner.invoke(app, [*args, "--root", str(root)])


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--stage", "lca", "--stage", "dcg"], "--stage lca and --stage dcg: --stage takes one value"),
        (["--stage=lca", "--stage", "dcg"], "--stage lca and --stage dcg"),
        (["--stage", "lca", "--speculate", "--no-speculate"], "--speculate and --no-speculate contradict each other"),
        (["--stage", "lca", "--limit", "3"], "--limit 2 and --limit 3"),
    ],
)
def test_a_single_value_option_given_two_values_is_refused_naming_both(
    tmp_path: Path, args: list[str], named: str
) -> None:
    result = invoke([*PREPARE, *args], tmp_path / "ws")
    assert result.exit_code != 0 and isinstance(result.exception, ConfigError), result.output
    assert named in str(result.exception)
    assert not (tmp_path / "ws").exists()  # refused before anything was made


def test_the_same_value_twice_and_repeatable_options_pass(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    result = invoke([*PREPARE, "--stage", "lca", "--stage", "lca", "--model", "sim-other", "--run-id", "r2"], root)
    assert result.exit_code == 0, result.output
    assert "Runs: r1, r2" in result.output


def test_prepare_once_per_stage_adds_each_stages_threads_to_the_same_runs(tmp_path: Path) -> None:
    """What the --stage refusal advises, as docs/operations.md says."""
    root = tmp_path / "ws"
    assert "--stage all runs every task" in str(invoke([*PREPARE, "--stage", "lca", "--stage", "dcg"], root).exception)
    for stage in ("lca", "dcg"):
        assert invoke([*PREPARE, "--stage", stage], root).exit_code == 0
    status = json.loads(invoke(["status", "--format", "json"], root).output)
    assert [(r["run_id"], sorted(r["tasks"])) for r in status["runs"]] == [("r1", ["dcg", "lca"])]
