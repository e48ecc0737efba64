"""Reading saved result files line by line, within bounds. Every reader of a provider's result lines
(ingest, `doctor`, telling an untagged batch ours by its results) goes through `read_lines`, so that
no line can exhaust the memory or the stack, and none is read silently wrong.

| bound | limit | a line beyond it |
| --- | --- | --- |
| size | `MAX_LINE_BYTES`, 8 MiB | never held whole: read up to the bound, the rest in 1 MiB chunks, dropped (`TOO_LARGE`) |
| depth | `MAX_DEPTH`, 64 levels of arrays and objects | never parsed (`TOO_DEEP`) |
| encoding | strict UTF-8 | parsed with U+FFFD for the bad bytes, and flagged (`INVALID_UTF8`) |

A real result line is a few KB and under 10 levels deep. 8 MiB is room for an answer at the
per-answer limit (`answers.MAX_ANSWER_CHARS`: 100,000 characters, 600 KB even escaped as `\\uXXXX`)
beside a reasoning model's thinking (DeepSeek-R1's: up to 64K tokens, about as much again), many
times over; a longer line is no usable answer, and holding it would cost memory for nothing.

A flawed line is yielded with its `Flaw`. A line too large or too deep is not parsed: it stands as
a stub holding only its id, when one is found in its first or last 4 KB (where every API puts it),
so that ingest can fail the request it answers (`ingest`) and send it again; without one it is a
bad line, like a line that is not JSON.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from lexpilot_batch.providers.results import Normalise
from lexpilot_batch.state.compaction import open_saved
from lexpilot_batch.util.jsonbounds import MAX_DEPTH, MAX_LINE_BYTES, parse, too_deep
from lexpilot_batch.util.redaction import redact_cut

_EDGE = 4096  # bytes at each end of a line too large, where its id is looked for
_CHUNK = 1 << 20  # what the rest of a line too large is read by

TOO_LARGE, TOO_DEEP, INVALID_UTF8 = "too_large", "too_deep", "invalid_utf8"


class Flaw(NamedTuple):
    kind: str  # TOO_LARGE, TOO_DEEP or INVALID_UTF8: the kind of the anomaly ingest records
    reason: str  # what is wrong, for the anomaly and the failed request


# (line number, parsed object or None, its text, its flaw or None)
Line = tuple[int, dict | None, str, Flaw | None]

# The id of a line no parser reads: OpenAI's and Anthropic's `custom_id`, Gemini's `key`.
_ID = re.compile(r'"(custom_id|key)"\s*:\s*"([^"\\]{1,256})"')


def _stub(*edges: str) -> dict | None:
    """A line no parser reads, as the id it carries (found at either end), or None."""
    for edge in edges:
        found = _ID.search(edge)
        if found:
            return {found.group(1): found.group(2)}
    return None


def read_lines(path: Path) -> Iterator[Line]:
    """Every non-blank line of a saved result file, streaming, within the bounds above; a saved
    file of a finished wave is read from its compacted copy (`compaction`)."""
    with open_saved(path) as fh:
        readline = fh.readline
        number = 0
        raw: bytes | bytearray
        while raw := readline(_CHUNK):
            number += 1
            if len(raw) == _CHUNK and not raw.endswith(b"\n"):  # a long line: read on, up to the bound
                raw = bytearray(raw)
                while len(raw) <= MAX_LINE_BYTES and not raw.endswith(b"\n") and (chunk := readline(_CHUNK)):
                    raw += chunk
                if len(raw) > MAX_LINE_BYTES:
                    yield _too_large(number, raw, readline)
                    continue
            flaw = None
            if number == 1 and raw.startswith(codecs.BOM_UTF8):  # a file saved by a Windows editor
                raw = raw[len(codecs.BOM_UTF8) :]
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                text = raw.decode("utf-8", "replace").strip()
                flaw = Flaw(INVALID_UTF8, f"invalid UTF-8 at byte {exc.start + 1} of the line")
            if not text:
                continue
            if too_deep(text):
                stub = _stub(text[:_EDGE], text[-_EDGE:])
                yield number, stub, redact_cut(text, 200), Flaw(TOO_DEEP, f"nested deeper than {MAX_DEPTH} levels")
                continue
            try:
                obj = parse(text)
            except (ValueError, RecursionError):  # RecursionError: never, within MAX_DEPTH
                yield number, None, text, flaw
                continue
            yield number, obj if isinstance(obj, dict) else None, text, flaw


def _too_large(number: int, start: bytearray, readline: Callable[[int], bytes]) -> Line:
    """A line over `MAX_LINE_BYTES`, of which `start` was read: the rest is read a chunk at a time and
    dropped, keeping only its ends, where its id is looked for."""
    size, head, tail = len(start), bytes(start[:_EDGE]), bytes(start[-_EDGE:])
    start.clear()
    chunk = tail
    while not chunk.endswith(b"\n") and (chunk := readline(_CHUNK)):
        size += len(chunk)
        tail = (tail + chunk)[-_EDGE:]
    first, last = head.decode("utf-8", "replace"), tail.decode("utf-8", "replace")
    reason = f"a line of {size:,} bytes, over the {MAX_LINE_BYTES >> 20} MiB a result line may hold"
    return number, _stub(first, last), redact_cut(first, 200), Flaw(TOO_LARGE, reason)


def result_lines(path: Path, normalise: Normalise | None = None) -> Iterator[Line]:
    """`read_lines`, each object read as an OpenAI batch output line by `normalise` (None: it is one);
    an object it cannot read is a bad line."""
    if normalise is None:
        yield from read_lines(path)
        return
    for number, line, text, flaw in read_lines(path):
        if line is not None:
            try:
                line = normalise(line)
            except (TypeError, AttributeError, ValueError):
                line = None
        yield number, line, text, flaw
