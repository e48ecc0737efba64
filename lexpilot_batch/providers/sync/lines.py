"""The lines of a request file the sync runner sends (`providers.sync.runner`), and of the output
file it appends to: reading them streaming, checking them before anything is sent, and finding which
requests an output file already answers after a kill (`saved_custom_ids`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.sync.call import ChatCall
from lexpilot_batch.util.jsonbounds import loads_bounded


def saved_custom_ids(output_path: Path, id_key: str = "custom_id") -> set[str]:
    """The ids (`id_key` of each line: `ChatCall.id_key`) an output file already answers, after
    repairing a cut last line.

    A line cut by a kill is removed (the file is truncated to the end of its last complete line),
    unless it lacks only its newline, which is then added. A complete line that cannot be read
    (only a power loss leaves one) stays for ingest to report, and its request is sent again.
    """
    if not output_path.exists():
        return set()
    saved: set[str] = set()
    end = 0
    tail = b""
    with open(output_path, "r+b") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                tail = raw
                break
            end += len(raw)
            custom_id = _saved_id(raw, id_key)
            if custom_id is not None:
                saved.add(custom_id)
        if tail:
            custom_id = _saved_id(tail, id_key)
            if custom_id is not None:
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")
                saved.add(custom_id)
            else:
                fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
    return saved


def _saved_id(raw: bytes, id_key: str) -> str | None:
    try:
        obj = loads_bounded(raw)  # a line beyond the bounds is read by nobody: its request is sent again
    except ValueError:  # also UnicodeDecodeError
        return None
    custom_id = obj.get(id_key) if isinstance(obj, dict) else None
    return custom_id if isinstance(custom_id, str) else None


def read_requests(path: Path, call: ChatCall) -> Generator[tuple[str, dict[str, Any]], None, None]:
    """(line id, what is sent) of every request line, streaming; `LexpilotError` for a line that is
    not one of `call`'s API."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            where = f"{path} line {number}"
            try:
                obj = json.loads(raw)
            except ValueError:
                raise LexpilotError(f"{where} is not JSON; this request file is damaged, compile it again") from None
            line_id = obj.get(call.id_key) if isinstance(obj, dict) else None
            if not isinstance(line_id, str) or not line_id:
                raise LexpilotError(
                    f"{where} is not a batch request line (it needs a {call.id_key} and a request); "
                    "this request file is damaged, compile it again"
                )
            yield line_id, call.payload(obj, where)


def first_model(path: Path, call: ChatCall) -> str:
    """The model the file's first request names (a file holds one model's requests)."""
    lines = read_requests(path, call)
    try:
        first = next(lines, None)
    finally:
        lines.close()
    return call.model_of(first[1]) if first is not None else ""


def count_requests(path: Path, saved: set[str], call: ChatCall) -> tuple[int, int]:
    """(requests in the file, of which already saved); checks every line before anything is sent."""
    total = already = 0
    seen: set[str] = set()
    for custom_id, _ in read_requests(path, call):
        if custom_id in seen:
            raise LexpilotError(f"{path}: {call.id_key} {custom_id!r} appears twice; this request file is damaged")
        seen.add(custom_id)
        total += 1
        already += custom_id in saved
    return total, already
