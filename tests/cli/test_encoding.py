"""Every command writes UTF-8 whatever the console's code page (issue 29 item 6).

Windows consoles and pipes default to a legacy code page (cp1252 in Western Europe, GBK/cp936 in
China); Python encodes a redirected stdout in it (`PYTHONIOENCODING` sets the same thing on any
platform, https://docs.python.org/3/using/cmdline.html#envvar-PYTHONIOENCODING), so before this
change `report --format html > report.html` died with UnicodeEncodeError on the first Chinese
class name (under GBK on U+2212, the minus sign). `--out FILE` writes the file itself, UTF-8,
atomically, which also survives Windows PowerShell 5.1, whose `>` re-encodes to UTF-16.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import lexpilot_batch

PACKAGE_ROOT = Path(lexpilot_batch.__file__).resolve().parents[1]


def cli(args: list[str], encoding: str, stdout: Path) -> subprocess.CompletedProcess[bytes]:
    """`python -m lexpilot_batch ARGS` with stdout redirected to a file, streams in `encoding`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LEXPILOT_", "PYTHONUTF8"))}
    env.update(PYTHONIOENCODING=encoding, PYTHONUTF8="0", PYTHONPATH=str(PACKAGE_ROOT))
    with stdout.open("wb") as out:
        return subprocess.run(
            [sys.executable, "-m", "lexpilot_batch", *args], stdout=out, stderr=subprocess.PIPE, env=env, timeout=120
        )


@pytest.mark.parametrize("encoding", ["cp1252", "gbk"])
def test_a_redirected_html_report_is_utf8_under_any_code_page(study, tmp_path: Path, encoding: str) -> None:
    page = tmp_path / "report.html"
    done = cli(["report", "--format", "html", "--bootstrap", "0", "--root", str(study.root)], encoding, page)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    html = page.read_bytes().decode("utf-8")  # strict: raises if any byte is not UTF-8
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    assert '<meta charset="utf-8">' in html
    assert any("\u4e00" <= ch <= "\u9fff" for ch in html)  # the Chinese texts came through as themselves


def test_out_file_is_utf8_written_atomically(study, tmp_path: Path) -> None:
    out = tmp_path / "sub" / "report.html"
    done = cli(
        ["report", "--format", "html", "--bootstrap", "0", "--out", str(out), "--root", str(study.root)],
        "cp1252",
        tmp_path / "stdout.txt",
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert (tmp_path / "stdout.txt").read_bytes() == b""  # the page went to the file only
    assert out.read_bytes().decode("utf-8").startswith("<!doctype html>")
    assert f"to {out}" in done.stderr.decode("utf-8")
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]  # written atomically: no leftover


def test_a_csv_file_begins_with_the_byte_order_mark_excel_reads_utf8_by_and_stdout_does_not(study, tmp_path: Path):
    """Excel opens a CSV without a mark in the ANSI code page, garbling the Chinese (`spreadsheet`)."""
    out = tmp_path / "report.csv"
    args = ["report", "--format", "csv", "--bootstrap", "0", "--root", str(study.root)]
    done = cli([*args, "--out", str(out)], "cp1252", tmp_path / "stdout.txt")
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    written = out.read_bytes()
    assert written.startswith(b"\xef\xbb\xbf") and not written[3:].startswith(b"\xef\xbb\xbf")
    printed = tmp_path / "printed.csv"
    assert cli(args, "utf-8", printed).returncode == 0
    assert printed.read_bytes().rstrip(b"\n") == written[3:].rstrip(b"\n")  # the same CSV, printed without a mark


def test_an_out_path_through_a_file_is_one_line_naming_the_file(study, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder", encoding="utf-8")
    done = cli(
        ["report", "--bootstrap", "0", "--out", str(tmp_path / "afile" / "x.csv"), "--root", str(study.root)],
        "utf-8",
        tmp_path / "stdout.txt",
    )
    message = done.stderr.decode("utf-8").strip()
    assert done.returncode == 1 and message.count("\n") == 0, message
    assert (
        message
        == f"Error: {tmp_path / 'afile'} is a file, not a folder; choose an output path whose folders are folders"
    )
