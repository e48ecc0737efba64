"""The edges of "nothing lost, nothing duplicated" (issue 23): a first command interrupted or failing
in a new folder, a full disk, what a stopped command leaves, a provider outage under `--wait`, and a
workspace that can only be read. Each scenario drives the benchmark through the CLI (or the engine)
on the simulated provider and ends equal to the fault-free run (`helpers.faults.assert_same_as`).

| item | scenario | guarantee checked |
| --- | --- | --- |
| 1 | Ctrl-C at each step of a first `run` (and `prepare`) in a new folder: registering, compiling, submitting, polling, ingesting, waiting | the workspace is kept once anything is recorded, the message says to run the same command again, and that command ends = fault-free; a `prepare` refused before recording anything leaves the folder as it was |
| 7 | the disk full at each kind of write: the database (registering, compiling, ingesting), a request file, a saved result, a manifest, a compressed file; and a new folder's first `prepare` | one `Error: no space left on the device holding …` line, no traceback, nothing half-written; a new folder is left empty; freeing space and running the same command ends = fault-free |
| 9 | temporary files of interrupted writes left in `requests/`, `responses/`, `runs/` | removed by the next command that writes; readers leave the folder untouched |
| 9 | every call of the provider failing for a while under `--wait`; and for longer than `--outage-wait` | the loop rides it out (a message per failed round) and ends = fault-free in one command; past the budget it stops with one line saying nothing was lost, and the next command ends = fault-free |
| 9 | 65% of calls answered 429 or 500 (beyond the SDK's retries) | one `poll-and-advance --wait` ends = fault-free |
| 9 | a finished workspace made read-only | `status`, `report`, `export` and `doctor` print what they print on the writable copy; `prepare`, `submit`, `poll-and-advance`, `retry`, `doctor --repair` say the workspace is read-only (exit 1, no traceback) |
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app
from lexpilot_batch.engine import downloads, request_files, submit
from lexpilot_batch.engine import loop as engine
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.engine.session import Session
from lexpilot_batch.errors import LexpilotError, ProviderUnavailable
from lexpilot_batch.state.store import Store
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study import runs
from lexpilot_batch.util import clock
from tests.helpers.engine import finish
from tests.helpers.faults import (
    LIMIT,
    Outcome,
    assert_same_as,
    check_invariants,
    read_outcome,
    run_benchmark,
    simulated_batches,
)

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

pytestmark = pytest.mark.usefixtures("clean_env")

THREADS = 6 * LIMIT
# The fault-free run of `helpers.faults.run_benchmark`, as a command: the same run, cases and retries.
RUN = ["run", "--stage", "all", "--run-id", "r1", "--model", "sim-eval", "--limit", str(LIMIT)]
SIM = ["--provider", "simulated", "--retries", "8", "--create-grace", "0.5", "--no-compact"]


def cli(*args: str, root: Path) -> tuple[int, str]:
    """A command's exit code and what it printed, its error as `main` prints it."""
    result = CliRunner().invoke(app, [*args, "--root", str(root)])
    if isinstance(result.exception, LexpilotError):
        return result.exception.exit_code, f"{result.output}Error: {result.exception}\n"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback would reach the user
    return result.exit_code, result.output


def outcome_of(root: Path) -> Outcome:
    with Workspace(root) as ws:
        outcome = read_outcome(ws)
    outcome.sim_batches = simulated_batches(root / "state" / "simulated")
    check_invariants(root, outcome)
    return outcome


def first_run_to_the_end(root: Path) -> Outcome:
    code, output = cli(*RUN, *SIM, root=root)
    assert code == 0, output
    return outcome_of(root)


# --- 1. a first command interrupted ---------------------------------------------------------------


def interrupt_on(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, nth: int = 1) -> None:
    """Ctrl-C at the `nth` call of `owner.name`, after it ran when `after`."""
    original = getattr(owner, name)
    calls = 0

    def wrapper(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == nth:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)


