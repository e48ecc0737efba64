"""Advancing threads and compiling every due request of the workspace into one wave of files.

A wave's requests are grouped by (endpoint, model) across all runs and tasks, so each wave makes
one batch per model (more only when a provider's per-file limits force shards). Compiling is
deterministic: the same database state always yields the same files, byte for byte. That makes
a wave that was compiled but not yet submitted safe to compile again — after a crash, or when
`prepare` adds a run — by discarding it and redoing it from the database.

Files are written before the transaction that records them commits; a crash in between leaves
files that no row describes, and the next compile rewrites them from the same state.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from lexpilot_batch import records
from lexpilot_batch.config import Endpoint, Limits, Settings
from lexpilot_batch.data import Case, stored_case
from lexpilot_batch.prompts import Prompt
from lexpilot_batch.protocols import PROTOCOLS
from lexpilot_batch.protocols.base import Advance, Answer, CaseContext, Protocol, Step
from lexpilot_batch.tasks import TASKS
from lexpilot_batch.workspace import Workspace, slug

# Malformed or truncated content gets this many attempts whatever --retries says (SPEC §6).
INVALID_ATTEMPTS = 3
# Requests a batch never ran (expired, cancelled, enqueued-token limit) are not failures of theirs
# and do not use up --retries; this bound only stops a provider that never runs them from looping.
UNEXECUTED_ATTEMPTS = 10


@dataclass
class CompileResult:
    wave: int | None = None
    requests: int = 0
    files: list[str] = field(default_factory=list)
    done: int = 0
    failed: int = 0
    in_flight: bool = False
    manual_files: list[str] = field(default_factory=list)  # for the user to run (manual backend)

    @property
    def compiled(self) -> bool:
        return self.wave is not None and self.requests > 0


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


def custom_id(run_key: str, case_idx: int, step: str, attempt: int) -> str:
    """Short, ASCII, unique in the workspace: run, case, step (task and variant inside) and attempt."""
    return f"{run_key}-{case_idx}-{step}-{attempt}"


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class Pieces(dict[str, bytes]):
    """Prompt pieces (`prompts.Prompt.parts`) JSON-escaped and UTF-8 encoded, each once.

    Emptied when it holds `limit` bytes: the compiler goes case by case, so what it needs again is
    the current case's messages and the templates' literal text.
    """

    def __init__(self, limit: int = 8 << 20) -> None:
        super().__init__()
        self.limit, self.size = limit, 0

    def __missing__(self, piece: str) -> bytes:
        encoded = _JSON.encode(piece)[1:-1].encode("utf-8")
        if self.size + len(encoded) > self.limit:
            self.clear()
            self.size = 0
        self[piece] = encoded
        self.size += len(encoded)
        return encoded


_START, _CONTENT = '{"custom_id":""', '"content":""'


@lru_cache(maxsize=256)
def _line_frame(model: str, url: str, temperature: float, max_tokens: int) -> tuple[bytes, bytes]:
    """A request line's bytes after its custom_id up to its prompt, and after its prompt."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": ""}],
        "temperature": temperature,
        "max_tokens": max_tokens,
        "n": 1,
    }
    line = {"custom_id": "", "method": "POST", "url": url, "body": body}
    # Every quote inside a JSON string is escaped: the one unescaped `"content":""` is the slot.
    head, _, tail = json.dumps(line, ensure_ascii=False, separators=(",", ":")).partition(_CONTENT)
    return (head[len(_START) :] + '"content":"').encode("utf-8"), f'"{tail}\n'.encode()


def request_line(
    cid: str, model: str, prompt: str, settings: Settings, role: str, url: str, pieces: Pieces | None = None
) -> bytes:
    """One batch input line, byte for byte `json.dumps` of it (compact, UTF-8, newline-ended).

    The prompt is encoded piece by piece through `pieces`, which a caller keeps across the prompts
    of a case: most of their text is the same messages.
    """
    middle, end = _line_frame(model, url, settings.temperature_for(role), settings.max_tokens)
    pieces = Pieces() if pieces is None else pieces
    parts = prompt.parts if isinstance(prompt, Prompt) else (prompt,)
    start = '{"custom_id":' + _JSON.encode(cid)
    return b"".join((start.encode("utf-8"), middle, *[pieces[part] for part in parts], end))


