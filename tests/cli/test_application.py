"""How the command line starts and ends: the arguments taken as typed, on Windows too, and an
operating-system error told of the file the user asked for, in words that fit what happened (a
report open in Excel on Windows)."""

from __future__ import annotations

import ntpath
import os
import posixpath
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lexpilot_batch import cli
from lexpilot_batch.cli import app, application
from lexpilot_batch.util import fileio

runner = CliRunner()
HELD_OPEN = "The process cannot access the file because it is being used by another process"


def windows_error(errno: int, strerror: str, filename: str, winerror: int, filename2: str | None = None) -> OSError:
    """The error Windows raises (`winerror` is only set there; POSIX ignores the argument)."""
    exc = PermissionError(errno, strerror, filename, winerror, filename2)
    setattr(exc, "winerror", winerror)  # noqa: B010 - typeshed declares it on Windows only
    return exc


@pytest.mark.parametrize("winerror", [32, 33])  # ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION
def test_a_file_held_open_is_named_and_said_to_be_open_elsewhere(winerror: int) -> None:
    target = str(Path("out") / "report.csv")
    tmp = str(Path("out") / ".report.csv.54c36557.tmp")
    message = application.os_error_message(windows_error(13, HELD_OPEN, tmp, winerror, target))
    assert message == f"{target} is open in another program; close it there and run the same command again"
    # open() of the file itself (a lock violation) names it too
    message = application.os_error_message(windows_error(13, HELD_OPEN, target, winerror))
    assert message.startswith(f"{target} is open in another program")


def test_a_temporary_file_is_never_the_one_named() -> None:
    tmp = str(Path("out") / ".report.csv.54c36557.tmp")
    target = str(Path("out") / "report.csv")
    # a folder that may not be written: the error is on the temporary file open() made
    denied = application.os_error_message(PermissionError(13, "Permission denied", tmp))
    assert denied == f"permission denied: {target}; choose a folder you can write to (or fix its permissions)"
    # a replace refused for another reason: its target, filename2
    other = application.os_error_message(OSError(5, "Input/output error", tmp, None, target))
    assert target in other and ".tmp" not in other
    # a file whose name only looks like one stays as it is
    assert fileio.temp_target(Path(".report.csv.tmp")) is None
    assert fileio.temp_target(fileio.temp_path(Path("a") / "b.json")) == Path("a") / "b.json"


def test_report_out_to_a_file_excel_holds_says_to_close_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole path: `report --out` through `main`, `os.replace` refused as Windows refuses it
    while Excel shows the file (retried for a moment, `fileio.replace`, then given up)."""
    root = tmp_path / "ws"
    run = ["run", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", "--provider", "simulated"]
    assert runner.invoke(app, [*run, "--limit", "1", "--root", str(root)]).exit_code == 0
    out = tmp_path / "report.csv"
    real_replace = os.replace

    def held(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst) == out:
            raise windows_error(13, HELD_OPEN, os.fspath(src), 32, os.fspath(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", held)
    monkeypatch.setattr(fileio, "_REPLACE_PAUSE", 0)
    monkeypatch.setattr(
        sys, "argv", ["lexpilot-batch", "report", "--format", "csv", "--out", str(out), "--root", str(root)]
    )
    with pytest.raises(SystemExit) as ended:
        application.main()
    assert ended.value.code == 1
    err = capsys.readouterr().err
    assert err.strip() == f"Error: {out} is open in another program; close it there and run the same command again"
    assert not list(tmp_path.glob("*.tmp"))  # the temporary file removed


class _WindowsOsPath:
    """`os.path` on Windows as far as the test needs: `ntpath.expandvars` expands `%NAME%`."""

    expandvars = staticmethod(ntpath.expandvars)

    def __getattr__(self, attr: str) -> Any:
        return getattr(posixpath, attr)


class _WindowsOs:
    """`os` as typer's argument handling sees it on Windows (`os.name`, `os.path.expandvars`);
    pathlib and everything else go on with the real one."""

    name = "nt"
    path = _WindowsOsPath()

    def __getattr__(self, attr: str) -> Any:
        return getattr(os, attr)


def test_arguments_reach_the_commands_as_typed_on_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through `lexpilot_batch.cli.main`, the console script's function: typer's Windows-only
    expansion (`%NAME%`, `~`, glob patterns) is off, so `r-%USERNAME%` and `r*` stay themselves."""
    import typer._click.utils
    import typer.core

    root = tmp_path / "ws"
    run = ["run", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", "--provider", "simulated"]
    assert runner.invoke(app, [*run, "--limit", "1", "--root", str(root)]).exit_code == 0
    windows = _WindowsOs()
    monkeypatch.setattr(typer.core, "os", windows)
    monkeypatch.setattr(typer._click.utils, "os", windows)
    monkeypatch.setenv("USERNAME", "me")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results.csv").write_text("", encoding="utf-8")  # what `r*` would glob to
    for run_id in ("r-%USERNAME%", "r*"):
        monkeypatch.setattr(sys, "argv", ["lexpilot-batch", "status", "--run-id", run_id, "--root", str(root)])
        with pytest.raises(SystemExit) as ended:
            cli.main()
        assert ended.value.code == 1
        assert capsys.readouterr().err.strip() == f"Error: --run-id {run_id}: no such run in this workspace; it has r1"
