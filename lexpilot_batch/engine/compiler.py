"""Advancing threads and compiling every due request of the workspace into one wave of files.

A wave's requests are grouped by (backend, endpoint, model) across all runs and tasks, so each
wave makes one batch per model (more only when a provider's per-file limits force shards). Where
each (role, model) goes is its route (`providers.routing.routes`); what its requests carry, the run's
manifest says (`runs.role_requests`). Compiling is
deterministic: the same database state always yields the same files, byte for byte. That makes
a wave that was compiled but not yet submitted safe to compile again — after a crash, or when
`prepare` adds a run — by discarding it and redoing it from the database.

Files are written before the transaction that records them commits; a crash in between leaves
files that no row describes, and the next compile rewrites them from the same state.

What is due for a case is decided in `due`; a request's bytes in `providers.lines`; its file in
`request_files`; which wave to compile into, and the discarding of an unsent one, in `waves`.

Compiling needs routes, never keys: `compile_wave` takes `route(role, model, provider)`, which a
`engine.session.Session` provides.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from typing import Any

from lexpilot_batch.benchmark import records
from lexpilot_batch.benchmark.protocols import PROTOCOLS
from lexpilot_batch.benchmark.protocols.base import Answer, CaseContext, Step
from lexpilot_batch.benchmark.settings import ROLES, Settings
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.data import Case, stored_case
from lexpilot_batch.engine.budgets import request_tokens
from lexpilot_batch.engine.due import due_for_case
from lexpilot_batch.engine.request_files import WaveWriter
from lexpilot_batch.engine.settled import Settled, View
from lexpilot_batch.engine.tail import TailPolicy
from lexpilot_batch.providers.bodies.request import RoleRequest
from lexpilot_batch.providers.ids import custom_id, request_check
from lexpilot_batch.providers.lines import line_fingerprint, line_head
from lexpilot_batch.providers.routing.routes import Route
from lexpilot_batch.state.requests import REQUEST_COLUMNS, NewRequest, RequestRow, discard_unneeded, insert_pending
from lexpilot_batch.state.states import RequestState, ThreadState
from lexpilot_batch.state.threads import Finished, finish_threads
from lexpilot_batch.state.waves import discard_unsent_wave, drop_empty_wave, open_wave, target_wave
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import role_requests
from lexpilot_batch.util import collector
from lexpilot_batch.util.fileio import unlink_quietly
from lexpilot_batch.util.progress import Bar


@dataclass
class CompileResult:
    wave: int | None = None
    requests: int = 0
    files: list[str] = field(default_factory=list)
    done: int = 0
    failed: int = 0
    in_flight: bool = False
    manual_files: list[str] = field(default_factory=list)  # for the user to run (manual backend)
    tail_sync_files: list[str] = field(default_factory=list)  # groups sent at once, through sync or flex (`tail`)

    @property
    def compiled(self) -> bool:
        return self.wave is not None and self.requests > 0


# Where a (role, registered model, provider key) goes: `engine.session.Session.route`.
RouteFor = Callable[[str, str, str | None], Route]


@dataclass(frozen=True)
class RunContext:
    pk: int
    key: str
    model: str
    dataset: str
    settings: Settings
    templates: dict[str, str]
    speculate: bool
    retries: int
    requests: dict[str, RoleRequest]  # what each role's requests carry (`runs.role_requests`)
    routes: dict[str, Route]  # where each role's requests go


def _run_contexts(db: sqlite3.Connection, retries: int, route: RouteFor) -> dict[int, RunContext]:
    out = {}
    for r in db.execute("SELECT pk, key, model, dataset, manifest, templates, speculate FROM runs"):
        manifest = json.loads(r["manifest"])
        settings = Settings(**manifest["settings"])
        requests = role_requests(manifest)
        out[r["pk"]] = RunContext(
            r["pk"],
            r["key"],
            r["model"],
            r["dataset"],
            settings,
            json.loads(r["templates"]),
            bool(r["speculate"]),
            retries,
            requests,
            {role: route(role, settings.model_for(role, r["model"]), requests[role].provider) for role in ROLES},
        )
    return out


def _load_case_factory(db: sqlite3.Connection, view: View) -> Callable[[str, int], Case]:
    @lru_cache(maxsize=256)
    def load(dataset: str, idx: int) -> Case:
        case = view.case((dataset, idx))
        if case is None:
            row = db.execute("SELECT data FROM cases WHERE dataset = ? AND idx = ?", (dataset, idx)).fetchone()
            case = stored_case(row["data"])
            view.add_case((dataset, idx), case)
        return case

    return load


def compile_wave(
    ws: Workspace,
    route: RouteFor,
    retries: int = 3,
    tail: TailPolicy | int = 0,
    settled: Settled | None = None,
) -> CompileResult:
    """Advance every active thread and write all due requests into the open wave, atomically.

    How each group travels is `tail`'s (`engine.tail`: `--tail-sync N` as a number, or a policy).
    `settled` is what the process's earlier compiles read (`engine.settled`): given, this compile
    reads only what changed since and keeps what the next needs.
    """
    result = CompileResult()
    with collector.paused(), ws.store.transaction() as db:
        wave, existing = target_wave(db)
        if wave is None:
            result.in_flight = True
            return result
        stale = discard_unsent_wave(db, wave) if existing else []
        open_wave(db, wave)
        view = settled.open(db) if settled is not None else View({}, {})
        writer = WaveWriter(ws, db, wave, tail, settled.pieces if settled is not None else None)
        try:
            _advance_all(ws, db, writer, _run_contexts(db, retries, route), result, view)
            written = writer.close()
        except BaseException:
            writer.abort()
            raise
        if settled is not None:
            view.close(db)
        for rel in stale:
            if rel not in written:
                unlink_quietly(ws.path(rel))  # (held open on Windows: left, and no row names it)
        if not written:
            drop_empty_wave(db, wave)
        else:
            result.wave = wave
            result.files = written
            result.manual_files = writer.manual
            result.tail_sync_files = writer.tail_synced
    if settled is not None:
        settled.install(view, ws.store.conn)
    return result


# Active (run, case) groups are read this many cases at a time: two queries per run and block
# instead of two per group, and new rows are written only for cases already read.
BLOCK_CASES = 64


def _advance_all(
    ws: Workspace,
    db: sqlite3.Connection,
    writer: WaveWriter,
    runs: dict[int, RunContext],
    result: CompileResult,
    view: View,
) -> None:
    load_case = _load_case_factory(db, view)
    # Threads `lexpilot-batch retry` made due again: their attempts count from a later wave.
    fresh_after = dict(
        db.execute(
            f"SELECT pk, fresh_after FROM threads WHERE status = '{ThreadState.ACTIVE}' AND fresh_after > 0"
        ).fetchall()
    )
    n_groups = db.execute(
        f"SELECT COUNT(*) FROM (SELECT DISTINCT run_pk, case_idx FROM threads WHERE status = '{ThreadState.ACTIVE}')"
    ).fetchone()[0]
    # disable=None: a bar on a terminal (large waves take a while), silence in logs and pipes.
    bar = Bar(total=n_groups, desc=f"compiling wave {writer.wave}", unit="case", disable=None, leave=False)
    new_requests: list[NewRequest] = []
    thread_updates: list[Finished] = []
    discards: list[tuple[int, int, str]] = []
    try:
        # Case-major order keeps each case's parsed data hot in the cache across runs.
        for (case_idx, run_pk), threads, rows, read, built in _active_groups(db, view):
            run = runs[run_pk]
            case = load_case(run.dataset, case_idx)
            ctx = CaseContext(case, run.templates, run.speculate)
            if built is None:
                history, answers = _by_step(rows)
            else:  # what was built of the held rows, extended by the rows read since
                (history, answers), held = built
                _by_step(islice(rows, held, None), history, answers)
            due = due_for_case(ctx, threads, answers, history, run.retries, fresh_after)
            discards.extend((run.pk, case_idx, key) for key in due.unused)
            for (pk, task, _), record in due.finished:
                stored = json.dumps(records.compact(record, case), ensure_ascii=False)
                score = json.dumps(TASKS[task].scored(record), ensure_ascii=False)
                thread_updates.append((ThreadState.DONE, stored, score, None, pk))
            for (pk, _, _), reason in due.failed:
                thread_updates.append((ThreadState.FAILED, None, None, reason, pk))
            if due.active:
                view.keep((case_idx, run_pk), read, rows, (history, answers))
            result.done += len(due.finished)
            result.failed += len(due.failed)
            for step in due.steps:
                new_requests.append(_request(run, case_idx, step, history.get(step.key, []), writer))
            result.requests += len(due.steps)
            if len(new_requests) >= 5000:
                _flush(db, new_requests)
            if len(thread_updates) >= 500:
                _finish_threads(db, thread_updates)
            bar.update()
    finally:
        bar.close()
    _flush(db, new_requests)
    _finish_threads(db, thread_updates)
    discard_unneeded(db, discards)


def _active_groups(
    db: sqlite3.Connection, view: View
) -> Iterator[tuple[tuple[int, int], list[tuple[int, str, str]], list, frozenset[str], Any]]:
    """Every (case, run) with an active thread, in case-major order: its active threads
    `(pk, task, variant)`, all its requests, each step's oldest attempt first, the step prefixes
    they were read for, and, for a group `view` held, `(built, n)`: what the last compile built
    of the first n of those rows (`_by_step`), or None.

    Only the steps the active threads read (`Protocol.reads`) are loaded: in the last waves only
    Interaction LJP threads are left, and they need a fraction of their case's requests. A group
    `view` holds is read only at and above its boundary (`engine.settled`). A block's rows are read
    in full before its groups are advanced, so the caller's inserts and updates (for cases of this
    block) never meet an open cursor.
    """
    cases = [
        r[0]
        for r in db.execute(
            f"SELECT DISTINCT case_idx FROM threads WHERE status = '{ThreadState.ACTIVE}' ORDER BY case_idx"
        )
    ]
    run_pks = [
        r[0]
        for r in db.execute(
            f"SELECT DISTINCT run_pk FROM threads WHERE status = '{ThreadState.ACTIVE}' ORDER BY run_pk"
        )
    ]
    for start in range(0, len(cases), BLOCK_CASES):
        low, high = cases[start], cases[min(start + BLOCK_CASES, len(cases)) - 1]
        threads: dict[tuple[int, int], list[tuple[int, str, str]]] = defaultdict(list)
        requests: dict[tuple[int, int], list] = defaultdict(list)
        built: dict[tuple[int, int], Any] = {}
        reads: dict[int, frozenset[str]] = {}
        for run_pk in run_pks:
            prefixes: set[str] = set()
            for t in db.execute(
                "SELECT case_idx, pk, task, variant FROM threads"
                f" WHERE status = '{ThreadState.ACTIVE}' AND run_pk = ? AND case_idx BETWEEN ? AND ? ORDER BY case_idx, pk",
                (run_pk, low, high),
            ):
                threads[(t[0], run_pk)].append((t[1], t[2], t[3]))
                prefixes.update(PROTOCOLS[t[2]].reads(t[3]))
            if not prefixes:
                continue
            read = frozenset(prefixes)
            reads[run_pk] = read
            where = " OR ".join(["substr(step, 1, ?) = ?"] * len(prefixes))
            params: list[Any] = [run_pk, low, high, *(x for p in sorted(prefixes) for x in (len(p), p))]
            if view.boundary is not None:
                missing = []
                for key in threads:
                    if key[1] == run_pk:
                        held = view.take(key, read)
                        if held is None:
                            missing.append(key[0])
                        else:
                            requests[key] = held[0]  # (no longer held: this compile's to extend)
                            if held[1] is not None:
                                built[key] = (held[1], len(held[0]))
                marks = ", ".join("?" * len(missing))
                where = f"({where}) AND (pk >= ? OR case_idx IN ({marks}))"
                params += [view.boundary, *missing]
            # In the order of the UNIQUE (run_pk, case_idx, step, attempt) index: SQLite never sorts them.
            for r in db.execute(
                f"SELECT {REQUEST_COLUMNS} FROM requests"
                f" WHERE run_pk = ? AND case_idx BETWEEN ? AND ? AND ({where}) ORDER BY case_idx, step, attempt",
                params,
            ):
                key = (r[0], run_pk)
                if key in threads:
                    requests[key].append(r)
        for key in sorted(threads):
            yield key, threads[key], requests.get(key, []), reads.get(key[1], frozenset()), built.get(key)


def case_requests(
    db: sqlite3.Connection, run_pk: int, case_idx: int
) -> tuple[dict[str, list[RequestRow]], dict[str, Answer]]:
    """Every request of one (run, case) by step, oldest attempt first, and the answers so far."""
    return _by_step(
        db.execute(
            f"SELECT {REQUEST_COLUMNS} FROM requests WHERE run_pk = ? AND case_idx = ? ORDER BY step, attempt",
            (run_pk, case_idx),
        )
    )


def _by_step(
    rows: Iterable[Any],
    history: dict[str, list[RequestRow]] | None = None,
    answers: dict[str, Answer] | None = None,
) -> tuple[dict[str, list[RequestRow]], dict[str, Answer]]:
    """Each step's attempts, oldest first, and each step's answer: of `rows`, or (given the two
    built of earlier rows, the next attempts of whose steps `rows` holds) both extended in place."""
    history = defaultdict(list) if history is None else history
    answers = {} if answers is None else answers
    for r in rows:
        # By position (`REQUEST_COLUMNS`): every answer of every active case, every wave.
        step, status = r[1], r[3]
        history[step].append(r)
        if status == RequestState.ANSWERED or status == RequestState.DISCARDED:
            # A text step's value is its text (answers.parse_answer): not decoded again.
            text = r[4]
            answers[step] = Answer(text, text if r[9] == "text" else json.loads(r[5]))
    return history, answers


def _request(run: RunContext, case_idx: int, step: Step, attempts: list[RequestRow], writer: WaveWriter) -> NewRequest:
    attempt = max((a["attempt"] for a in attempts), default=0) + 1
    sent, route = run.requests[step.role], run.routes[step.role]
    # The cache layout is the run's, per case and template (`providers.cache_layout`).
    body, fingerprint = line_fingerprint(
        sent.model, step.prompt, sent.fields, route.limits.endpoint, writer.pieces, route.api, sent.cache, str(case_idx)
    )
    # The id vouches for the request: its workspace and its body (`ids.request_check`).
    cid = custom_id(run.key, case_idx, step.key, attempt, request_check(writer.id_tag, fingerprint))
    line = line_head(cid, route.api, writer.id_tag) + body
    file_pk = writer.add(route, line, request_tokens(len(step.prompt)))
    model = route.model
    return (
        cid,
        run.pk,
        case_idx,
        step.key,
        attempt,
        step.role,
        model,
        step.parser,
        step.n_claims,
        writer.wave,
        file_pk,
        len(step.prompt),
    )


def _finish_threads(db: sqlite3.Connection, rows: list[Finished]) -> None:
    # Finished records carry whole histories: written in chunks, a wave that finishes every
    # thread of a 20x dataset would otherwise hold gigabytes of them until its end.
    finish_threads(db, rows)
    rows.clear()


def _flush(db: sqlite3.Connection, rows: list[NewRequest]) -> None:
    insert_pending(db, rows)
    rows.clear()