class _Sink:
    """One request file being written. Lines are gathered into chunks that a background thread
    hashes and writes (both release the GIL) while the compiler builds the next lines; at most one
    chunk per file is in flight, and `finish` returns only once everything is on disk."""

    CHUNK = 1 << 20

    def __init__(self, path: Path, pool: ThreadPoolExecutor) -> None:
        self.fh: IO[bytes] = open(path, "wb")  # noqa: SIM115 - closed by finish() or discard()
        self.hash = hashlib.sha256()
        self.pool = pool
        self.buffer: list[bytes] = []
        self.size = 0
        self.pending: Future[None] | None = None

    def write(self, line: bytes) -> None:
        self.buffer.append(line)
        self.size += len(line)
        if self.size >= self.CHUNK:
            self._send()

    def _send(self) -> None:
        chunk = b"".join(self.buffer)
        self.buffer.clear()
        self.size = 0
        if self.pending is not None:
            self.pending.result()  # raises what the thread raised
        self.pending = self.pool.submit(self._store, chunk)

    def _store(self, chunk: bytes) -> None:
        self.hash.update(chunk)
        self.fh.write(chunk)

    def finish(self) -> str:
        """Write what is left, close the file, and return its SHA-256."""
        if self.buffer:
            self._send()
        if self.pending is not None:
            self.pending.result()
        self.fh.close()
        return self.hash.hexdigest()

    def discard(self) -> None:
        if self.pending is not None:
            wait([self.pending])
        self.fh.close()


class _WaveWriter:
    """Streams request lines into per-(endpoint, model) shard files, within provider limits."""

    def __init__(self, ws: Workspace, db: Any, wave: int, limits: dict[str, Limits]) -> None:
        self.ws, self.db, self.wave, self.limits = ws, db, wave, limits
        self.dir = ws.wave_dir("requests", wave)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.open: dict[tuple[str, str, str], dict] = {}
        self.shards: dict[tuple[str, str, str], int] = defaultdict(int)
        self.written: list[str] = []
        self.manual: list[str] = []
        self.pieces = Pieces()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="request-files")

    def add(self, endpoint: Endpoint, model: str, role: str, line: bytes) -> int:
        group = (endpoint.backend, endpoint.base_url, model)
        limits = self.limits[role]
        current = self.open.get(group)
        if current is not None and (
            current["n"] >= limits.max_requests or current["bytes"] + len(line) > limits.max_bytes
        ):
            self._close(group)
            current = None
        if current is None:
            current = self._start(group, endpoint)
        current["sink"].write(line)
        current["n"] += 1
        current["bytes"] += len(line)
        current["roles"].add(role)
        return current["pk"]

    def _start(self, group: tuple[str, str, str], endpoint: Endpoint) -> dict:
        shard = self.shards[group]
        self.shards[group] += 1
        tmp = self.dir / f".building-{slug('|'.join(group), 12)}-{shard:03d}.jsonl"
        cur = self.db.execute(
            "INSERT INTO files (wave, path, roles, model, endpoint, backend, shard, n_requests, bytes, sha256, status)"
            " VALUES (?, ?, '', ?, ?, ?, ?, 0, 0, '', 'compiled')",
            (self.wave, self.ws.relative(tmp), group[2], endpoint.base_url, endpoint.backend, shard),
        )
        entry = {
            "pk": cur.lastrowid,
            "sink": _Sink(tmp, self.pool),
            "tmp": tmp,
            "n": 0,
            "bytes": 0,
            "roles": set(),
            "shard": shard,
            "model": group[2],
            "backend": group[0],
        }
        self.open[group] = entry
        return entry

    def _close(self, group: tuple[str, str, str]) -> None:
        entry = self.open.pop(group)
        sha256 = entry["sink"].finish()
        roles = "+".join(sorted(entry["roles"]))
        final = self.dir / f"{roles}__{slug(entry['model'])}__{entry['shard']:03d}.jsonl"
        Path(entry["tmp"]).replace(final)
        rel = self.ws.relative(final)
        self.db.execute(
            "UPDATE files SET path = ?, roles = ?, n_requests = ?, bytes = ?, sha256 = ? WHERE pk = ?",
            (rel, roles, entry["n"], entry["bytes"], sha256, entry["pk"]),
        )
        self.written.append(rel)
        if entry["backend"] == "manual":
            self.manual.append(rel)

    def close(self) -> list[str]:
        for group in list(self.open):
            self._close(group)
        self.pool.shutdown()
        return self.written

    def abort(self) -> None:
        for entry in self.open.values():
            entry["sink"].discard()
            Path(entry["tmp"]).unlink(missing_ok=True)
        self.open.clear()
        self.pool.shutdown()