STEPS = [
    (runs, "write_manifest_file", 1),  # a run registered, its manifest file not yet written
    (engine, "add_threads", 1),  # the run committed, its threads not
    (request_files.WaveWriter, "close", 1),  # wave 1's files written, the transaction recording them open
    (submit, "Lookup", 1),  # the file uploaded, its batch about to be created
    (downloads, "ingest_file", 2),  # the first batch saved and ingested, the second saved, not ingested
    (engine, "compile_wave", 3),  # wave 2 in, wave 3 about to be compiled
    (engine, "poll_and_advance_once", 3),  # between two rounds of polling
]


# Every point is a run to the end: the default suite stops at two (a batch file written, its
# transaction open; a batch saved, not ingested), the slow campaign at all (`-m slow`).
EVERY_RUN_STEPS = {"close", "ingest_file"}


@pytest.mark.parametrize(
    ("owner", "name", "nth"),
    [pytest.param(o, n, k, id=f"{n}:{k}", marks=() if n in EVERY_RUN_STEPS else pytest.mark.slow) for o, n, k in STEPS],
)
def test_a_first_run_interrupted_anywhere_keeps_its_workspace(tmp_path, baseline, monkeypatch, owner, name, nth):
    root = tmp_path / "new"
    with monkeypatch.context() as mp:
        interrupt_on(mp, owner, name, nth)
        code, output = cli(*RUN, *SIM, root=root)
    assert code == 130 and "run the same command again" in output, output
    assert (root / "state" / "lexpilot.sqlite3").is_file(), f"{name}: the workspace was taken away"
    assert_same_as(baseline, first_run_to_the_end(root))


def test_a_first_prepare_refused_or_interrupted_before_recording_anything_leaves_nothing(tmp_path, monkeypatch):
    root = tmp_path / "new"
    code, output = cli("prepare", "--model", "m", "--dataset", str(tmp_path / "missing.json"), root=root)
    assert code == 1 and not root.exists(), output
    with monkeypatch.context() as mp:
        interrupt_on(mp, engine, "register_run")  # before the first run is recorded
        roles = ("--user-model", "gpt-4o-mini", "--judge-model", "gpt-4.1-mini")  # bare: OpenAI's models
        code, output = cli("prepare", "--stage", "lca", "--model", "sim-eval", "--limit", "1", *roles, root=root)
    assert code == 130 and not root.exists(), output
    # In an existing folder of the user's, only what the command made goes.
    root.mkdir()
    (root / "notes.txt").write_text("mine", encoding="utf-8")
    code, _ = cli("prepare", "--model", "m", "--dataset", str(tmp_path / "missing.json"), root=root)
    assert code == 1 and sorted(p.name for p in root.iterdir()) == ["notes.txt"]


# --- 7. a full disk -------------------------------------------------------------------------------


@contextlib.contextmanager
def disk_full_at_fsync(nth: int) -> Iterator[list[int]]:
    """From the `nth` fsync of the command on, every file write fails as on a full device (ENOSPC):
    every whole file the product writes (a saved result, a manifest, a compressed file) ends in an
    fsync. Only the command's own thread: the in-process provider stands for a remote one, whose
    disk is not ours. Yields the call count."""
    real = os.fsync
    calls = [0]

    def fsync(fd: FileDescriptorLike) -> None:
        if threading.current_thread() is not threading.main_thread():
            return real(fd)
        calls[0] += 1
        if calls[0] >= nth:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    os.fsync = fsync
    try:
        yield calls
    finally:
        os.fsync = real


@contextlib.contextmanager
def database_full_after(pages: int) -> Iterator[None]:
    """Every workspace database opened meanwhile can grow by `pages` pages, then is full
    (SQLITE_FULL, "database or disk is full"), as on a device with no space left."""
    real = Store.__init__

    def init(self, path, readonly=False):
        real(self, path, readonly)
        if not self.readonly:
            count = self.conn.execute("PRAGMA page_count").fetchone()[0]
            self.conn.execute(f"PRAGMA max_page_count = {count + pages}")

    Store.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        Store.__init__ = real  # type: ignore[method-assign]


def assert_no_space_message(code: int, output: str) -> None:
    assert code == 1, output
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "no space left on the device holding" in errors[0], output
    assert "run the same command again" in errors[0] and "Traceback" not in output


