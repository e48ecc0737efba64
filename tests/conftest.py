"""Fixtures shared by several test modules."""

from __future__ import annotations

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
