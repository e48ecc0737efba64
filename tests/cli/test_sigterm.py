"""SIGTERM (`kill`, a cluster's job time limit, `docker stop`) ends a command as Ctrl-C does: the
same paths out, a line saying how to resume, exit 143 (128 + SIGTERM). It ended the command at
once and silently (the shell saw -15), its progress bars and compaction worker left as they were.

From the first instruction of `cli.main` (issue 44, item 5): one landing while the modules load
was the system's silent -15 or a traceback of whatever module was loading (rc 1), one landing in
typer's reading of the arguments exit 130 with no word, and one landing in a finalizer was
printed as "Exception ignored" and swallowed (rc 0).
"""

from __future__ import annotations

import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import pytest

from lexpilot_batch.cli import TERMINATED, TERMINATED_EXIT
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.crash import base_env
from tests.helpers.engine import open_session, prepare_runs

posix_only = pytest.mark.skipif(
    sys.platform == "win32", reason="Popen.send_signal(SIGTERM) is TerminateProcess on Windows"
)


def _prepared(root: Path) -> Path:
    with Workspace(root) as ws:
        session = open_session(ws, "")
        try:
            prepare_runs(ws, session, stage="lca", limit=2)
        finally:
            session.close()
    return root


def _cli_with(setup: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`main()` in a child process, after `setup` (Python source) has arranged a SIGTERM."""
    source = (
        f"import sys\n{setup}\nfrom lexpilot_batch.cli import main\nsys.argv = {['lexpilot-batch', *args]!r}\nmain()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", source], env=base_env(), capture_output=True, text=True, encoding="utf-8", timeout=120
    )


def _status_where(root: Path, first: str) -> subprocess.CompletedProcess[str]:
    """`status` in a child process whose summary runs `first` (Python source, a function body's
    statements, `signal` imported) before its own work: where the tests below land a SIGTERM."""
    setup = (
        "import signal\n"
        "import lexpilot_batch.status.summary as summary\n"
        "real = summary.summarize\n"
        "def summarize(*args, **kwargs):\n"
        f"{textwrap.indent(first, '    ')}"
        "    return real(*args, **kwargs)\n"
        "summary.summarize = summarize\n"
    )
    return _cli_with(setup, "status", "--root", str(root))


@posix_only
def test_a_sigterm_while_the_modules_load_stops_the_command_before_it_does_anything(tmp_path):
    root = _prepared(tmp_path / "ws")
    # Sent to itself when the application's modules are imported, as a `kill` lands in the first half second.
    setup = (
        "import importlib.abc, os, signal\n"
        "class Kill(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'lexpilot_batch.cli.application':\n"
        "            os.kill(os.getpid(), signal.SIGTERM)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Kill())\n"
    )
    done = _cli_with(setup, "poll-and-advance", "--submit", "--provider", "simulated", "--root", str(root))
    assert (done.returncode, done.stderr, done.stdout) == (TERMINATED_EXIT, TERMINATED + "\n", "")
    with Workspace(root) as ws:  # nothing was done: the wave is still unsent
        assert {r[0] for r in ws.store.conn.execute("SELECT status FROM files")} == {"compiled"}


@posix_only
def test_a_sigterm_a_finalizer_swallows_still_stops_the_command(tmp_path):
    """Raised inside a `__del__` (an SDK client collected, a generator closed), `Terminated` cannot
    propagate: Python printed "Exception ignored in ..." with its traceback and the command went
    on to exit 0. It is raised again instead, and the command stops as on any SIGTERM."""
    root = _prepared(tmp_path / "ws")
    done = _status_where(
        root,
        "class Finalized:\n"
        "    def __del__(self):\n"
        "        signal.raise_signal(signal.SIGTERM)\n"
        "Finalized()  # dropped at once: its finalizer receives the signal\n",
    )
    assert (done.returncode, done.stderr) == (TERMINATED_EXIT, TERMINATED + "\n")


@posix_only
def test_a_sigterm_a_library_turns_into_its_own_error_still_stops_the_command(tmp_path):
    """Landing inside a library that catches what is raised there and raises its own error
    (pydantic-core building a schema while the openai SDK loads: `SchemaError: Error building
    ... Terminated`), the SIGTERM came out as that error: a traceback and rc 1, seen once in 200
    in the start-up campaign. An error a body ends with after a SIGTERM arrived is its consequence."""
    root = _prepared(tmp_path / "ws")
    done = _status_where(
        root,
        "try:\n"
        "    signal.raise_signal(signal.SIGTERM)\n"
        "except BaseException as caught:  # as a library's own error handling does\n"
        "    raise RuntimeError(f'Error building serializer: {caught!r}') from None\n",
    )
    assert (done.returncode, done.stderr) == (TERMINATED_EXIT, TERMINATED + "\n")


@posix_only
def test_a_waiting_command_stopped_by_sigterm_says_how_to_resume_and_keeps_its_batches(tmp_path):
    root = _prepared(tmp_path / "ws")
    command = [sys.executable, "-m", "lexpilot_batch", "poll-and-advance", "--submit", "--wait", "--poll-interval"]
    waiting = subprocess.Popen(
        [*command, "0.1", "--provider", "simulated", "--sim-faults", "latency=600", "--root", str(root)],
        env=base_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        deadline = time.monotonic() + 60
        with closing(sqlite3.connect(root / "state" / "lexpilot.sqlite3")) as db:
            while db.execute("SELECT COUNT(*) FROM files WHERE status = 'submitted'").fetchone()[0] == 0:
                assert waiting.poll() is None and time.monotonic() < deadline, "the batch was never submitted"
                time.sleep(0.05)
        waiting.send_signal(signal.SIGTERM)
        _out, err = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == TERMINATED_EXIT, err
    assert TERMINATED in err and "Traceback" not in err
    with Workspace(root) as ws:  # the lock released; the batch in flight kept, to be polled again
        (status,) = {r[0] for r in ws.store.conn.execute("SELECT status FROM files")}
        assert status == "submitted"


# --- the campaign: SIGTERMs at random instants of start-up ---------------------------------------

SIGTERMS = 200


def _entry_points() -> list[list[str]]:
    """Both ways in: the console script pip installed beside this interpreter, and `python -m`."""
    script = Path(sys.executable).with_name("lexpilot-batch")
    return ([[str(script)]] if script.is_file() else []) + [[sys.executable, "-m", "lexpilot_batch"]]


def _seconds(command: list[str], times: int = 5) -> float:
    took = []
    for _ in range(times):
        started = time.monotonic()
        subprocess.run(command, env=base_env(), capture_output=True, check=False)
        took.append(time.monotonic() - started)
    return statistics.median(took)


def _catches_sigterm(pid: int) -> bool | None:
    """Whether process `pid` has a handler for SIGTERM now (Linux: the SigCgt mask of
    /proc/PID/status); None where the system does not say (no /proc, the process gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return None


def _terminated_at(command: list[str], delay: float) -> tuple[float, int, str, str, bool | None]:
    """Start `command`, SIGTERM it `delay` seconds later; (delay, exit code, stdout, stderr, whether
    it had a SIGTERM handler just before the signal was sent)."""
    # With faulthandler on, a child still running a minute after the signal is sent SIGABRT and
    # prints every thread's stack: the failure then says where the signal was lost.
    env = {**base_env(), "PYTHONFAULTHANDLER": "1"}
    child = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8"
    )
    try:
        time.sleep(delay)
        caught = _catches_sigterm(child.pid)
        child.send_signal(signal.SIGTERM)
        try:
            out, err = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGABRT)
            out, err = child.communicate(timeout=30)
            raise AssertionError(
                f"still running 60 s after SIGTERM at {delay:.3f} s; its stacks:\n{err[-6000:]}"
            ) from None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return delay, child.returncode, out, err, caught


