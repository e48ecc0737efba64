"""A base URL without its `/v1` (issue 48, point 5): the 404 said "If this endpoint has no Batch
API, use --eval-backend sync", advice that moves the study to list price; the likely cause is the
missing `/v1`, which is now said first. Against the simulated server, which serves OpenAI's routes
under `/v1` as OpenAI-compatible servers do (`simulated/apis/openai.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.errors import unversioned_base_url
from lexpilot_batch.simulated import SimulatedServer, parse_faults


@pytest.mark.parametrize(
    ("url", "flagged"),
    [
        ("http://127.0.0.1:8000", True),
        ("http://127.0.0.1:8000/", True),
        ("https://example.com/openai", True),
        ("https://api.openai.com/v1", False),
        ("http://127.0.0.1:8000/v1/nowhere", False),
        ("https://open.bigmodel.cn/api/paas/v4", False),
        ("https://dashscope-intl.aliyuncs.com/compatible-mode/v1/", False),
        ("https://generativelanguage.googleapis.com/v1beta", False),
    ],
)
def test_a_base_url_ending_in_no_version_is_named_with_v1_added(url: str, flagged: bool) -> None:
    hint = unversioned_base_url(url)
    assert bool(hint) is flagged
    if flagged:
        assert f"most likely {url.rstrip('/')}/v1" in hint


def test_submit_to_a_base_url_without_v1_names_the_missing_v1_before_the_sync_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        base = server.base_url.rsplit("/v1", 1)[0]
        monkeypatch.setenv("OPENAI_BASE_URL", base)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-simulated")
        root = tmp_path / "ws"
        roles = ["--user-model", "gpt-4o-mini", "--judge-model", "gpt-4o-mini"]
        runner = CliRunner()
        prepared = runner.invoke(
            app, ["prepare", "--stage", "lca", "--model", "gpt-4o-mini", *roles, "--limit", "1", "--root", str(root)]
        )
        assert prepared.exit_code == 0, prepared.output
        result = runner.invoke(app, ["submit", "--root", str(root)])
    assert result.exit_code != 0 and isinstance(result.exception, LexpilotError), result.output
    message = str(result.exception)
    assert "HTTP 404" in message
    assert "has no version" in message and f"most likely {base}/v1" in message
    assert message.index("/v1") < message.index("--eval-backend sync")
