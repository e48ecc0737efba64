"""Fixtures shared by several test modules."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from engine_helpers import finish, open_session, prepare_runs

from lexpilot_batch.workspace import Workspace

STUDY_MODELS = ("sim-a", "openai/sim-b")  # a bare name and a provider-qualified one
STUDY_RUNS = ("r1", "r2")


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


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LEXPILOT_ or OPENAI_ variable of the shell running the tests reaches a run."""
    for name in list(os.environ):
        if name.startswith(("LEXPILOT_", "OPENAI_")):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def no_fsync() -> Iterator[None]:
    """fsync off for a module whose runs are all in-process (`pytest.mark.usefixtures`): durability
    is `test_crash.py`'s business (in child processes, untouched by this), and fsync only costs
    time there: about half of it on a busy disk."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", lambda fd: None)
        yield
