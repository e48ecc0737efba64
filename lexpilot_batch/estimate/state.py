"""The state an estimate starts from: the workspace read in one snapshot, never written, and the
runs a dry run would add to it, as `runs.register_run` and `runs.add_threads` would add them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from lexpilot_batch import prompts
from lexpilot_batch.compiler import case_requests, target_wave
from lexpilot_batch.config import Settings
from lexpilot_batch.data import Case, Dataset, stored_case
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.protocols import PROTOCOLS
from lexpilot_batch.protocols.base import Answer, CaseContext
from lexpilot_batch.providers.session import ProviderOptions, Session
from lexpilot_batch.runs import build_manifest, check_manifest, run_key
from lexpilot_batch.store import DB_NAME
from lexpilot_batch.workspace import Workspace


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
    run_id: str
    model: str
    key: str
    dataset: str
    settings: Settings
    templates: dict[str, str]
    speculate: bool
    pk: int | None = None  # None: not in the workspace
    cases: dict[int, tuple[Case, str]] = field(default_factory=dict)  # for new runs: idx -> (case, class)

    @cached_property
    def templates_hash(self) -> str:
        return prompts.templates_hash(self.templates)

    @property
    def shape(self) -> tuple:
        """What a fresh (run, case) projection depends on besides the case."""
        return (self.dataset, self.templates_hash, self.speculate)


@dataclass
class Pending:
    """A request of the wave in flight: answered by the time the next wave is compiled."""

    key: str
    role: str
    parser: str
    n_claims: int


@dataclass
class Group:
    """One (run, case) with its active threads and what the database knows of its steps."""

    run: RunView
    case_idx: int
    ctx: CaseContext
    threads: list[tuple[str, str]]
    answers: dict[str, Answer] = field(default_factory=dict)
    history: dict[str, list] = field(default_factory=dict)
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
            state.runs[r["key"]] = RunView(
                r["run_id"],
                r["model"],
                r["key"],
                r["dataset"],
                Settings(**json.loads(r["manifest"])["settings"]),
                json.loads(r["templates"]),
                bool(r["speculate"]),
                r["pk"],
            )
        by_pk = {run.pk: run for run in state.runs.values()}
        for t in db.execute("SELECT run_pk, case_idx, task, variant FROM threads WHERE status = 'active' ORDER BY pk"):
            state.threads.setdefault((by_pk[t["run_pk"]].key, t["case_idx"]), []).append((t["task"], t["variant"]))
        return state

    def add_run(
        self,
        run_id: str,
        model: str,
        settings: Settings,
        dataset: Dataset,
        limit: int | None,
        templates: dict[str, str],
        speculate: bool,
        tasks: Sequence[str],
        session: Session,
    ) -> None:
        """What `runs.register_run` and `runs.add_threads` would do, in memory only."""
        key = run_key(run_id, model)
        indices = list(range(len(dataset.cases)))[: limit or None]
        run = self.runs.get(key)
        if run is not None and (run.run_id, run.model) != (run_id, model):
            raise ConfigError(f"run {run_id!r} collides with run {run.run_id!r}; choose another --run-id")
        if run is not None and run.pk is not None:
            self._check_manifest(run, settings, dataset, indices, templates, session)
            indices = indices[: len(self._manifest(run)["case_ids"])]
        elif run is None:
            run = RunView(run_id, model, key, dataset.sha256, settings, dict(templates), speculate)
            run.cases = {i: (dataset.cases[i], dataset.class_of(dataset.cases[i])) for i in indices}
            self.runs[key] = run
            self.new_runs.add(key)
        run.speculate = speculate  # `register_run` records the flag of the latest prepare
        existing = self._existing_threads(run)
        for task in tasks:
            protocol = PROTOCOLS[task]
            for i in indices:
                for variant in protocol.variants(dataset.cases[i]):
                    if (task, i, variant) not in existing:
                        existing.add((task, i, variant))
                        self.threads.setdefault((key, i), []).append((task, variant))

    def _manifest(self, run: RunView) -> dict:
        assert self.ws is not None
        row = self.ws.store.conn.execute("SELECT manifest FROM runs WHERE pk = ?", (run.pk,)).fetchone()
        return json.loads(row["manifest"])

    def _check_manifest(
        self,
        run: RunView,
        settings: Settings,
        dataset: Dataset,
        indices: list[int],
        templates: dict[str, str],
        session: Session,
    ) -> None:
        new = build_manifest(run.run_id, run.model, settings, dataset, indices, templates, session.endpoint_labels)
        check_manifest(self._manifest(run), new, run.run_id, run.model)

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
        """Every (run, case) with an active thread, its answers and its requests in flight."""
        db = self.ws.store.conn if self.ws is not None else None
        for (key, idx), threads in sorted(self.threads.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            run = self.runs[key]
            if run.pk is None:
                case, cause_class = run.cases[idx]
                yield Group(run, idx, CaseContext(case, cause_class, run.templates, run.speculate), threads)
                continue
            assert db is not None
            row = db.execute(
                "SELECT data, cause_class FROM cases WHERE dataset = ? AND idx = ?", (run.dataset, idx)
            ).fetchone()
            ctx = CaseContext(stored_case(row["data"]), row["cause_class"], run.templates, run.speculate)
            group = Group(run, idx, ctx, threads)
            group.history, group.answers = case_requests(db, run.pk, idx)
            if self.target is None:  # a wave in flight: its pending requests are answered first
                group.in_flight = [
                    Pending(r["step"], r["role"], r["parser"], r["n_claims"])
                    for rows in group.history.values()
                    for r in rows
                    if r["status"] == "pending"
                ]
            yield group
