"""Reading a JSON file whole, and the one wording of each way reading a JSON file fails.

Missing, unreadable, not UTF-8, not JSON, truncated, nested too deeply: the streaming reader
(`stream`) words its faults with the same functions. `object_pairs` marks duplicate keys.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lexpilot_batch.errors import DataError


class _JsonObject(dict[str, Any]):
    """A JSON object that remembers the keys the file gave more than once.

    `json` silently keeps the last of duplicate keys; in `result_dict` that would drop a claim
    without a word, so the loader reports them instead.
    """

    duplicate_keys: list[str]


def object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The `object_pairs_hook` of every JSON file read here: duplicate keys are marked, not lost."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    duplicates: list[str] = []
    for key, _ in pairs:
        if key in seen and key not in duplicates:
            duplicates.append(key)
        seen.add(key)
    marked = _JsonObject(obj)
    marked.duplicate_keys = duplicates
    return marked


def not_utf8(what: str, path: Path, byte: int, line: int, offset: int) -> DataError:
    return DataError(
        f"{what} {path} is not UTF-8 text (byte 0x{byte:02x} at line {line}, byte offset {offset}); "
        "save it as UTF-8 and try again."
    )


def not_json(what: str, path: Path, msg: str, line: int, column: int, truncated: bool) -> DataError:
    where = f"line {line} column {column}"
    if truncated:
        return DataError(
            f"{what} {path} ends unexpectedly ({msg} at {where}): the file looks truncated; copy or download it again."
        )
    if msg.startswith("Extra data") and column == 1:
        # A second value at the start of a line: JSON Lines (`.jsonl`), one object per line.
        expected = (
            'one JSON array of case objects ([{"case_number": ...}, {...}]): wrap the lines in [ ] '
            "and put a comma between the cases"
            if what == "Dataset file"
            else "one JSON value"
        )
        return DataError(
            f"{what} {path} holds more than one JSON value ({msg} at {where}): it looks like JSON Lines, one "
            f"object per line; expected {expected}."
        )
    return DataError(f"{what} {path} is not valid JSON: {msg} at {where}; fix the file there.")


def too_deep_to_read(what: str, path: Path) -> DataError:
    return DataError(
        f"{what} {path} nests arrays or objects too deeply to be read; it is not a LexPilot file, or it is corrupted."
    )


def unreadable(what: str, path: Path, hint: str, exc: OSError) -> DataError:
    """The error for a path that could not be opened or read."""
    if path.is_dir():  # Windows refuses to open a folder with "permission denied"
        return DataError(f"{what} {path} is a folder; {hint}.")
    if isinstance(exc, FileNotFoundError):
        return DataError(f"{what} {path} does not exist; {hint}.")
    return DataError(f"{what} {path} cannot be read ({exc.strerror}); {hint}.")


def read_json(path: Path, what: str, hint: str) -> tuple[bytes, Any]:
    """The file's bytes and parsed JSON, or one `DataError` line saying what is wrong with it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise unreadable(what, path, hint, exc) from None
    bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        # utf-8-sig: editors on Windows often save UTF-8 with a byte-order mark.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # The codec counts from after the byte-order mark; the message counts from the file's start.
        at = bom + exc.start
        raise not_utf8(what, path, raw[at], raw.count(b"\n", 0, at) + 1, at) from None
    if not text.strip():
        raise DataError(f"{what} {path} is empty; {hint}.")
    try:
        data = json.loads(text, object_pairs_hook=object_pairs)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        raise not_json(what, path, exc.msg, exc.lineno, exc.colno, truncated) from None
    except RecursionError:
        raise too_deep_to_read(what, path) from None
    return raw, data


def default_path(locate: Callable[[], Path], what: str) -> Path:
    """The path of a bundled file (`resources.sample_dataset`, ...), or why it is missing."""
    try:
        return Path(locate())
    except FileNotFoundError:
        raise DataError(
            f"The bundled {what} is missing (no data folder found); reinstall lexpilot-batch "
            "or pass the file explicitly."
        ) from None
