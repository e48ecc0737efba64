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
"""

from __future__ import annotations

import json
import os
import tempfile
import time
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


def serialisation_floor(ws_root: Path, max_bytes: int = 256 * MB) -> dict[str, Any]:
    """Seconds per request line to dump and write it, and per result line to parse it, on this
    workspace's files; their sum is the floor per request."""
    from lexpilot_batch.state.compaction import read_saved

    dump_wall = dump_cpu = 0.0
    dumped = dumped_bytes = 0
    fd, scratch = tempfile.mkstemp(prefix="floor-", suffix=".jsonl")
    os.close(fd)
    try:
        read = 0
        for path in _spread(_saved(ws_root / "requests")):
            if read >= max_bytes:
                break
            data = read_saved(path)
            read += len(data)
            objects = [json.loads(line) for line in data.splitlines() if line.strip()]
            w, c = time.perf_counter(), time.process_time()
            with open(scratch, "wb") as out:
                for obj in objects:
                    out.write(json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n")
            dump_wall += time.perf_counter() - w
            dump_cpu += time.process_time() - c
            dumped += len(objects)
            dumped_bytes += os.path.getsize(scratch)
    finally:
        Path(scratch).unlink(missing_ok=True)

    parse_wall = parse_cpu = 0.0
    parsed = 0
    read = 0
    for path in _spread(_saved(ws_root / "responses")):
        if read >= max_bytes:
            break
        data = read_saved(path)
        read += len(data)
        lines = [line for line in data.splitlines() if line.strip()]
        w, c = time.perf_counter(), time.process_time()
        for line in lines:
            json.loads(line)
        parse_wall += time.perf_counter() - w
        parse_cpu += time.process_time() - c
        parsed += len(lines)

    def per(seconds: float, n: int) -> float | None:
        return round(seconds / n * 1e6, 1) if n else None

    dump_us, parse_us = per(dump_wall, dumped), per(parse_wall, parsed)
    dump_cpu_us, parse_cpu_us = per(dump_cpu, dumped), per(parse_cpu, parsed)
    return {
        "us_per_request": round((dump_us or 0) + (parse_us or 0), 1),
        "cpu_us_per_request": round((dump_cpu_us or 0) + (parse_cpu_us or 0), 1),
        "dump_us_per_line": dump_us,
        "parse_us_per_line": parse_us,
        "request_lines_timed": dumped,
        "result_lines_timed": parsed,
        "request_mb_timed": round(dumped_bytes / MB, 1),
    }
