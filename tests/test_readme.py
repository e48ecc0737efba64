"""Every `prepare` and `run` command of the README, rehearsed offline with `--provider simulated`.

The simulated provider refuses what the real ones refuse (a reasoning model's `max_tokens` or
temperature, `reasoning_effort` for another model), so a rehearsal that finishes every thread
without a failed request shows the command sends bodies the providers accept. Commands that leave
files to the user (`manual`) are not rehearsed: a person runs them.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"
runner = CliRunner()


def _blocks(language: str = "") -> list[str]:
    """The README's fenced code blocks of this language ("": plain ones)."""
    blocks, current, lang = [], None, ""
    for line in README.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current, lang = [], line[3:].strip()
            else:
                if lang == language:
                    blocks.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _commands() -> list[list[str]]:
    found = []
    for block in _blocks():
        for line in block.replace("\\\n", " ").splitlines():
            if not line.startswith("lexpilot-batch "):
                continue
            words = shlex.split(line, comments=True)
            if words[:2] in (["lexpilot-batch", "prepare"], ["lexpilot-batch", "run"]) and "manual" not in words:
                found.append(words[1:])
    return found


COMMANDS = _commands()


def test_the_readme_has_the_commands_this_test_rehearses():
    """The control: a README whose commands this test no longer finds would pass by rehearsing none."""
    text = " ".join(" ".join(c) for c in COMMANDS)
    for needle in ("openai/o4-mini", "dashscope/qwen-plus", "deepseek/deepseek-chat", "azure/", "--models"):
        assert needle in text
    assert len(COMMANDS) >= 8
    assert len(_blocks("toml")) == 1


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c)[:60] for c in COMMANDS])
def test_a_readme_command_rehearsed_offline_finishes_with_every_request_accepted(args, tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.endswith(("_API_KEY", "_BASE_URL", "_BACKEND")) or name.startswith("LEXPILOT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models.toml").write_text(_blocks("toml")[0], encoding="utf-8")
    root = ["--root", str(tmp_path / "ws")]
    rehearsal = [*args, "--provider", "simulated", "--limit", "1", *root]
    result = runner.invoke(app, rehearsal)
    assert result.exit_code == 0, f"{' '.join(args)}:\n{result.output}\n{result.exception!r}"
    if args[0] == "prepare":
        result = runner.invoke(app, ["poll-and-advance", "--submit", "--wait", "--poll-interval", "0", *root])
        assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    db = sqlite3.connect(tmp_path / "ws" / "state" / "lexpilot.sqlite3")
    try:
        threads = dict(db.execute("SELECT status, COUNT(*) FROM threads GROUP BY status").fetchall())
        failed = db.execute("SELECT error FROM requests WHERE status = 'failed' LIMIT 3").fetchall()
    finally:
        db.close()
    assert set(threads) == {"done"} and not failed, (threads, failed)
