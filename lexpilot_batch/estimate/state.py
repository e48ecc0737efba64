"""The state an estimate starts from: the workspace read in one snapshot, never written, and the
runs a dry run would add to it, as `runs.register_run` and `runs.add_threads` would add them.

The cases of those new runs stay in their dataset file: `State.groups` reads them again one at a
time, in case order, as the estimate reaches them, so that a dry run never holds the dataset.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.protocols.base import Answer, CaseContext
from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.data import Case, DatasetFile, stored_case
from lexpilot_batch.engine.compiler import case_requests
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.providers.bodies.request import RoleRequest
from lexpilot_batch.state.requests import RequestRow
from lexpilot_batch.state.states import RequestState, ThreadState
from lexpilot_batch.state.store import DB_NAME
from lexpilot_batch.state.waves import target_wave
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import (
    RunPlan,
    build_manifest,
    check_registration,
    role_requests,
    run_key,
    run_threads,
    selected_cases,
)


@contextlib.contextmanager
def open_readonly(root: Path | None, options: ProviderOptions) -> Iterator[tuple[Workspace | None, Session]]:
    """The workspace opened read-only (no lock, no writes), or None where there is none yet.

    Opening writable would create `state/`, the database and the lock, and record an id: a dry
    run must leave a folder exactly as it found it, so it needs this instead.
    """
    probe = Workspace(root, writable=False)
    if not (probe.state_dir / DB_NAME).is_file():
        yield None, Session(None, options)
        return
    with probe as ws:
        session = Session(ws, options)
        try:
            yield ws, session
        finally:
            session.close()


@contextlib.contextmanager
def snapshot(ws: Workspace | None) -> Iterator[None]:
    """Read the whole estimate from one database snapshot, even while a writer moves on.

    A deferred transaction that only reads, rolled back: it takes no write lock and writes nothing.
    """
    if ws is None or ws.store.conn.in_transaction:
        yield
        return
    ws.store.conn.execute("BEGIN")
    try:
        yield
    finally:
        ws.store.conn.execute("ROLLBACK")


@dataclass
class RunView:
    """A run as the estimate sees it: registered in the workspace (`pk`), or one a dry run would add."""

    run_id: str
    model: str
    key: str
    dataset: str
    settings: Settings
    templates: dict[str, str]
    speculate: bool
    requests: dict[str, RoleRequest]  # what each role's requests carry (`runs.role_requests`)
    pk: int | None = None  # None: not in the workspace
    manifest: dict | None = None  # None: not read from the workspace yet
    source: DatasetFile | None = None  # for new runs: the file their cases are read from

    @cached_property
    def templates_hash(self) -> str:
        return prompts.templates_hash(self.templates)

    @property
    def shape(self) -> tuple:
        """What a fresh (run, case) projection depends on besides the case."""
        return (self.dataset, self.templates_hash, self.speculate)


@dataclass
class Pending:
    """A request of the wave in flight: answered by the time the next wave is compiled, and still
    to be paid for (its prompt's characters, and the backend its file travels on)."""

    key: str
    role: str
    parser: str
    n_claims: int
    prompt_chars: int = 0
    backend: str = ""


@dataclass
class Group:
    """One (run, case) with its active threads and what the database knows of its steps."""

    run: RunView
    case_idx: int
    ctx: CaseContext
    threads: list[tuple[str, str]]
    answers: dict[str, Answer] = field(default_factory=dict)
    history: dict[str, list[RequestRow]] = field(default_factory=dict)
    in_flight: list[Pending] = field(default_factory=list)

    @property
    def fresh(self) -> bool:
        return not (self.answers or self.history or self.in_flight)


@dataclass
class State:
    ws: Workspace | None
    retries: int
    runs: dict[str, RunView] = field(default_factory=dict)  # by run key
    threads: dict[tuple[str, int], list[tuple[str, str]]] = field(default_factory=dict)  # active, by (key, idx)
    new_runs: set[str] = field(default_factory=set)
    latest_wave: int | None = None
    target: int | None = 1  # the wave the next compile writes into; None while one is in flight
    compiled: bool = False  # the target wave is compiled but not sent

    @classmethod
    def read(cls, ws: Workspace | None, retries: int) -> State:
        state = cls(ws, retries)
        if ws is None:
            return state
        db = ws.store.conn
        state.latest_wave = db.execute("SELECT MAX(n) FROM waves").fetchone()[0]
        state.target, state.compiled = target_wave(db)
        for r in db.execute("SELECT pk, run_id, model, key, dataset, manifest, templates, speculate FROM runs"):
            manifest = json.loads(r["manifest"])
            state.runs[r["key"]] = RunView(
                r["run_id"],
                r["model"],
                r["key"],
                r["dataset"],
                Settings(**manifest["settings"]),
                json.loads(r["templates"]),
                bool(r["speculate"]),
                role_requests(manifest),
                r["pk"],
            )
        by_pk = {run.pk: run for run in state.runs.values()}
        for t in db.execute(
            f"SELECT run_pk, case_idx, task, variant FROM threads WHERE status = '{ThreadState.ACTIVE}' ORDER BY pk"
        ):
            state.threads.setdefault((by_pk[t["run_pk"]].key, t["case_idx"]), []).append((t["task"], t["variant"]))
        return state

    def add_run(
        self,
        run_id: str,
        plan: RunPlan,
        dataset: DatasetFile,
        limit: int | None,
        templates: dict[str, str],
        speculate: bool,
        tasks: Sequence[str],
    ) -> None:
        """What `runs.register_run` and `runs.add_threads` would do, in memory only.

        `dataset` must have been opened for these tasks (`open_dataset(..., variants=...)`).
        """
        indices = selected_cases(len(dataset), limit)
        model = plan.model
        manifest = build_manifest(run_id, plan, dataset, indices, templates)
        key = run_key(run_id, model)
        run = self.runs.get(key)
        check_registration(
            run_id,
            plan,
            manifest,
            holder=None if run is None else (run.run_id, run.model),
            others=(self._manifest(r) for r in self.runs.values() if r is not run),
            old=None if run is None else self._manifest(run),
        )
        if run is None:
            run = RunView(
                run_id,
                model,
                key,
                dataset.sha256,
                plan.settings,
                dict(templates),
                speculate,
                dict(plan.requests),
                manifest=manifest,
                source=dataset,
            )
            self.runs[key] = run
            self.new_runs.add(key)
        run.speculate = speculate  # `register_run` records the flag of the latest prepare
        existing = self._existing_threads(run)
        shared: dict[tuple[str, str], tuple[str, str]] = {}  # cases have the same few threads: one tuple each
        for task, i, variant in run_threads(self._manifest(run), tasks, dataset.variants):
            if (task, i, variant) not in existing:
                existing.add((task, i, variant))
                thread = shared.setdefault((task, variant), (task, variant))
                self.threads.setdefault((key, i), []).append(thread)

    def _manifest(self, run: RunView) -> dict:
        """The run's manifest: as the workspace holds it, or as a dry run would register it."""
        if run.manifest is None:
            assert self.ws is not None
            row = self.ws.store.conn.execute("SELECT manifest FROM runs WHERE pk = ?", (run.pk,)).fetchone()
            run.manifest = json.loads(row["manifest"])
        return run.manifest

    def _existing_threads(self, run: RunView) -> set[tuple[str, int, str]]:
        """Every thread of the run, whatever its status, and those already added in memory."""
        out = {(task, i, variant) for (key, i), ts in self.threads.items() if key == run.key for task, variant in ts}
        if run.pk is not None and self.ws is not None:
            out |= {
                (r["task"], r["case_idx"], r["variant"])
                for r in self.ws.store.conn.execute(
                    "SELECT task, case_idx, variant FROM threads WHERE run_pk = ?", (run.pk,)
                )
            }
        return out

    def groups(self) -> Iterator[Group]:
        """Every (run, case) with an active thread, its answers and its requests in flight.

        In case order, so that the cases of new runs are read from their file one at a time. The
        file is read to its end after the last group: a file changed since `open_dataset` is
        refused there, as `prepare` refuses it.
        """
        db = self.ws.store.conn if self.ws is not None else None
        sent = _in_flight(db) if db is not None and self.target is None else {}
        groups = sorted(self.threads.items(), key=lambda kv: (kv[0][1], kv[0][0]))
        files: dict[str, _CaseFile] = {}
        for (key, idx), _ in reversed(groups):  # the last group of a file has its last case
            source = self.runs[key].source
            if source is not None and source.sha256 not in files:
                files[source.sha256] = _CaseFile(source, idx + 1)
        try:
            for (key, idx), threads in groups:
                run = self.runs[key]
                if run.pk is None:
                    case = files[run.dataset].case(idx)
                    yield Group(run, idx, CaseContext(case, run.templates, run.speculate), threads)
                    continue
                assert db is not None
                row = db.execute("SELECT data FROM cases WHERE dataset = ? AND idx = ?", (run.dataset, idx)).fetchone()
                ctx = CaseContext(stored_case(row["data"]), run.templates, run.speculate)
                group = Group(run, idx, ctx, threads)
                group.history, group.answers = case_requests(db, run.pk, idx)
                if self.target is None:  # a wave in flight: its pending requests are answered first
                    group.in_flight = [
                        Pending(r["step"], r["role"], r["parser"], r["n_claims"], *sent[r["pk"]])
                        for rows in group.history.values()
                        for r in rows
                        if r["status"] == RequestState.PENDING
                    ]
                yield group
            for file in files.values():
                file.finish()
        finally:
            for file in files.values():
                file.close()


def _in_flight(db: sqlite3.Connection) -> dict[int, tuple[int, str]]:
    """Each pending request's prompt characters and the backend its file travels on, by pk."""
    return {
        r[0]: (r[1], r[2])
        for r in db.execute(
            "SELECT q.pk, q.prompt_chars, f.backend FROM requests q JOIN files f ON f.pk = q.file_pk"
            " WHERE q.status = ?",
            (RequestState.PENDING,),
        )
    }


class _CaseFile:
    """The first `n` cases of a dataset file, read again one at a time, in file order.

    Only the case asked for last is held: asking for an earlier one is a bug.
    """

    def __init__(self, source: DatasetFile, n: int) -> None:
        self._source = source
        self._cases = source.read_cases(n)
        self._idx = -1
        self._case: Case | None = None

    def case(self, idx: int) -> Case:
        """The case at `idx`."""
        while self._idx < idx:
            self._case = next(self._cases)
            self._idx += 1
        assert self._idx == idx and self._case is not None, "cases are read in file order only"
        return self._case

    def finish(self) -> None:
        """Read the rest of the file: only at its end does `read_cases` know the file is unchanged."""
        for _ in self._cases:
            pass

    def close(self) -> None:
        self._cases.close()