def _run_contexts(db: Any, retries: int) -> dict[int, RunContext]:
    out = {}
    for r in db.execute("SELECT pk, key, model, dataset, manifest, templates, speculate FROM runs"):
        manifest = json.loads(r["manifest"])
        out[r["pk"]] = RunContext(
            r["pk"],
            r["key"],
            r["model"],
            r["dataset"],
            Settings(**manifest["settings"]),
            json.loads(r["templates"]),
            bool(r["speculate"]),
            retries,
        )
    return out


def _load_case_factory(db: Any):
    @lru_cache(maxsize=256)
    def load(dataset: str, idx: int) -> tuple[Case, str]:
        row = db.execute("SELECT data, cause_class FROM cases WHERE dataset = ? AND idx = ?", (dataset, idx)).fetchone()
        return stored_case(row["data"]), row["cause_class"]

    return load


def target_wave(db: Any) -> tuple[int | None, bool]:
    """The wave to compile into and whether it exists already; None while a wave is under way.

    The latest wave may be compiled again only while none of its files has left the workspace.
    """
    latest = db.execute("SELECT n, closed_at FROM waves ORDER BY n DESC LIMIT 1").fetchone()
    if latest is None:
        return 1, False
    if latest["closed_at"] is not None:
        return latest["n"] + 1, False
    started = (
        db.execute("SELECT 1 FROM files WHERE wave = ? AND status != 'compiled' LIMIT 1", (latest["n"],)).fetchone()
        or db.execute(  # a manual ingest may answer requests of a file never submitted
            "SELECT 1 FROM requests WHERE wave = ? AND status != 'pending' LIMIT 1", (latest["n"],)
        ).fetchone()
    )
    if started:
        return None, False
    return latest["n"], True


def compile_wave(
    ws: Workspace,
    endpoints: dict[str, Endpoint],
    limits: dict[str, Limits],
    retries: int = 3,
) -> CompileResult:
    """Advance every active thread and write all due requests into the open wave, atomically."""
    result = CompileResult()
    with ws.store.transaction() as db:
        wave, existing = target_wave(db)
        if wave is None:
            result.in_flight = True
            return result
        if existing:
            stale = [r["path"] for r in db.execute("SELECT path FROM files WHERE wave = ?", (wave,))]
            db.execute("DELETE FROM requests WHERE wave = ?", (wave,))
            db.execute("DELETE FROM files WHERE wave = ?", (wave,))
        else:
            stale = []
            db.execute("INSERT INTO waves (n, compiled_at) VALUES (?, ?)", (wave, time.time()))
        writer = _WaveWriter(ws, db, wave, limits)
        try:
            _advance_all(ws, db, writer, endpoints, _run_contexts(db, retries), result)
            written = writer.close()
        except BaseException:
            writer.abort()
            raise
        for rel in stale:
            if rel not in written:
                ws.path(rel).unlink(missing_ok=True)
        if not written:
            db.execute("DELETE FROM waves WHERE n = ?", (wave,))
        else:
            result.wave = wave
            result.files = written
            result.manual_files = writer.manual
    return result


# Active (run, case) groups are read this many cases at a time: two queries per run and block
# instead of two per group, and new rows are written only for cases already read.
BLOCK_CASES = 64

# A text step's value is its text (ingest.parse_answer): not read twice. Rows are read in the order
# of the UNIQUE (run_pk, case_idx, step, attempt) index, so SQLite never sorts them.
_REQUEST_COLUMNS = (
    "case_idx, step, attempt, status, text, CASE parser WHEN 'text' THEN NULL ELSE value END AS value,"
    " error, error_kind, role, parser, n_claims, wave"
)


