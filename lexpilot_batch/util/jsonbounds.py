"""JSON read within bounds of size and depth: a document no parser call can exhaust the memory or
the stack with. `too_deep` looks at a text's nesting without parsing it (so it never recurses),
`loads` parses what is within `MAX_DEPTH`, `loads_bounded` a whole document within `MAX_LINE_BYTES`.
What the bounds are for, and how a line beyond them is handled, is `engine.result_lines`'.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_LINE_BYTES = 8 << 20
MAX_DEPTH = 64

_DECODER = json.JSONDecoder()
# A JSON string, escapes included: what a line's structure is read without.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def too_deep(text: str) -> bool:
    """Whether the arrays and objects of a JSON text nest deeper than `MAX_DEPTH`, read outside its
    strings (as the parser reads them: it is never asked to, so it never runs out of stack)."""
    if text.count("{") + text.count("[") <= MAX_DEPTH:
        return False  # it cannot nest deeper than it has openings: nearly every line, at once
    depth = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        else:
            depth -= 1
    return False


def parse(text: str) -> Any:
    """`json.loads(text)` for a stripped, non-empty line, minus its per-call overhead.

    Same result and same `JSONDecodeError`s: json.loads refuses a BOM, skips JSON whitespace
    (which a stripped line has at neither end) and refuses anything after the value.
    """
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    obj, end = _DECODER.raw_decode(text)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return obj


class BeyondBounds(ValueError):
    """JSON larger or deeper than a result line may be; the message says which."""


def loads(text: str) -> Any:
    """`json.loads(text)` of a stripped, non-empty line within `MAX_DEPTH` (`BeyondBounds` beyond it)."""
    if too_deep(text):
        raise BeyondBounds(f"nested deeper than {MAX_DEPTH} levels")
    return parse(text)


def loads_bounded(data: bytes | str) -> Any:
    """A whole JSON document a provider sent (a synchronous call's answer, which the sync backend
    saves as a result line), within the bounds of a result line: `BeyondBounds` when it is larger
    or deeper, another `ValueError` when it is not UTF-8 or not JSON."""
    if len(data) > MAX_LINE_BYTES:
        raise BeyondBounds(f"{len(data):,} bytes, over the {MAX_LINE_BYTES >> 20} MiB a result line may hold")
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return loads(text.strip())
