"""Copies of one workspace (issue 44, item 1): a workspace knows which copy it is.

A workspace copied while its second wave is in flight (`cp -r`, a backup restored beside the
original, a colleague's copy), then both copies run at once on one provider, each in its own
thread, each file's batch created by both at the same moment.
The copy is another instance of the workspace: its batches carry its own tag, and neither copy takes
the other's batches for duplicates of its own. Each copy ends with the records of the fault-free
run, asks nothing twice and takes no more waves; at the provider each copy holds one batch per file
(those sent before the copy was made are both copies' one batch), and nothing is cancelled; each copy's `status` and `doctor` say that another copy's batches were left alone.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend
from lexpilot_batch.simulated import SimulatedServer
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import prepare_runs
from tests.helpers.faults import (
    LIMIT,
    STAGE,
    Outcome,
    assert_same_as,
    check_invariants,
    read_outcome,
    simulated_batches,
    simulated_uploads,
)

pytestmark = pytest.mark.usefixtures("no_fsync", "clean_env")


def session_of(ws: Workspace) -> Session:
    return Session(ws, ProviderOptions(retries=8, create_grace=0.5))


class AtOnce:
    """Both copies create a file's batch at the same moment, as two processes running the same
    waves do: the first to reach a file's create waits (a moment at most) for the other to reach
    it too, so that neither has seen the other's batch of that file when it sends its own."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.arrived: dict[str, threading.Event] = {}

    def create(self, real: Any) -> Any:
        def create(backend, input_file_id, metadata, endpoint=None, source=None):
            key = f"{metadata.get('lexpilot_file')}#{metadata.get('lexpilot_create')}"
            with self.lock:
                other = self.arrived.pop(key, None)
                if other is None:
                    mine = self.arrived[key] = threading.Event()
            if other is not None:
                other.set()
            else:
                mine.wait(2.0)
            return real(backend, input_file_id, metadata, endpoint, source)

        return create


def run_copy(root: Path, done: dict[str, Outcome], failed: list[BaseException]) -> None:
    """One copy's own command loop, in its own thread (its database connection is its own)."""
    try:
        with Workspace(root) as ws:
            session = session_of(ws)
            try:
                for _ in range(400):
                    left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
                    if left["in_flight"] == 0 and left["unsubmitted"] == 0:
                        break
                    time.sleep(0.02)
                else:
                    raise AssertionError(f"{root.name} did not finish")
            finally:
                session.close()
            done[root.name] = read_outcome(ws)
    except BaseException as exc:  # reported by the main thread
        failed.append(exc)


def run_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Outcome], list[dict[str, Any]], set[str]]:
    """Copy a workspace whose second wave is in flight, then run both copies to the end at once
    against one simulated provider; what each copy holds, the batches the provider holds, and the
    batches sent before the copy was made."""
    with SimulatedServer(tmp_path / "provider") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-simulated")
        original, copy = tmp_path / "original", tmp_path / "copy"
        with Workspace(original) as ws:
            session = session_of(ws)
            try:
                prepare_runs(ws, session, stage=STAGE, limit=LIMIT)
                while not ws.store.conn.execute(
                    "SELECT 1 FROM files WHERE wave = 2 AND batch_id IS NOT NULL"
                ).fetchone():
                    poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
                    time.sleep(0.02)
            finally:
                session.close()
            sent = {r[0] for r in ws.store.conn.execute("SELECT batch_id FROM files WHERE batch_id IS NOT NULL")}
        shutil.copytree(original, copy)
        monkeypatch.setattr(OpenAIBatchBackend, "create", AtOnce().create(OpenAIBatchBackend.create))
        done: dict[str, Outcome] = {}
        failed: list[BaseException] = []
        threads = [threading.Thread(target=run_copy, args=(root, done, failed)) for root in (original, copy)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failed:
            raise failed[0]
        for root in (original, copy):
            check_invariants(root, done[root.name])
    uploads = Counter(u["filename"] for u in simulated_uploads(tmp_path / "provider"))
    assert set(uploads.values()) == {1}, f"a file uploaded twice: {uploads}"  # each copy's its own
    return done, simulated_batches(tmp_path / "provider"), sent


def test_two_copies_running_at_once_leave_each_others_batches_alone(tmp_path, monkeypatch, baseline):
    outcomes, held, before = run_copies(tmp_path, monkeypatch)
    waves = max(r["wave"] for r in baseline.requests)
    for name, outcome in outcomes.items():
        assert_same_as(baseline, outcome)  # its records, and nothing asked that the fault-free run did not ask
        assert max(r["wave"] for r in outcome.requests) == waves, f"{name} took more waves"
        assert len(outcome.requests) == len(baseline.requests), f"{name} asked something twice"
        assert {b["why"] for b in outcome.other_batches} <= {"other_copy"}, f"{name} set aside a batch of its own"

    # Nothing cancelled at the provider; one batch per file of each copy (those sent before the
    # copy was made, both copies' one batch).
    assert not [b for b in held if b["status"] in ("cancelling", "cancelled")]
    per_file = Counter((b["metadata"].get("lexpilot_instance"), b["metadata"]["lexpilot_file"]) for b in held)
    assert set(per_file.values()) == {1}, per_file
    own = {name: {f["batch_id"] for f in o.files} for name, o in outcomes.items()}
    assert own["original"] & own["copy"] == before and {f["wave"] for f in outcomes["copy"].files} > {1, 2}
    assert own["original"] | own["copy"] == {b["id"] for b in held}  # each batch some copy's own
    instances = {name: {b["metadata"].get("lexpilot_instance") for b in held if b["id"] in own[name]} for name in own}
    assert len(instances["original"]) == 1 and len(instances["copy"]) == 2  # its own, and the original's before

    # Each copy saw the other's batches, left them alone, and says so.
    for name, outcome in outcomes.items():
        theirs = {b["batch_id"] for b in outcome.other_batches}
        other = "copy" if name == "original" else "original"
        assert theirs and theirs <= own[other] - own[name]
        assert "another copy" in outcome.rendered, outcome.rendered
        report = doctor.check(tmp_path / name)
        (finding,) = [f for f in report.found if f.kind == "other_copy_batches"]
        assert finding.severity == "info" and str(len(theirs)) in finding.detail