@pytest.mark.parametrize(
    "nth",
    [
        1,
        *(pytest.param(n, marks=pytest.mark.slow) for n in (2, 3, 5)),
        8,
        *(pytest.param(n, marks=pytest.mark.slow) for n in (13, 18)),
    ],
)  # a campaign over the writes of a run: two points by default, every one with `-m slow`
def test_a_full_disk_at_a_file_write_is_one_clear_line_and_the_same_command_goes_on(tmp_path, baseline, nth):
    root = tmp_path / "ws"
    with disk_full_at_fsync(nth) as calls:
        code, output = cli(*RUN, *SIM, root=root)
    assert calls[0] >= nth, "the run ended before the disk was full"
    assert_no_space_message(code, output)
    # The first fsync is the run's manifest file: the run is recorded by then, and kept.
    assert (root / "state" / "lexpilot.sqlite3").is_file(), "the workspace was taken away"
    leftovers = [p for p in root.rglob(".*") if p.is_file() and p.name != "writer.lock"]
    assert not leftovers, f"half-written files left: {leftovers}"
    assert_same_as(baseline, first_run_to_the_end(root))


@pytest.mark.parametrize(
    "pages", [0, pytest.param(3, marks=pytest.mark.slow), 10, pytest.param(24, marks=pytest.mark.slow)]
)  # two points by default, every one with `-m slow`
def test_a_full_disk_in_the_database_is_one_clear_line_and_the_same_command_goes_on(tmp_path, baseline, pages):
    root = tmp_path / "ws"
    with database_full_after(pages):
        code, output = cli(*RUN, *SIM, root=root)
    assert_no_space_message(code, output)
    if pages == 0:  # not even the first run could be recorded: the new folder is left as it was
        assert not root.exists()
    assert_same_as(baseline, first_run_to_the_end(root))


# --- 9. leftovers, outages, read-only workspaces -------------------------------------------------


def test_temporary_files_of_stopped_commands_are_removed_by_the_next_writer(tmp_path, baseline):
    root = tmp_path / "ws"
    code, output = cli(
        "prepare", "--stage", "all", "--run-id", "r1", "--model", "sim-eval", "--limit", str(LIMIT), *SIM[:2], root=root
    )
    assert code == 0, output
    strays = [
        root / "responses" / "w0001" / ".eval__sim-eval__000.output.jsonl.0123abcd.tmp",  # a download cut short
        root / "requests" / "w0001" / ".building-abc-000.jsonl",  # a shard being compiled
        root / "runs" / "r1" / ".manifest.json.89abcdef.tmp",
        root / "responses" / "w0001" / ".candidate-batch_1.jsonl",
    ]
    for path in strays:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b'{"half": ')
    mine = root / "responses" / "notes.tmp"  # not a name the product writes through
    mine.write_text("mine", encoding="utf-8")
    assert cli("status", root=root)[0] == 0
    assert all(p.exists() for p in strays), "a reader removed files"
    code, output = cli(*RUN, *SIM, root=root)
    assert code == 0, output
    assert not any(p.exists() for p in strays) and mine.exists()
    assert_same_as(baseline, outcome_of(root))


def failing_for(rounds: int, server_faults: dict) -> tuple[list[engine.Outage], Callable[[Workspace, Session], None]]:
    outages: list[engine.Outage] = []

    def drive(ws: Workspace, session: Session) -> None:
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)  # wave 1 sent
        server = session._server
        assert server is not None
        healthy = server.faults
        server.faults = dataclasses.replace(healthy, **server_faults)

        def on_outage(outage: engine.Outage) -> None:
            outages.append(outage)
            if len(outages) == rounds:
                server.faults = healthy

        poll_and_advance(ws, session, do_submit=True, wait=True, poll_interval=0.01, on_outage=on_outage)

    return outages, drive


def test_wait_rides_out_a_provider_that_fails_every_call_for_a_while(tmp_path, baseline):
    outages, drive = failing_for(3, {"http_500": 1.0, "retry_after": 0.001})
    outcome = run_benchmark(tmp_path / "ws", drive=drive)
    assert [o.failures for o in outages] == [1, 2, 3]
    assert all(isinstance(o.error, ProviderUnavailable) and o.pause > 0 for o in outages)
    assert_same_as(baseline, outcome)


