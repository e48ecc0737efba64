"""Fixtures shared by several test modules.

`tests` is a package that mirrors `lexpilot_batch`, a folder per layer (`tests/engine/test_submit.py`,
`tests/providers/anthropic/test_lines.py`); the scenario suites stand in `tests/scenarios/`. What
several modules share, builders, fakes and drivers, is in `tests/helpers/` (`helpers.engine`,
`helpers.faults`, `helpers.native`, ...), imported as `tests.helpers.<module>`; the fixtures built on
them are here. No test module imports another (`tests/test_layout.py` fails on one).
"""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lexpilot_batch.engine.session import Session
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import STUDY_MODELS, STUDY_RUNS, finish, open_session, prepare_runs
from tests.helpers.faults import LIMIT, Outcome, SyncProvider, run_benchmark

# A suite started in the background of a non-interactive shell (`bash script &`, `nohup`) inherits
# SIGINT ignored, and so would every command it starts: the Ctrl-C scenarios would press a key that
# nothing hears, and fail. A handler of ours is reset to the default in the commands started, which
# then take Ctrl-C as a user's terminal gives it. (In the controller and in each xdist worker.)
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    """An empty workspace (a module that needs one prepared defines its own `ws`)."""
    with Workspace(tmp_path / "ws") as workspace:
        yield workspace


@pytest.fixture
def session(ws: Workspace) -> Iterator[Session]:
    """A session over `ws`, with the simulated provider (`helpers.engine.open_session`)."""
    s = open_session(ws)
    yield s
    s.close()


@pytest.fixture(scope="session")
def study(tmp_path_factory):
    """A small finished study: two evaluated models, two runs each, every task, the bundled sample."""
    with Workspace(tmp_path_factory.mktemp("study")) as ws:
        session = open_session(ws)
        try:
            for model in STUDY_MODELS:
                prepare_runs(ws, session, stage="all", runs=STUDY_RUNS, model=model)
            finish(ws, session)
        finally:
            session.close()
        yield ws


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The fault-free run of `helpers.faults.run_benchmark` that a module's fault scenarios end equal
    to: every thread done, no request failed, no anomaly."""
    outcome = run_benchmark(tmp_path_factory.mktemp("baseline") / "ws")
    assert Counter(s for s, _ in outcome.threads.values()) == {"done": 6 * LIMIT}
    assert not outcome.failed_requests() and not outcome.anomalies
    return outcome


@pytest.fixture(scope="module")
def sync_baseline(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """`baseline` with every role on the `sync` backend (`helpers.faults.SyncProvider`)."""
    root = tmp_path_factory.mktemp("sync-baseline")
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(("LEXPILOT_", "OPENAI_")):
                mp.delenv(name)
        provider = SyncProvider(root / "provider", "", mp)
        try:
            outcome = run_benchmark(root / "ws", session_factory=provider.session)
        finally:
            provider.close()
    assert Counter(s for s, _ in outcome.threads.values()) == {"done": 6 * LIMIT}
    assert all(f["backend"] == "sync" for f in outcome.files)
    return outcome


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LEXPILOT_ or OPENAI_ variable of the shell running the tests reaches a run."""
    for name in list(os.environ):
        if name.startswith(("LEXPILOT_", "OPENAI_")):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def no_fsync() -> Iterator[None]:
    """fsync off for a module whose runs are all in-process (`pytest.mark.usefixtures`): durability
    is `scenarios/test_crash.py`'s business (in child processes, untouched by this), and fsync only costs
    time there: about half of it on a busy disk."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", lambda fd: None)
        yield


@pytest.fixture
def in_process(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> Callable[[list[str]], tuple[int, bytes]]:
    """Run the CLI in this process: `(args) -> (exit code, stdout + stderr bytes)`, with an
    environment holding no key or endpoint but those a test sets, no secret remembered from an
    earlier test, and no SDK retry delay."""
    from lexpilot_batch.cli import main
    from lexpilot_batch.providers.google import client as google_client

    for name in list(os.environ):
        if name.upper().endswith(("_API_KEY", "_BASE_URL", "_BACKEND", "_AUTH_TOKEN")):
            monkeypatch.delenv(name)
    monkeypatch.setattr(google_client, "RETRY_DELAY", 0.0)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # main() installs its own
    try:  # secrets registered by an earlier test's clients are forgotten: each test proves its own
        from lexpilot_batch.util import redaction

        monkeypatch.setattr(redaction, "_registered", {})
    except ImportError:  # the code before redaction existed (to show that these tests fail on it)
        pass

    def run(args: list[str]) -> tuple[int, bytes]:
        capfd.readouterr()
        monkeypatch.setattr(sys, "argv", ["lexpilot-batch", *args])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capfd.readouterr()
        return code, (out + err).encode("utf-8")

    return run
