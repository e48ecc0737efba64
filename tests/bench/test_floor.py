"""The bench's serialisation floor (`bench/floor.py`) is a mean over the run's lines, not over the
lines it happened to sample: a file sampled every k-th line weighs k a line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import floor


def _write(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A big file of long lines (sampled every k-th line) and a small one of short lines."""
    root = tmp_path / "workspace"
    long = [{"custom_id": f"a{i}", "body": {"messages": [{"content": "案情" * 400}]}} for i in range(400)]
    short = [{"custom_id": f"b{i}", "body": {"messages": [{"content": "问"}]}} for i in range(10)]
    _write(root / "requests" / "wave-001" / "eval__m__000.jsonl", long)
    _write(root / "requests" / "wave-002" / "eval__m__000.jsonl", short)
    results = [
        {"custom_id": f"a{i}", "response": {"body": {"choices": [{"message": {"content": "好"}}]}}} for i in range(410)
    ]
    _write(root / "responses" / "wave-001" / "eval__m__000.jsonl", results)
    return root


def test_each_sampled_line_stands_for_the_lines_it_was_picked_among(workspace: Path) -> None:
    beside = floor.FloorAlongside(workspace, per_file=20_000)  # the big file: every ~50th line
    beside.sample()
    timed = beside.floor
    assert timed.dumped < 410  # a sample ...
    assert timed.dump_weight == pytest.approx(410)  # ... standing for every request line of the run
    assert timed.parse_weight == pytest.approx(410)
    result = beside.result()
    assert result["request_lines_timed"] == timed.dumped