def _advance_all(
    ws: Workspace,
    db: Any,
    writer: _WaveWriter,
    endpoints: dict[str, Endpoint],
    runs: dict[int, RunContext],
    result: CompileResult,
) -> None:
    load_case = _load_case_factory(db)
    n_groups = db.execute(
        "SELECT COUNT(*) FROM (SELECT DISTINCT run_pk, case_idx FROM threads WHERE status = 'active')"
    ).fetchone()[0]
    # disable=None: a bar on a terminal (large waves take a while), silence in logs and pipes.
    bar = tqdm(total=n_groups, desc=f"compiling wave {writer.wave}", unit="case", disable=None, leave=False)
    new_requests: list[tuple] = []
    thread_updates: list[tuple] = []
    discards: list[tuple] = []
    try:
        # Case-major order keeps each case's parsed data hot in the cache across runs.
        for (case_idx, run_pk), threads, rows in _active_groups(db):
            run = runs[run_pk]
            case, cause_class = load_case(run.dataset, case_idx)
            ctx = CaseContext(case, cause_class, run.templates, run.speculate)
            history, answers = _by_step(rows)
            due = due_for_case(ctx, threads, answers, history, run.retries)
            discards.extend((run.pk, case_idx, key) for key in due.unused)
            for (pk, task, _), record in due.finished:
                stored = json.dumps(records.compact(record, case), ensure_ascii=False)
                score = json.dumps(TASKS[task].scored(record), ensure_ascii=False)
                thread_updates.append(("done", stored, score, None, pk))
            for (pk, _, _), reason in due.failed:
                thread_updates.append(("failed", None, None, reason, pk))
            result.done += len(due.finished)
            result.failed += len(due.failed)
            for step in due.steps:
                new_requests.append(_request(run, case_idx, step, history.get(step.key, []), writer, endpoints))
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
    db.executemany(
        "UPDATE requests SET status = 'discarded' WHERE run_pk = ? AND case_idx = ? AND step = ? AND status = 'answered'",
        discards,
    )


def _active_groups(db: Any) -> Iterator[tuple[tuple[int, int], list[tuple[int, str, str]], list]]:
    """Every (case, run) with an active thread, in case-major order: its active threads
    `(pk, task, variant)` and all its requests, oldest attempt first.

    Only the steps the active threads read (`Protocol.reads`) are loaded: in the last waves only
    Interaction LJP threads are left, and they need a fraction of their case's requests. A block's
    rows are read in full before its groups are advanced, so the caller's inserts and updates (for
    cases of this block) never meet an open cursor.
    """
    cases = [
        r[0] for r in db.execute("SELECT DISTINCT case_idx FROM threads WHERE status = 'active' ORDER BY case_idx")
    ]
    run_pks = [r[0] for r in db.execute("SELECT DISTINCT run_pk FROM threads WHERE status = 'active' ORDER BY run_pk")]
    for start in range(0, len(cases), BLOCK_CASES):
        low, high = cases[start], cases[min(start + BLOCK_CASES, len(cases)) - 1]
        threads: dict[tuple[int, int], list[tuple[int, str, str]]] = defaultdict(list)
        requests: dict[tuple[int, int], list] = defaultdict(list)
        for run_pk in run_pks:
            prefixes: set[str] = set()
            for t in db.execute(
                "SELECT case_idx, pk, task, variant FROM threads"
                " WHERE status = 'active' AND run_pk = ? AND case_idx BETWEEN ? AND ? ORDER BY case_idx, pk",
                (run_pk, low, high),
            ):
                threads[(t[0], run_pk)].append((t[1], t[2], t[3]))
                prefixes.update(PROTOCOLS[t[2]].reads(t[3]))
            if not prefixes:
                continue
            read = " OR ".join(["substr(step, 1, ?) = ?"] * len(prefixes))
            for r in db.execute(
                f"SELECT {_REQUEST_COLUMNS} FROM requests"
                f" WHERE run_pk = ? AND case_idx BETWEEN ? AND ? AND ({read}) ORDER BY case_idx, step, attempt",
                (run_pk, low, high, *(x for p in sorted(prefixes) for x in (len(p), p))),
            ):
                key = (r[0], run_pk)
                if key in threads:
                    requests[key].append(r)
        for key in sorted(threads):
            yield key, threads[key], requests.get(key, [])


def case_requests(db: Any, run_pk: int, case_idx: int) -> tuple[dict[str, list], dict[str, Answer]]:
    """Every request of one (run, case) by step, oldest attempt first, and the answers so far."""
    return _by_step(
        db.execute(
            f"SELECT {_REQUEST_COLUMNS} FROM requests WHERE run_pk = ? AND case_idx = ? ORDER BY step, attempt",
            (run_pk, case_idx),
        )
    )


def _by_step(rows: Iterable[Any]) -> tuple[dict[str, list], dict[str, Answer]]:
    history: dict[str, list] = defaultdict(list)
    answers: dict[str, Answer] = {}
    for r in rows:
        # By position (`_REQUEST_COLUMNS`): every answer of every active case, every wave.
        step, status = r[1], r[3]
        history[step].append(r)
        if status == "answered" or status == "discarded":
            # A text step's value is its text (ingest.parse_answer): not decoded again.
            text = r[4]
            answers[step] = Answer(text, text if r[9] == "text" else json.loads(r[5]))
    return history, answers


