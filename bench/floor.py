"""The serialisation floor: what any engine must spend per request on this machine, on the run's own bytes.

Whatever else an engine does, it must serialise every request line it sends (`json.dumps` of the
line's object, UTF-8, written to a file) and parse every result line it takes in (`json.loads`).
This module times exactly that on the finished workspace's own files, so that the engine's local
work per request (`local_us_per_request`: compile, advance, ingest) can be quoted as a ratio to a
floor measured on the same machine at the same moment, rather than against a number from another
day (issue 27: "local work <= 1.5x the serialisation floor").

Reading the files, decompressing compacted ones and parsing request lines into objects happen
outside the timed parts. A large workspace is sampled: whole files, spread evenly over the waves,
until `max_bytes` of them are read (each file once); the floor is the mean over the lines timed.
`FloorAlongside` times the same parts while the engine runs, wave by wave (the bench's ratio).

Beside it, the durable floor (`durable_us_per_request`): the serialisation floor plus the least any
engine that keeps its state in SQLite must add (SPEC: every state change is one transaction) — one
row inserted per request line (its custom_id, in a table with the UNIQUE index a result is looked up
by) and one row updated per result line (its status and answer text, found by custom_id), each
file's rows in one transaction, in WAL mode with `synchronous=NORMAL` as the workspace's store. It
says how much of the engine's distance from the serialisation floor any SQLite-backed engine would
keep. It is a lower bound: the scratch table (beside the workspace, on its disk) holds only the
sampled rows, with one index, and the rows a result updates were inserted a moment before.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MB = 1024 * 1024


def _saved(folder: Path) -> list[Path]:
    """Request or result files of a workspace, plain or compacted, in wave and name order."""
    from lexpilot_batch.state.compaction import saved_files

    out: list[Path] = []
    for wave in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        out.extend(saved_files(wave))
    return out


def _spread(paths: list[Path]) -> list[Path]:
    """The files in an order that spreads any prefix of it evenly over the waves: every k-th file
    first (at most 64 of them), then the rest, so that stopping at a byte budget still samples the
    whole run."""
    step = max(1, len(paths) // 64)
    first = paths[::step]
    return first + [p for i, p in enumerate(paths) if i % step]


class _Floor:
    """The timed parts, summed over the lines timed."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder  # where the scratch database goes: beside the workspace, on its disk
        self.dump_wall = self.dump_cpu = self.parse_wall = self.parse_cpu = 0.0
        self.store_wall = self.store_cpu = self.update_wall = self.update_cpu = 0.0
        self.dumped = self.dumped_bytes = self.parsed = 0
        # The lines of the run the timed ones stand for (`FloorAlongside` samples every k-th line).
        self.dump_weight = self.parse_weight = 0.0
        self._db: sqlite3.Connection | None = None
        self._db_path: str | None = None

    def _store(self) -> sqlite3.Connection:
        if self._db is None:
            self._db_path = _scratch(".sqlite", self.folder)
            self._db = sqlite3.connect(self._db_path)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE requests (pk INTEGER PRIMARY KEY, custom_id TEXT NOT NULL UNIQUE,"
                " status TEXT NOT NULL, text TEXT)"
            )
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._db_path is not None:
            for suffix in ("", "-wal", "-shm"):
                Path(self._db_path + suffix).unlink(missing_ok=True)
            self._db_path = None

    def dump(self, data: Iterable[bytes], scratch: str, weight: float = 1.0) -> None:
        """Time the request lines `data`; each stands for `weight` lines of the run (a file
        sampled every k-th line: about k, exactly its lines over the lines sampled)."""
        objects = [json.loads(line) for line in data if line.strip()]
        # Opened (the last file's sample truncated) and closed outside the timed part: once a file,
        # where the timed part is weighed once a line.
        with open(scratch, "wb") as out:
            w, c = time.perf_counter(), time.process_time()
            for obj in objects:
                out.write(json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n")
            out.flush()
            self.dump_wall += (time.perf_counter() - w) * weight
            self.dump_cpu += (time.process_time() - c) * weight
        self.dump_weight += len(objects) * weight
        self.dumped += len(objects)
        self.dumped_bytes += os.path.getsize(scratch)
        db = self._store()
        rows = [(_id(obj, self.dumped + i), "pending") for i, obj in enumerate(objects)]
        w, c = time.perf_counter(), time.process_time()
        with db:  # one transaction, committed at the end of the block
            db.executemany("INSERT INTO requests (custom_id, status) VALUES (?, ?)", rows)
        self.store_wall += (time.perf_counter() - w) * weight
        self.store_cpu += (time.process_time() - c) * weight

    def parse(self, data: Iterable[bytes], weight: float = 1.0) -> None:
        """Time the result lines `data`, each standing for `weight` lines of the run (`dump`)."""
        lines = [line for line in data if line.strip()]
        w, c = time.perf_counter(), time.process_time()
        for line in lines:
            json.loads(line)
        self.parse_wall += (time.perf_counter() - w) * weight
        self.parse_cpu += (time.process_time() - c) * weight
        self.parse_weight += len(lines) * weight
        # The rows the results answer, inserted untimed (most sampled request lines are others).
        parsed = [json.loads(line) for line in lines]
        db = self._store()
        ids = [_id(obj, self.parsed + i, "result") for i, obj in enumerate(parsed)]
        with db:
            db.executemany(
                "INSERT OR IGNORE INTO requests (custom_id, status) VALUES (?, 'pending')", ((i,) for i in ids)
            )
        self.parsed += len(lines)
        w, c = time.perf_counter(), time.process_time()
        updates = [("answered", _content(obj), cid) for obj, cid in zip(parsed, ids, strict=True)]
        with db:
            db.executemany("UPDATE requests SET status = ?, text = ? WHERE custom_id = ?", updates)
        self.update_wall += (time.perf_counter() - w) * weight
        self.update_cpu += (time.process_time() - c) * weight

    def result(self) -> dict[str, Any]:
        def per(seconds: float, n: float) -> float | None:
            return round(seconds / n * 1e6, 1) if n else None

        dumped, parsed = self.dump_weight, self.parse_weight
        dump_us, parse_us = per(self.dump_wall, dumped), per(self.parse_wall, parsed)
        dump_cpu_us, parse_cpu_us = per(self.dump_cpu, dumped), per(self.parse_cpu, parsed)
        store_us, update_us = per(self.store_wall, dumped), per(self.update_wall, parsed)
        store_cpu_us, update_cpu_us = per(self.store_cpu, dumped), per(self.update_cpu, parsed)
        floor = (dump_us or 0) + (parse_us or 0)
        floor_cpu = (dump_cpu_us or 0) + (parse_cpu_us or 0)
        return {
            "us_per_request": round(floor, 1),
            "cpu_us_per_request": round(floor_cpu, 1),
            "durable_us_per_request": round(floor + (store_us or 0) + (update_us or 0), 1),
            "durable_cpu_us_per_request": round(floor_cpu + (store_cpu_us or 0) + (update_cpu_us or 0), 1),
            "insert_us_per_line": store_us,
            "update_us_per_line": update_us,
            "dump_us_per_line": dump_us,
            "parse_us_per_line": parse_us,
            "request_lines_timed": self.dumped,
            "result_lines_timed": self.parsed,
            "request_mb_timed": round(self.dumped_bytes / MB, 1),
        }


def _scratch(suffix: str = ".jsonl", folder: Path | None = None) -> str:
    fd, scratch = tempfile.mkstemp(prefix="floor-", suffix=suffix, dir=folder)
    os.close(fd)
    return scratch


def _id(obj: Any, n: int, kind: str = "request") -> str:
    """The line's custom_id; a unique stand-in where it has none (the insert costs the same)."""
    cid = obj.get("custom_id") if isinstance(obj, dict) else None
    return cid if isinstance(cid, str) else f"{kind}-{n}"


def _content(obj: Any) -> str | None:
    """The answer text of an OpenAI-format result line (None for an error line or another format)."""
    try:
        return obj["response"]["body"]["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None


def serialisation_floor(ws_root: Path, max_bytes: int = 256 * MB) -> dict[str, Any]:
    """Seconds per request line to dump and write it, and per result line to parse it, on this
    workspace's files; their sum is the floor per request."""
    from lexpilot_batch.state.compaction import read_saved

    floor = _Floor(ws_root.parent)
    try:
        _time_saved(floor, ws_root, max_bytes, read_saved)
    finally:
        floor.close()
    return floor.result()


def _time_saved(floor: _Floor, ws_root: Path, max_bytes: int, read_saved: Any) -> None:
    scratch = _scratch()
    try:
        read = 0
        for path in _spread(_saved(ws_root / "requests")):
            if read >= max_bytes:
                break
            data = read_saved(path)
            read += len(data)
            floor.dump(data.splitlines(), scratch)
    finally:
        Path(scratch).unlink(missing_ok=True)
    read = 0
    for path in _spread(_saved(ws_root / "responses")):
        if read >= max_bytes:
            break
        data = read_saved(path)
        read += len(data)
        floor.parse(data.splitlines())


class FloorAlongside:
    """The floor measured while the engine runs: after each round, on the files that round wrote
    and took in (`sample`), every k-th line of each so that at most `per_file` bytes of it are
    timed.

    The machine's speed drifts by a fifth or more from one minute to the next (a shared virtual
    machine): a floor timed once after the run can be 50% off the speed the engine ran at, and the
    ratio with it. Timed beside each wave, the floor meets the same drift as the engine did, and
    the same compaction thread running beside it.
    """

    def __init__(self, ws_root: Path, per_file: int = 3 * MB) -> None:
        self.ws_root, self.per_file = ws_root, per_file
        self.seen: set[Path] = set()
        self.floor = _Floor(ws_root.parent)

    def sample(self) -> None:
        scratch = _scratch()
        try:
            for folder, dump in (("requests", True), ("responses", False)):
                for path in _saved(self.ws_root / folder):
                    if path in self.seen:
                        continue
                    self.seen.add(path)
                    lines, total = self._lines(path)
                    weight = total / len(lines) if lines else 1.0
                    if dump:
                        self.floor.dump(lines, scratch, weight)
                    else:
                        self.floor.parse(lines, weight)
        finally:
            Path(scratch).unlink(missing_ok=True)

    def _lines(self, path: Path) -> tuple[list[bytes], int]:
        """Every k-th line of the file, read as a stream (the engine's peak memory is measured in
        this process, and a whole file in memory would raise it), and how many lines it holds.

        Each sampled line stands for the lines of its file it was picked among: a file of 10,800
        lines cut to 200 weighs 54 a line, a small file's lines 1 each. Unweighted, the mean over the
        sample was the small files' (the tail waves': short prompts): at 1x it timed 14.4 us a
        request line to dump where the run's lines take 27.7 (every line of a kept workspace timed),
        a floor half as high as the run's."""
        from lexpilot_batch.state.compaction import open_saved, stored

        if path.exists():
            size = path.stat().st_size
        else:  # compacted: gzip's trailer holds the plain size (mod 2**32)
            with open(stored(path), "rb") as fh:
                fh.seek(-4, os.SEEK_END)
                size = int.from_bytes(fh.read(4), "little")
        stride = max(1, -(-size // self.per_file))
        sampled, total = [], 0
        with open_saved(path) as fh:
            for i, line in enumerate(fh):
                if line.strip():
                    total += 1
                    if i % stride == 0:
                        sampled.append(line)
        return sampled, total

    def result(self) -> dict[str, Any]:
        self.floor.close()
        return self.floor.result()
