"""Writing a wave's request files: one file per (backend, endpoint, model), cut into shards within
the route's limits, each written and hashed by a background thread while lines are built.

The files' rows are recorded through `waves` inside the caller's (the compiler's) transaction. Once
every line is written, the wave's groups decide whether each travels as a batch, on the flex tier
or through the sync backend (`tail.wave_travel`); the lines are the same either way.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO

from lexpilot_batch.engine import budgets
from lexpilot_batch.engine.tail import TailPolicy, sent_spent, wave_travel
from lexpilot_batch.providers.backends import MANUAL
from lexpilot_batch.providers.ids import id_tag
from lexpilot_batch.providers.lines import Pieces
from lexpilot_batch.providers.routing.routes import Route
from lexpilot_batch.state.waves import add_compiled_file, update_file
from lexpilot_batch.state.workspace import Workspace, slug
from lexpilot_batch.util import fileio
from lexpilot_batch.util.fileio import unlink_quietly
from lexpilot_batch.util.waiting import result, wait_all


class _Sink:
    """One request file being written. Lines are gathered into chunks that a background thread
    hashes and writes (both release the GIL) while the compiler builds the next lines; at most
    `IN_FLIGHT` chunks per file are queued (the thread takes them in order, one file's after
    another's), and `finish` returns only once everything is on disk. The waits for a chunk are in
    steps (`waiting`), so that Ctrl-C stops them on Windows too (a slow disk)."""

    CHUNK = 1 << 20
    # With one chunk queued, the compiler waited for the thread whenever a chunk took it longer
    # than the next took to build (the thread shares the second core with the compaction worker):
    # 0.46 s of a 1x run's 5.5 s of local work. A few queued take up the unevenness; 4 MB a file.
    IN_FLIGHT = 4

    def __init__(self, path: Path, pool: ThreadPoolExecutor) -> None:
        self.fh: IO[bytes] = open(path, "wb")  # noqa: SIM115 - closed by finish() or discard()
        self.hash = hashlib.sha256()
        self.pool = pool
        self.buffer: list[bytes] = []
        self.size = 0
        self.pending: deque[Future[None]] = deque()

    def write(self, line: bytes) -> None:
        self.buffer.append(line)
        self.size += len(line)
        if self.size >= self.CHUNK:
            self._send()

    def _send(self) -> None:
        chunk = b"".join(self.buffer)
        self.buffer.clear()
        self.size = 0
        self._settle(self.IN_FLIGHT - 1)
        self.pending.append(self.pool.submit(self._store, chunk))

    def _settle(self, keep: int) -> None:
        """Wait until at most `keep` chunks are queued (and take off those already written), raising
        what the thread raised. A chunk is taken off once it has finished: Ctrl-C during the wait
        leaves it for `discard`."""
        while len(self.pending) > keep or (self.pending and self.pending[0].done()):
            result(self.pending[0])
            self.pending.popleft()

    def _store(self, chunk: bytes) -> None:
        self.hash.update(chunk)
        self.fh.write(chunk)

    def finish(self) -> str:
        """Write what is left, close the file, and return its SHA-256."""
        if self.buffer:
            self._send()
        self._settle(0)
        self.fh.close()
        return self.hash.hexdigest()

    def discard(self) -> None:
        wait_all(list(self.pending))
        self.pending.clear()
        self.fh.close()


Group = tuple[str, str, str, str | None]  # (backend, endpoint URL, model, provider): one file each


def file_group(route: Route) -> Group:
    """The group whose requests of a wave share a file (and its shards): one batch per group."""
    return (route.endpoint.backend, route.endpoint.base_url, route.model, route.provider)


class WaveWriter:
    """Streams request lines into per-(backend, endpoint, model) shard files, within each route's limits."""

    def __init__(
        self, ws: Workspace, db: sqlite3.Connection, wave: int, tail: TailPolicy | int = 0, pieces: Pieces | None = None
    ) -> None:
        self.ws, self.db, self.wave = ws, db, wave
        self.tail = tail if isinstance(tail, TailPolicy) else TailPolicy(limit=tail)
        self.dir = ws.wave_dir("requests", wave)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.open: dict[Group, dict] = {}
        self.shards: dict[Group, int] = defaultdict(int)
        self.written: list[str] = []
        self.manual: list[str] = []
        self.tail_synced: list[str] = []  # files sent at once, through sync or flex (`tail`)
        self.routes: dict[Group, Route] = {}
        self.group_files: dict[Group, list[tuple[int, str]]] = defaultdict(list)  # (pk, path) of each shard
        self.group_requests: dict[Group, int] = defaultdict(int)
        self.group_tokens: dict[Group, int] = defaultdict(int)
        # Each group's (requests, estimated input tokens) by role: `--max-premium` weighs each role at its own sizes.
        self.group_roles: dict[Group, dict[str, list[int]]] = defaultdict(dict)
        self.pieces = Pieces() if pieces is None else pieces  # (kept across a process's waves: `engine.settled`)
        # The workspace's tag: in every custom_id (`ids.request_check`), and first in the ids
        # of Anthropic lines (`lines.line_id`).
        self.id_tag = id_tag(ws.workspace_id)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="request-files")
        self.token_caps: dict[Group, int | None] = {}

    def _token_cap(self, group: Group, route: Route) -> int | None:
        """Estimated tokens one file of this group may hold: within the model's enqueued-token
        budget (`budgets.file_cap`), for backends whose files wait at a provider as batches."""
        if group not in self.token_caps:
            cap = None
            if route.backend in budgets.BATCH_BACKENDS:
                limit = budgets.budget(self.db, route.model, route.limits.enqueued_tokens)
                if limit:  # (`factor` reads the model's last answered files: only for a budget)
                    cap = budgets.file_cap(limit, budgets.factor(self.db, route.model))
            self.token_caps[group] = cap
        return self.token_caps[group]

    def add(self, route: Route, line: bytes, tokens: int = 0) -> int:
        """Write one request line of `route` (`tokens`: its estimated input tokens) into its file;
        returns the file's pk."""
        group = file_group(route)
        limits = route.limits
        current = self.open.get(group)
        if current is not None and (
            current["n"] >= limits.max_requests
            or current["bytes"] + len(line) > limits.max_bytes
            or ((cap := self._token_cap(group, route)) is not None and current["tokens"] + tokens > cap)
        ):
            self._close(group)
            current = None
        if current is None:
            current = self._start(group, limits.endpoint)
            self.routes.setdefault(group, route)
        self.group_requests[group] += 1
        self.group_tokens[group] += tokens
        part = self.group_roles[group].setdefault(route.role, [0, 0])
        part[0] += 1
        part[1] += tokens
        current["sink"].write(line)
        current["n"] += 1
        current["bytes"] += len(line)
        current["tokens"] += tokens
        current["roles"].add(route.role)
        return current["pk"]

    def _start(self, group: Group, url: str) -> dict:
        backend, base_url, model, provider = group
        shard = self.shards[group]
        self.shards[group] += 1
        tmp = self.dir / f".building-{slug('|'.join(g or '' for g in group), 12)}-{shard:03d}.jsonl"
        pk = add_compiled_file(
            self.db, self.wave, self.ws.relative(tmp), model, provider, base_url, backend, shard, url
        )
        entry = {
            "pk": pk,
            "sink": _Sink(tmp, self.pool),
            "tmp": tmp,
            "n": 0,
            "bytes": 0,
            "tokens": 0,
            "roles": set(),
            "shard": shard,
            "model": model,
            "backend": backend,
        }
        self.open[group] = entry
        return entry

    def _close(self, group: Group) -> None:
        # Open until it has its final name: a failure before (its last chunks, raised by `finish`;
        # the rename) leaves it to `abort`, which removes its temporary file.
        entry = self.open[group]
        sha256 = entry["sink"].finish()
        roles = "+".join(sorted(entry["roles"]))
        final = self.dir / f"{roles}__{slug(entry['model'])}__{entry['shard']:03d}.jsonl"
        fileio.replace(Path(entry["tmp"]), final)
        del self.open[group]
        rel = self.ws.relative(final)
        self.written.append(rel)  # (`abort` removes it from here on)
        update_file(
            self.db,
            entry["pk"],
            path=rel,
            roles=roles,
            n_requests=entry["n"],
            bytes=entry["bytes"],
            sha256=sha256,
            tokens=entry["tokens"],
        )
        self.group_files[group].append((entry["pk"], rel))
        if entry["backend"] == MANUAL:
            self.manual.append(rel)

    def close(self) -> list[str]:
        for group in list(self.open):
            self._close(group)
        self.pool.shutdown()
        sizes = {g: (self.routes[g], self.group_requests[g], self.group_tokens[g]) for g in self.group_files}
        if self.tail.auto:  # weighed for `--max-premium` against what was sent before (`tail.sent_spent`)
            m = self.tail.measures
            weights = {}
            for g in self.group_files:
                model = self.routes[g].model
                usd = [m.usd(role, model, n, tokens) for role, (n, tokens) in self.group_roles[g].items()]
                weights[g] = (
                    None if None in usd else sum(u for u in usd if u is not None),
                    m.tokens(model, sizes[g][2]),
                )
            travel = wave_travel(self.tail, sizes, sent_spent(self.db, m, but_wave=self.wave), weights)
        else:
            travel = wave_travel(self.tail, sizes)
        for group, files in self.group_files.items():
            if travel[group] != self.routes[group].backend:
                for pk, rel in files:
                    update_file(self.db, pk, backend=travel[group])
                    self.tail_synced.append(rel)
        return self.written

    def abort(self) -> None:
        """The compile failed, and its transaction is rolled back: what this writer put on disk goes
        too, the files it finished included (no row names them once the rollback is done; where one
        replaced an unsent file of the same wave, that wave's restored rows no longer match their
        bytes, and it is compiled again before anything is sent: `loop._ensure_intact`)."""
        for entry in self.open.values():
            entry["sink"].discard()
            Path(entry["tmp"]).unlink(missing_ok=True)
        self.open.clear()
        self.pool.shutdown()
        for rel in self.written:
            unlink_quietly(self.ws.path(rel))
