"""The model lists of `examples/` (a Chinese-models comparison, the frontier labs, a local vLLM
model with a hosted judge): each is read, and prepared with `--dry-run`, naming every model, with
no key set and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.study.model_list import _toml

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))


def test_the_three_studies_are_there():
    assert {p.stem for p in EXAMPLES} >= {"chinese-models", "frontier-labs", "local-vllm-hosted-judge"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_each_example_model_list_prepares_with_dry_run(path: Path, tmp_path: Path, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LEXPILOT_EVAL_BACKEND", "LEXPILOT_JUDGE_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    listed = _toml().loads(path.read_text("utf-8"))
    evals = [e["name"] for e in listed["eval"]]
    for name in [*evals, listed["user"]["name"], listed["judge"]["name"]]:
        parse_model(name)  # every prefix is a known one
    root = tmp_path / "ws"
    args = ["prepare", "--dry-run", "--stage", "all", "--run-id", "run1", "--models", str(path), "--limit", "2"]
    result = CliRunner().invoke(app, [*args, "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Dry run: nothing was written.")
    for name in evals:
        assert f"run1  {name}  (new)" in result.output
    assert not root.exists() or not any(root.iterdir())
