"""`bench/viewer_screenshot.py`, the command that takes `docs/report-viewer.png` (docs/report.md),
rehearsed: it draws the viewer on a case whose DCG judge was rejected and asked again, with the
judges' words open."""

from __future__ import annotations

import struct

import pytest

from bench import viewer_screenshot
from tests.helpers.browser import chromium


def test_the_screenshot_command_draws_the_viewer_on_a_retried_judge(tmp_path, capsys):
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium found: install the Debian package chromium or set LEXPILOT_CHROMIUM")
    out = tmp_path / "shot.png"
    assert viewer_screenshot.main(["--out", str(out), "--chromium", browser, "--keep", str(tmp_path / "work")]) == 0
    png = out.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == viewer_screenshot.SIZE  # the IHDR's width and height
    said = capsys.readouterr().out
    assert said.startswith(f"Wrote {out}") and "/dcg/" in said and said.rstrip().endswith("&words")
    # The page it drew holds the rejected attempt and the one used, for the case it names.
    page = (tmp_path / "work" / "report.html").read_text(encoding="utf-8")
    assert "malformed: " in page  # (the reason a judge attempt was rejected, in the viewer's data)
