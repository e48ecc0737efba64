"""Progress where stderr is no terminal (issue 48, points 3 and 8): a log gets plain lines, no
tqdm `\\r` redraws or block characters, and each line leads with the whole study's progress."""

from __future__ import annotations

import re
import sys

from lexpilot_batch.util import progress


def test_a_redirected_run_writes_plain_lines_with_the_study_s_progress(in_process, tmp_path):
    args = ["--provider", "simulated", "--sim-faults", "latency=0", "--root", str(tmp_path / "ws")]
    code, out = in_process(["run", "--stage", "lca", "--run-id", "r1", "--model", "sim-a", "--limit", "3", *args])
    text = out.decode("utf-8")
    assert code == 0, text
    assert "\r" not in text and "█" not in text and "\x1b[" not in text
    lines = re.findall(r"^study (\d+)/(\d+) threads · wave (\d+): +(\d+)% (\d+)/(\d+) req", text, re.M)
    assert lines, text
    assert {int(total) for _, total, *_ in lines} == {6}  # 3 cases x 2 histories: the study's threads
    assert int(lines[-1][0]) == 6  # all of them finished by the last wave's line
    assert len(lines) == len(set(lines))  # a line is written when what it shows changes, once


def test_lines_write_a_line_only_when_it_changes(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stderr", sys.stderr)  # (pytest's capture: no terminal)
    assert not progress.on_terminal()
    shown = progress.bar(total=4, desc="wave 1", unit="req")
    assert isinstance(shown, progress.Lines)
    shown.refresh()
    shown.refresh()
    shown.n = 2
    shown.set_postfix_str("[1s in flight]")
    shown.close()
    assert capsys.readouterr().err.splitlines() == ["wave 1:   0% 0/4 req", "wave 1:  50% 2/4 req [1s in flight]"]
