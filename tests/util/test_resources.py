"""The bundled data files, and that a Windows checkout holds them byte for byte.

Git for Windows converts text files to CRLF on checkout (core.autocrlf=true, its installer's
default): the sample dataset would then hash to another SHA-256 than the one a workspace made
elsewhere recorded (`data/dataset.py`), and `.ci/run` would not run. `.gitattributes` keeps every
text file LF and exempts the data files, and any JSON, JSON Lines or TOML file, from conversion.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from lexpilot_batch.util import resources

ROOT = Path(__file__).resolve().parents[2]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def attributes(paths: list[str]) -> dict[str, dict[str, str]]:
    """`git check-attr text eol` of each path: {path: {"text": ..., "eol": ...}}."""
    out: dict[str, dict[str, str]] = {path: {} for path in paths}
    for line in git("check-attr", "text", "eol", "--", *paths).splitlines():
        path, name, value = line.rsplit(": ", 2)
        out[path][name] = value
    return out


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a clone of the repository")
    return git("ls-files").splitlines()


def test_the_bundled_files_are_there() -> None:
    assert resources.sample_dataset().is_file() and resources.default_categories().is_file()


def test_no_checkout_converts_the_bundled_data_or_any_json_or_toml(tracked: list[str]) -> None:
    data = resources.data_dir()
    assert data == ROOT / "data"  # the checkout's, not an installed copy
    exact = [p for p in tracked if p.startswith("data/") or p.endswith((".json", ".jsonl", ".toml"))]
    assert {f"data/{p.name}" for p in data.iterdir() if p.is_file()} <= set(exact)
    assert {path: attrs for path, attrs in attributes(exact).items() if attrs["text"] != "unset"} == {}


def test_every_other_text_file_is_checked_out_with_lf(tracked: list[str]) -> None:
    others = [p for p in tracked if (p.endswith((".py", ".md")) and not p.startswith("data/")) or p == ".ci/run"]
    wrong = {p: a for p, a in attributes(others).items() if (a["text"], a["eol"]) != ("auto", "lf")}
    assert wrong == {}