def test_wait_gives_up_after_the_outage_budget_saying_nothing_was_lost(tmp_path, baseline):
    def drive(ws: Workspace, session) -> None:
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
        server = session._server
        healthy = server.faults
        server.faults = dataclasses.replace(healthy, http_500=1.0, retry_after=0.001)
        session.options.outage_wait = 0.3
        with pytest.raises(ProviderUnavailable, match="rounds in a row") as raised:
            poll_and_advance(ws, session, do_submit=True, wait=True, poll_interval=0.05)
        assert "nothing was lost" in str(raised.value)
        server.faults = healthy
        finish(ws, session)

    assert_same_as(baseline, run_benchmark(tmp_path / "ws", drive=drive))


@pytest.mark.slow  # a chaos campaign of 429s and 500s over a whole run
def test_one_wait_finishes_under_heavy_429_and_500_chaos(tmp_path, baseline, monkeypatch):
    faults = "http_429=0.35,http_500=0.3,retry_after=0.001"
    # Rounds refused in a row back off up to OUTAGE_PAUSE_MAX (300 s) between them, as they should
    # against a real provider; here the provider is back at once, so each pause is cut to 50 ms
    # (this test asks that the wait ends with the fault-free records, not how long it pauses).
    pause = clock.pause
    monkeypatch.setattr(clock, "pause", lambda seconds: pause(min(seconds, 0.05)))

    def drive(ws: Workspace, session) -> None:
        poll_and_advance(ws, session, do_submit=True, wait=True, poll_interval=0.01)

    outcome = run_benchmark(tmp_path / "ws", faults, drive=drive)
    assert outcome.server["http_429"] + outcome.server["http_500"] > outcome.server["calls"] / 2
    assert_same_as(baseline, outcome)


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder` as a read-only view: a read-only bind mount where this process may mount (root
    ignores file permissions), the folder with its write permissions taken away otherwise."""
    view = folder.with_name(folder.name + "-ro")
    if os.geteuid() == 0 if hasattr(os, "geteuid") else False:
        view.mkdir()
        mounted = subprocess.run(["mount", "--bind", str(folder), str(view)], capture_output=True, check=False)
        if mounted.returncode != 0:
            view.rmdir()
            pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode(errors='replace').strip()}")
        try:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True, capture_output=True)
            yield view
        finally:
            subprocess.run(["umount", str(view)], check=False, capture_output=True)
            view.rmdir()
        return
    modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
    for path in modes:
        path.chmod(modes[path] & ~0o222)
    try:
        yield folder
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


@pytest.mark.skipif(sys.platform == "win32", reason="read-only views by mount or POSIX permissions")
def test_a_read_only_workspace_is_read_and_never_written(tmp_path, baseline):
    root = tmp_path / "ws"
    first_run_to_the_end(root)
    out = tmp_path / "out"
    readers = [["status"], ["status", "--format", "json"], ["report", "--format", "json"], ["doctor"]]
    writable = [cli(*args, root=root) for args in readers]
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    with read_only(root) as view:
        for args, expected in zip(readers, writable, strict=True):
            code, printed = cli(*args, root=view)
            # The same, but for the --root the hints repeat (`status`'s next command names it).
            assert (code, printed.replace(str(view), str(root))) == expected, args
        code, output = cli("export", "--out", str(out), root=view)
        assert code == 0 and any(out.rglob("*.jsonl")), output
        for args in (
            ["prepare", "--stage", "lca", "--model", "sim-eval", "--limit", "1"],
            ["submit"],
            ["poll-and-advance", "--submit"],
            ["retry"],
            ["doctor", "--repair"],
        ):
            code, output = cli(*args, root=view)
            assert code == 1 and "the workspace is read-only" in output and "Traceback" not in output, (args, output)
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before
    assert sqlite3.connect(root / "state" / "lexpilot.sqlite3").execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