@pytest.mark.slow
@posix_only
def test_sigterms_at_random_instants_of_start_up_exit_143_with_one_line(tmp_path):
    """200 SIGTERMs at random instants from exec to past the end of start-up (the imports, typer
    reading the arguments, the workspace and session opened), through both entry points: each ends
    with exit 143 and the one line, never a traceback, never an exit 0, 1 or 130.

    The one exception is the interpreter's own start-up, before the first line of the package runs
    (a few tens of milliseconds, more on a loaded machine): there the system's default action ends
    the process, which a shell reports as 143 and `subprocess` as -15, printing nothing. Such an end
    is accepted only where the process had no SIGTERM handler yet when the signal was sent (Linux's
    /proc/PID/status, read just before; elsewhere, within a few times the time a bare interpreter
    takes to start): a default end after the handler was in place is a handler lost."""
    entries = _entry_points()
    roots = [_prepared(tmp_path / f"ws{i}") for i in range(2)]  # two at a time, a workspace each
    waiting = ["poll-and-advance", "--submit", "--wait", "--poll-interval", "0.1", "--provider", "simulated"]
    waiting += ["--sim-faults", "latency=600"]
    start_up = _seconds([*entries[-1], "status", "--root", str(roots[0])], times=3)
    bare = _seconds([sys.executable, "-c", "import re, sys"])
    rng = random.Random(44)
    plan = [(rng.choice(entries), rng.uniform(0, 1.5 * start_up)) for _ in range(SIGTERMS)]

    def half(worker: int) -> list[tuple[float, int, str, str, bool | None]]:  # one workspace each, one at a time
        return [
            _terminated_at([*entry, *waiting, "--root", str(roots[worker])], delay) for entry, delay in plan[worker::2]
        ]

    with ThreadPoolExecutor(2) as pool:
        ends = [end for ended in pool.map(half, range(2)) for end in ended]
    # Stopped: the one line last (after the progress lines of a command that had begun its work).
    stopped = [e for e in ends if e[1] == TERMINATED_EXIT and e[3].splitlines()[-1:] == [TERMINATED]]
    before_main = [e for e in ends if (e[1], e[2], e[3]) == (-signal.SIGTERM, "", "")]
    others = [e for e in ends if e not in stopped and e not in before_main]
    assert not others, [(round(d, 3), rc, err[-400:]) for d, rc, _, err, _ in others[:5]]
    assert not any("Traceback" in e[3] or "Error" in e[3] or e[3].count(TERMINATED) != 1 for e in stopped)
    late = [round(e[0], 3) for e in before_main if e[4] is True or (e[4] is None and e[0] > 4 * bare + 0.05)]
    assert not late, f"ended by the default action with a SIGTERM handler in place: {late} (bare start {bare:.3f} s)"
    assert len(stopped) >= SIGTERMS * 3 // 4, (len(stopped), len(before_main))
    print(
        f"{SIGTERMS} SIGTERMs over 0-{1.5 * start_up:.2f} s: {len(stopped)} exit 143 with the line, "
        f"{len(before_main)} in the interpreter's own start-up (bare start {bare:.3f} s)"
    )