@dataclass
class CaseDue:
    """What one compile decides for one (run, case)."""

    steps: list[Step] = field(default_factory=list)  # to request now, one per key, none out of attempts
    finished: list[tuple[tuple[Any, str, str], dict]] = field(default_factory=list)  # (thread, record)
    failed: list[tuple[tuple[Any, str, str], str]] = field(default_factory=list)  # (thread, reason)
    active: list[tuple[Any, str, str]] = field(default_factory=list)  # threads still waiting
    unused: set[str] = field(default_factory=set)  # speculative steps nobody will read


def due_for_case(
    ctx: CaseContext,
    threads: list[tuple[Any, str, str]],
    answers: dict[str, Answer],
    history: dict[str, list],
    retries: int,
) -> CaseDue:
    """Advance the threads `(handle, task, variant)` of one (run, case): pure, no I/O.

    Steps shared by several threads (Interaction LJP's round 1 is LCA's) are requested once. A
    step out of attempts fails a thread only once nothing else can move it: a speculative reply
    that ran out may turn out not to be needed at all.
    """
    out = CaseDue()
    requested: set[str] = set()
    for thread in threads:
        protocol = PROTOCOLS[thread[1]]
        advance = protocol.advance(ctx, thread[2], answers)
        _check_reads(protocol, thread[2], advance)
        out.unused |= advance.unused
        if advance.record is not None:
            out.finished.append((thread, advance.record))
            continue
        fresh, failures = [], []
        for step in advance.due:
            why = exhausted(history.get(step.key, []), retries)
            if why is not None:
                failures.append(f"{step.key} {why}")
            elif step.key not in requested:
                fresh.append(step)
        if failures and len(failures) == len(advance.due):
            out.failed.append((thread, "; ".join(failures)))
            continue
        out.active.append(thread)
        for step in fresh:
            requested.add(step.key)
            out.steps.append(step)
    return out


def _check_reads(protocol: Protocol, variant: str, advance: Advance) -> None:
    """A step outside `reads` would be requested again every wave: its answers are never loaded."""
    if not advance.due and not advance.unused:
        return
    reads = protocol.reads(variant)
    for key in [step.key for step in advance.due] + list(advance.unused):
        if not key.startswith(reads):
            raise RuntimeError(
                f"the {protocol.task} protocol asks for step {key!r}, outside the steps it reads {reads}"
            )


def exhausted(attempts: list, retries: int) -> str | None:
    """Why a step may not be tried again, or None. Pending or answered steps are never due."""
    if not attempts:
        return None
    failed = [a for a in attempts if a["status"] == "failed"]
    transport = [a for a in failed if a["error_kind"] == "transport"]
    invalid = [a for a in failed if a["error_kind"] == "invalid"]
    unexecuted = [a for a in failed if a["error_kind"] == "unexecuted"]
    if len(transport) >= retries:
        return f"failed {len(transport)} times at the provider (--retries {retries}); last: {transport[-1]['error']}"
    if len(invalid) >= INVALID_ATTEMPTS:
        return f"unusable output {len(invalid)} times; last: {invalid[-1]['error']}"
    if len(unexecuted) >= UNEXECUTED_ATTEMPTS:
        return (
            f"never run in {len(unexecuted)} batches (expired, cancelled or over the token limit); "
            f"last: {unexecuted[-1]['error']}"
        )
    return None


def _request(
    run: RunContext, case_idx: int, step: Step, attempts: list, writer: _WaveWriter, endpoints: dict[str, Endpoint]
) -> tuple:
    attempt = max((a["attempt"] for a in attempts), default=0) + 1
    cid = custom_id(run.key, case_idx, step.key, attempt)
    model = run.settings.model_for(step.role, run.model)
    endpoint = endpoints[step.role]
    url = writer.limits[step.role].endpoint
    line = request_line(cid, model, step.prompt, run.settings, step.role, url, writer.pieces)
    file_pk = writer.add(endpoint, model, step.role, line)
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


def _finish_threads(db: Any, rows: list[tuple]) -> None:
    # Finished records carry whole histories: written in chunks, a wave that finishes every
    # thread of a 20x dataset would otherwise hold gigabytes of them until its end.
    db.executemany("UPDATE threads SET status = ?, record = ?, score = ?, reason = ? WHERE pk = ?", rows)
    rows.clear()


def _flush(db: Any, rows: list[tuple]) -> None:
    db.executemany(
        "INSERT INTO requests (custom_id, run_pk, case_idx, step, attempt, role, model, parser, n_claims, wave,"
        " file_pk, status, prompt_chars) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
        rows,
    )
    rows.clear()
