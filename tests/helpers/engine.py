"""Shared drivers for engine tests: a workspace, a simulated session, a loop to the end."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

from lexpilot_batch.benchmark import records as stored_records
from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.data import stored_case
from lexpilot_batch.engine.loop import poll_and_advance, prepare
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.providers.ids import IdParts, id_parts
from lexpilot_batch.state.compaction import read_saved, saved_files
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import RunSpec

# The models and runs of the `study` fixture (conftest): a bare name and a provider-qualified one.
STUDY_MODELS = ("sim-a", "openai/sim-b")
STUDY_RUNS = ("r1", "r2")


def open_session(ws: Workspace, faults: str | None = None, **options) -> Session:
    # A create whose answer was lost is looked for during a grace period: short in tests.
    options.setdefault("create_grace", 0.5)
    return Session(ws, ProviderOptions(provider="simulated", sim_faults=faults or "", **options))


def prepare_runs(
    ws: Workspace,
    session: Session,
    stage: str = "lca",
    runs=("r1",),
    model: str = "sim-eval",
    speculate: bool = False,
    limit: int | None = None,
    settings: Settings | None = None,
    dataset: Path | None = None,
):
    spec = RunSpec(
        tuple(runs), (model,), stage, settings or Settings(), dataset=dataset, limit=limit, speculate=speculate
    )
    return prepare(ws, session, spec)


FINISH_SECONDS = 240.0  # wall time a driven workspace may take: batch durations are real seconds


def rounds(seconds: float = FINISH_SECONDS) -> Iterator[int]:
    """Round numbers until `seconds` of wall time have passed, a short pause between rounds: a
    driver's bound in time, not in rounds, since how many rounds a simulated batch's real seconds
    take depends on how fast this machine runs them."""
    deadline = time.monotonic() + seconds
    number = 0
    while number == 0 or time.monotonic() < deadline:
        yield number
        number += 1
        time.sleep(0.02)


def finish(ws: Workspace, session: Session, seconds: float = FINISH_SECONDS) -> dict[str, int]:
    """Submit and poll until nothing is left; fail loudly instead of looping forever."""
    for _ in rounds(seconds):
        left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
        if left["in_flight"] == 0 and left["unsubmitted"] == 0:
            return left
    raise AssertionError("the workspace did not finish")


def records(ws: Workspace) -> dict[tuple, dict]:
    """Every finished record, as its protocol made it, by (run id, model, task, case index, variant)."""
    out = {}
    for r in ws.store.conn.execute(
        "SELECT runs.run_id, runs.model, t.task, t.case_idx, t.variant, t.record, c.data FROM threads t"
        " JOIN runs ON runs.pk = t.run_pk JOIN cases c ON c.dataset = runs.dataset AND c.idx = t.case_idx"
        " WHERE t.status = 'done'"
    ):
        record = stored_records.expand(json.loads(r["record"]), stored_case(r["data"]))
        out[(r["run_id"], r["model"], r["task"], r["case_idx"], r["variant"])] = record
    return out


def thread_counts(ws: Workspace) -> dict[str, int]:
    return {
        r["status"]: r["n"] for r in ws.store.conn.execute("SELECT status, COUNT(*) AS n FROM threads GROUP BY status")
    }


def wave_count(ws: Workspace) -> int:
    return ws.store.conn.execute("SELECT COUNT(*) FROM waves").fetchone()[0]


def our_parts(custom_id: str) -> IdParts:
    """The parts of a custom_id this workspace compiled (run, case, step, attempt, tag, digest); the
    test fails on any other id."""
    parts = id_parts(custom_id)
    assert parts is not None, f"not one of our custom_ids: {custom_id!r}"
    return parts


def request_key(custom_id: str) -> str:
    """A request's custom_id less its workspace's tag: the same for the same request compiled in any
    workspace (its run, case, step, attempt and the hash of its line), so two workspaces' compare."""
    parts = id_parts(custom_id)
    return custom_id if parts is None else f"{parts.stem}-{parts.digest}"


def request_lines(ws: Workspace) -> dict[str, list[dict]]:
    """Every request file of the workspace (plain or compacted), its lines parsed, by path."""
    out = {}
    for path in saved_files(ws.requests_dir):  # plain or compacted
        raw = read_saved(path)
        assert b"\n\n" not in raw and raw.endswith(b"\n"), f"{path} has blank lines"
        out[ws.relative(path)] = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
    return out
