"""The command line: every command has help with an example; user mistakes exit cleanly.

Help texts are read in-process (typer's CliRunner); anything that goes through `main()` — the
version, error handling — runs as a real `python -m lexpilot_batch` process in an empty folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from lexpilot_batch import __version__
from lexpilot_batch.cli import app

EXPECTED_COMMANDS = {
    "validate-data",
    "prepare",
    "submit",
    "poll-and-advance",
    "status",
    "report",
    "run",
    "export",
    "ingest",
    "serve-simulated",
    "doctor",
    "retry",
}

GROUP = typer.main.get_command(app)
COMMANDS: dict[str, Any] = dict(GROUP.commands)  # type: ignore[attr-defined]
runner = CliRunner()


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m lexpilot_batch ARGS` in `cwd`, with no provider settings from this machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LEXPILOT_"))}
    env["PYTHONIOENCODING"] = "utf-8"
    return subprocess.run(
        [sys.executable, "-m", "lexpilot_batch", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )


def assert_clean_error(result: subprocess.CompletedProcess[str], needle: str) -> None:
    """Non-zero exit, exactly one `Error: ...` line on stderr, nothing on stdout, no traceback."""
    assert result.returncode != 0, result
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got: {result.stderr!r}"
    assert lines[0].startswith("Error: "), lines[0]
    assert needle in lines[0]
    assert result.stdout == ""


# --- the command set and its help ---------------------------------------------------------------


def test_expected_commands_are_registered() -> None:
    missing = EXPECTED_COMMANDS - set(COMMANDS)
    assert not missing, f"commands not registered: {sorted(missing)}"


def test_top_level_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    for name in COMMANDS:
        assert re.search(rf"^\s+{re.escape(name)}\s", result.output, re.MULTILINE), name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(name: str) -> None:
    result = runner.invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # click rewraps long lines
    assert "Example:" in text, f"{name}: no example in its help"
    # The example shows this very command, not another one.
    assert f"Example: lexpilot-batch {name}" in text, f"{name}: example is for another command"
    # The short help (shown in the command list) is a real sentence, not empty.
    assert len(COMMANDS[name].get_short_help_str(limit=200)) > 10


def test_version(tmp_path: Path) -> None:
    result = run_cli(["--version"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"lexpilot-batch {__version__}"
    assert list(tmp_path.iterdir()) == []


# --- user mistakes ------------------------------------------------------------------------------


def test_status_without_a_workspace(tmp_path: Path) -> None:
    result = run_cli(["status", "--root", str(tmp_path)], tmp_path)
    assert_clean_error(result, "workspace")
    # A read-only command does not create a workspace where there is none.
    assert list(tmp_path.iterdir()) == []


def test_report_with_an_unknown_format(tmp_path: Path) -> None:
    result = run_cli(["report", "--format", "nope", "--root", str(tmp_path)], tmp_path)
    assert_clean_error(result, "--format")


def test_status_with_an_unknown_format(tmp_path: Path) -> None:
    result = run_cli(["status", "--format", "nope", "--root", str(tmp_path)], tmp_path)
    assert_clean_error(result, "--format")


def test_validate_data_with_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_cases.json"
    result = run_cli(["validate-data", "--dataset", str(missing)], tmp_path)
    assert_clean_error(result, "no_such_cases.json")


# --- commands not implemented yet ---------------------------------------------------------------


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_end_progress_forgets_a_bar_interrupted_while_it_was_built(monkeypatch):
    """Ctrl-C inside `tqdm.__init__` leaves a registered bar with half its state: closing the bars
    before the "Interrupted" line must not raise in its place (an AttributeError ended `run` with
    exit 1 instead of 130, found by the random Ctrl-C campaign of tests/scenarios/test_crash.py),
    and its finaliser prints no "Exception ignored" traceback after it (`util.progress.Bar`)."""
    import gc

    import tqdm.std

    from lexpilot_batch.cli.output import end_progress
    from lexpilot_batch.util.progress import Bar as bar_class

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt  # where the campaign's Ctrl-C landed: tqdm building its rate average

    monkeypatch.setattr(tqdm.std, "EMA", interrupted)
    before = set(bar_class._instances)
    with pytest.raises(KeyboardInterrupt) as raised:  # (its traceback holds the bar, as a running command's does)
        bar_class(total=3)
    [half_built] = set(bar_class._instances) - before
    end_progress()
    assert half_built not in bar_class._instances
    del half_built, raised
    gc.collect()  # its finaliser runs here: an error in it fails the test (the filter above)
