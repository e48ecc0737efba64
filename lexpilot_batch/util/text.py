"""Text as a terminal shows it: how wide Chinese text is, and what must never reach a terminal raw."""

from __future__ import annotations

import contextlib
import json
import sys
import unicodedata

# Control, format and line/paragraph separator characters: they can move the cursor, drive the
# terminal or reorder a line (bidirectional overrides are format characters).
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def display_width(text: str) -> int:
    """Terminal columns taken by `text`: wide and full-width (e.g. CJK) characters take two."""
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int, align: str = "l") -> str:
    """`text` padded with spaces to `width` columns, on the right (`l`) or on the left (`r`)."""
    gap = " " * max(0, width - display_width(text))
    return text + gap if align == "l" else gap + text


def has_unsafe_characters(text: str) -> bool:
    """Whether printing `text` could move the cursor, drive the terminal or reorder the line."""
    return any(unicodedata.category(ch) in _UNSAFE_CATEGORIES for ch in text)


def terminal_safe(text: str, keep_newlines: bool = False) -> str:
    """`text` with each character `has_unsafe_characters` looks for written as its JSON escape
    (`\u001b`), so that a provider's error or a stored reason can be printed but never drive the
    terminal. With `keep_newlines`, line feeds stay (a multi-line block: a table, a report); a
    carriage return, which can overwrite what a line showed, is escaped all the same.

    Inside a JSON string such an escape means the character itself, so a JSON document stays valid
    and means the same."""
    if keep_newlines:
        return "\n".join(terminal_safe(line) for line in text.split("\n"))
    # str.isprintable() is a superset check in C (it also refuses spaces other than " "): the
    # character-by-character look is only for the lines that fail it.
    if text.isprintable() or not has_unsafe_characters(text):
        return text
    return "".join(json.dumps(ch)[1:-1] if unicodedata.category(ch) in _UNSAFE_CATEGORIES else ch for ch in text)


def utf8_streams() -> None:
    """Standard output and error write UTF-8 whatever the console's code page or the locale, so
    that `report --format html > report.html` under cp1252 or GBK gives a UTF-8 file instead of a
    UnicodeEncodeError (a Windows console itself is written through its Unicode API either way)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if reconfigure is not None and encoding != "utf8":
            with contextlib.suppress(ValueError, OSError):  # a stream already written in another encoding
                reconfigure(encoding="utf-8", errors="replace")


def counted(n: int, noun: str) -> str:
    """`n` and its noun, singular for one: "1 case", "2 cases", "1,200 cases"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def ended(text: str) -> str:
    """`text` as the end of a sentence: a full stop added unless it ends one already ("...?", not "...?.")."""
    return text if text.rstrip().endswith((".", "?", "!", "。", "？", "！")) else text + "."
