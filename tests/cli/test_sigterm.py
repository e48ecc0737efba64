"""SIGTERM (`kill`, a cluster's job time limit, `docker stop`) ends a command as Ctrl-C does: the
same paths out, a line saying how to resume, exit 143 (128 + SIGTERM). It ended the command at
once and silently (the shell saw -15), its progress bars and compaction worker left as they were."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing

import pytest

from lexpilot_batch.cli import TERMINATED, TERMINATED_EXIT
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.crash import base_env
from tests.helpers.engine import open_session, prepare_runs


@pytest.mark.skipif(sys.platform == "win32", reason="Popen.send_signal(SIGTERM) is TerminateProcess on Windows")
def test_a_waiting_command_stopped_by_sigterm_says_how_to_resume_and_keeps_its_batches(tmp_path):
    root = tmp_path / "ws"
    with Workspace(root) as ws:
        session = open_session(ws, "")
        try:
            prepare_runs(ws, session, stage="lca", limit=2)
        finally:
            session.close()
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
