"""Copies of one workspace (issue 44, item 1): a workspace knows which copy it is.

A workspace copied while its second wave is in flight (`cp -r`, a backup restored beside the
original, a colleague's copy), then both copies run at once on one provider, each in its own
thread, each file's batch created by both at the same moment: on OpenAI's shape, whose batches
carry the copy's tag, and on Together's, whose jobs carry no tag and whose upload the copies share.
Neither copy takes the other's batches for duplicates of its own. Each copy ends with the records
of the fault-free run, asks nothing twice and takes no more waves; at the provider each copy holds
one batch per file (those sent before the copy was made are both copies' one batch), and nothing is
cancelled; each copy's `status` and `doctor` say that another copy's batches were left alone.

Two more ways of running at once, on OpenAI's shape: copies the tool cannot tell apart (a cloned
machine: one instance), which leave each other's batches alone all the same, `doctor` saying to run
`--claim-copy`; and a copy running a version before copies were told apart, which cancels the
other's batches as its duplicates: the other ends with the fault-free records, cancels nothing, and
its `doctor` names every batch of its own cancelled by someone else (it said "No problems found").
Each batch runs a while (`LATENCY`), so that a copy's sweep sees the other's batches live.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine import sweep as sweep_module
from lexpilot_batch.engine.loop import poll_and_advance, prepare
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.providers.batch import BatchBackend
from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend
from lexpilot_batch.providers.together.batch import TogetherBatchBackend
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.simulated.native import job_id
from lexpilot_batch.state import instances
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.engine import finish, open_session, prepare_runs
from tests.helpers.faults import (
    LIMIT,
    STAGE,
    Outcome,
    assert_same_as,
    check_invariants,
    read_outcome,
    simulated_uploads,
)
from tests.helpers.native import point_at

pytestmark = pytest.mark.usefixtures("no_fsync", "clean_env")


LATENCY = 0.4  # seconds a simulated batch runs


def session_of(ws: Workspace) -> Session:
    return Session(ws, ProviderOptions(retries=8, create_grace=0.5))


class AtOnce:
    """Both copies send a file at the same moment, as two processes running the same waves do: the
    first to reach a file's create waits (a moment at most) for the other to reach it too, so that
    neither has seen the other's batch of that file when it sends its own. Their uploads of it go
    one after the other, so that a provider that keeps one file per content (Together) gives the
    second copy the first one's upload. Once one copy has ended, the other goes on alone; copies
    that went different ways (one's batches cancelled, the other's not) wait `wait` seconds at most."""

    def __init__(self, wait: float = 2.0) -> None:
        self.wait = wait
        self.lock = threading.Lock()
        self.arrived: dict[str, threading.Event] = {}
        self.uploaded: dict[str, threading.Event] = {}
        self.alone = threading.Event()  # a copy has ended: nobody to wait for

    def _meet(self, key: str) -> None:
        with self.lock:
            other = self.arrived.pop(key, None)
            if other is None:
                mine = self.arrived[key] = threading.Event()
        if other is not None:
            other.set()
            return
        until = time.monotonic() + self.wait
        while not mine.wait(0.02) and not self.alone.is_set() and time.monotonic() < until:
            pass

    def create(self, real: Any) -> Any:
        def create(backend, input_file_id, metadata, endpoint=None, source=None):
            self._meet(f"{metadata.get('lexpilot_file')}#{metadata.get('lexpilot_create')}")
            return real(backend, input_file_id, metadata, endpoint, source)

        return create

    def upload(self, real: Any) -> Any:
        def upload(backend, path, name=None):
            with self.lock:
                first = self.uploaded.get(path.name)
                if first is None:
                    self.uploaded[path.name] = done = threading.Event()
            if first is not None:
                first.wait(2.0)
                return real(backend, path, name)
            try:
                return real(backend, path, name)
            finally:
                done.set()

        return upload


def run_copy(root: Path, done: dict[str, Outcome], failed: list[BaseException], at_once: AtOnce) -> None:
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
    finally:
        at_once.alone.set()


@dataclass(frozen=True)
class Shape:
    """How a study travels: what `prepare` is given, the backend whose creates both copies send at
    once, and a batch's id as the backend names it, from the simulated provider's record."""

    name: str
    start: Callable[[Workspace, Session], object]
    backend: type[BatchBackend]
    batch_id: Callable[[str], str]

    def __str__(self) -> str:
        return self.name


TOGETHER = "together/together-sim"
TOGETHER_STUDY = RunSpec(("r1",), (TOGETHER,), "dcg", Settings(user_model=TOGETHER, judge_model=TOGETHER), limit=3)
OPENAI = Shape("openai", lambda ws, s: prepare_runs(ws, s, stage=STAGE, limit=LIMIT), OpenAIBatchBackend, str)
# Together's jobs carry no tag but their upload, which both copies share: Together keeps one file
# per content (a second upload of the same checksum is answered 409 with the first's id).
TOGETHER_SHAPE = Shape("together", lambda ws, s: prepare(ws, s, TOGETHER_STUDY), TogetherBatchBackend, job_id)


def run_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: Shape, told: bool = True, earlier: bool = False
) -> tuple[dict[str, Outcome], dict[str, dict[str, Any]], set[str]]:
    """Copy a workspace whose second wave is in flight, then run both copies to the end at once
    against one simulated provider: what each copy holds, the batches the provider holds (by the
    backend's id), and the batches sent before the copy was made. Not `told`: the copy cannot be
    told from the original (a cloned machine: the same machine name, folder and database file), so
    both are one instance. `earlier`: the copy runs a version before copies were told apart, whose
    sweep took every batch of one of its files that it did not know for a duplicate."""
    # Each batch runs a while (`LATENCY`), so that each copy's sweep sees the other's batches live.
    with SimulatedServer(tmp_path / "provider", parse_faults(f"latency={LATENCY}")) as server:
        point_at(monkeypatch, server)
        original, copy = tmp_path / "original", tmp_path / "copy"
        with Workspace(original) as ws:
            session = session_of(ws)
            try:
                shape.start(ws, session)
                while not ws.store.conn.execute(
                    "SELECT 1 FROM files WHERE wave = 2 AND batch_id IS NOT NULL"
                ).fetchone():
                    poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
                    time.sleep(0.02)
            finally:
                session.close()
            sent = {r[0] for r in ws.store.conn.execute("SELECT batch_id FROM files WHERE batch_id IS NOT NULL")}
        shutil.copytree(original, copy)
        if not told:
            monkeypatch.setattr(instances, "is_copy", lambda was, now: False)
        if earlier:
            real = sweep_module._provably_own

            def provably_own(info: Any, owner: Any, instance: str) -> bool:
                return threading.current_thread().name == "copy" or real(info, owner, instance)

            monkeypatch.setattr(sweep_module, "_provably_own", provably_own)
        at_once = AtOnce(0.3 if earlier else 2.0)
        monkeypatch.setattr(shape.backend, "create", at_once.create(shape.backend.create))
        monkeypatch.setattr(shape.backend, "upload", at_once.upload(shape.backend.upload))
        done: dict[str, Outcome] = {}
        failed: list[BaseException] = []
        threads = [
            threading.Thread(target=run_copy, args=(root, done, failed, at_once), name=root.name)
            for root in (original, copy)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failed:
            raise failed[0]
        for root in (original, copy):
            check_invariants(root, done[root.name])
        assert server.store is not None
        held = {shape.batch_id(r["batch"]["id"]): r["batch"] for r in server.store.batches_newest_first()}
    uploads = Counter(u["filename"] for u in simulated_uploads(tmp_path / "provider"))
    if told:  # each copy's its own (one instance: both copies upload a file under one name)
        assert set(uploads.values()) <= {1}, f"a file uploaded twice: {uploads}"
    return done, held, sent


@pytest.fixture(scope="module")
def together_clean(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The Together study, rehearsed in-process without a fault."""
    with Workspace(tmp_path_factory.mktemp("together-clean") / "ws") as ws:
        session = open_session(ws)
        try:
            prepare(ws, session, TOGETHER_STUDY)
            finish(ws, session)
        finally:
            session.close()
        return read_outcome(ws)


@pytest.mark.parametrize("shape", [OPENAI, TOGETHER_SHAPE], ids=str)
def test_two_copies_running_at_once_leave_each_others_batches_alone(
    tmp_path, monkeypatch, shape, baseline, together_clean
):
    clean = baseline if shape is OPENAI else together_clean
    outcomes, held, before = run_copies(tmp_path, monkeypatch, shape)
    waves = max(r["wave"] for r in clean.requests)
    for name, outcome in outcomes.items():
        assert_same_as(clean, outcome)  # its records, and nothing asked that the fault-free run did not ask
        assert max(r["wave"] for r in outcome.requests) == waves, f"{name} took more waves"
        assert len(outcome.requests) == len(clean.requests), f"{name} asked something twice"
        assert {b["why"] for b in outcome.other_batches} <= {"other_copy"}, f"{name} set aside a batch of its own"

    # Nothing cancelled at the provider; one batch per file of each copy (those sent before the
    # copy was made, both copies' one batch), every batch some copy's own.
    assert not [i for i, b in held.items() if b["status"] in ("cancelling", "cancelled")]
    own = {name: {f["batch_id"] for f in o.files} for name, o in outcomes.items()}
    assert all(len(own[name]) == len(o.files) for name, o in outcomes.items())
    assert own["original"] & own["copy"] == before and {f["wave"] for f in outcomes["copy"].files} > {1, 2}
    assert own["original"] | own["copy"] == set(held)
    if shape is OPENAI:  # tagged: each copy's batches carry its instance
        per_file = Counter(
            (b["metadata"].get("lexpilot_instance"), b["metadata"]["lexpilot_file"]) for b in held.values()
        )
        assert set(per_file.values()) == {1}, per_file
        tags = {name: {held[i]["metadata"].get("lexpilot_instance") for i in own[name]} for name in own}
        assert len(tags["original"]) == 1 and len(tags["copy"]) == 2  # its own, and the original's before

    # Each copy saw the other's batches, left them alone, and says so.
    for name, outcome in outcomes.items():
        theirs = {b["batch_id"] for b in outcome.other_batches}
        other = "copy" if name == "original" else "original"
        assert theirs and theirs <= own[other] - own[name]
        assert "another copy" in outcome.rendered, outcome.rendered
        report = doctor.check(tmp_path / name)
        (finding,) = [f for f in report.found if f.kind == "other_copy_batches"]
        assert finding.severity == "info" and str(len(theirs)) in finding.detail


def test_two_copies_that_cannot_be_told_apart_leave_each_others_batches_alone_and_doctor_says_so(
    tmp_path, monkeypatch, baseline
):
    """A clone of a whole machine: both copies are one instance, so each one's batches carry the
    other's tag. None of either's creates lost its answer, so no batch of a file it does not know
    can be its own: each leaves the other's alone (on the code before, each cancelled the other's
    as duplicates: 'No problems found'), and `doctor` says to run `--claim-copy`."""
    outcomes, held, before = run_copies(tmp_path, monkeypatch, OPENAI, told=False)
    for name, outcome in outcomes.items():
        assert_same_as(baseline, outcome)
        assert len(outcome.requests) == len(baseline.requests), f"{name} asked something twice"
        assert outcome.other_batches and {b["why"] for b in outcome.other_batches} == {"untold_copy"}
        report = doctor.check(tmp_path / name)
        (finding,) = [f for f in report.found if f.kind == doctor.UNTOLD_COPY_BATCHES]
        assert finding.severity == "warning" and "--claim-copy" in finding.fix and report.exit_code == 1
    assert not [i for i, b in held.items() if b["status"] in ("cancelling", "cancelled")]
    own = {name: {f["batch_id"] for f in o.files} for name, o in outcomes.items()}
    assert own["original"] & own["copy"] == before and own["original"] | own["copy"] == set(held)
    assert len({b["metadata"]["lexpilot_instance"] for b in held.values()}) == 1  # one instance: untold


@pytest.mark.slow  # two copies of a workspace through a whole study: about 9 s
def test_a_copy_whose_batches_another_copy_cancels_is_told_so_by_doctor(tmp_path, monkeypatch, baseline):
    """The other copy runs a version before copies were told apart and cancels this one's batches as
    its duplicates (110 of 129 in the issue's reproduction, with `doctor` saying "No problems
    found"): this copy ends with the fault-free records all the same (what a cancelled batch
    finished is kept, the rest asked again), cancels nothing of the other's, and its `doctor` and
    `status` name every batch of its own cancelled by someone else."""
    outcomes, held, _ = run_copies(tmp_path, monkeypatch, OPENAI, earlier=True)
    mine = outcomes["original"]
    assert_same_as(baseline, mine)
    cancelled = {f["batch_id"]: f["path"] for f in mine.files if f["batch_status"] == "cancelled"}
    assert cancelled, "the other copy cancelled nothing: the scenario did not happen"
    # It cancelled nothing itself: every batch cancelled at the provider is one of its own.
    assert {b["why"] for b in mine.other_batches} == {"other_copy"}
    assert {i for i, b in held.items() if b["status"] in ("cancelling", "cancelled")} == set(cancelled)
    report = doctor.check(tmp_path / "original")
    assert doctor.render_report(report) != "No problems found." and report.exit_code == 1
    (finding,) = [f for f in report.found if f.kind == doctor.CANCELLED_ELSEWHERE]
    assert set(finding.targets) == set(cancelled.values()) and finding.severity == "warning"
    assert f"{len(cancelled)} of its own cancelled by someone else" in mine.rendered
