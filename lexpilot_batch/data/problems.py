"""Problem lines: the bounded list of problems found in one file, and how they name and quote values.

A quoted value is escaped so that none can act on a terminal.
"""

from __future__ import annotations

import json
from typing import Any

from lexpilot_batch.util.text import terminal_safe

# A broken file can hold thousands of problems; past this many the rest is noise on screen.
MAX_PROBLEMS = 50
# Past this many problems checking stops, so that a file of millions of wrong cases fails at once,
# in bounded time and memory; below it the count stays exact.
MAX_COUNTED = 1000


def kind(value: Any) -> str:
    """A JSON value's type, as a reader of the JSON file would name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def show(value: Any, limit: int = 40) -> str:
    """A short JSON rendering of a value for a problem line, safe to print."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = kind(value)
    return terminal_safe(text if len(text) <= limit else text[: limit - 1] + "…")


class TooManyProblems(Exception):
    """Raised by `Problems.add` at MAX_COUNTED problems: the rest of the file is not checked."""


class Problems:
    """The problems found in one file: the first MAX_PROBLEMS kept as lines, the others counted."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0
        self.stopped_at: str | None = None  # where checking stopped, once MAX_COUNTED were found

    def __bool__(self) -> bool:
        return self.count > 0

    def add(self, line: str) -> None:
        self.count += 1
        if len(self.lines) < MAX_PROBLEMS:
            # Lines quote the file's own keys and values: none of them may act on the terminal.
            self.lines.append(terminal_safe(line))
        if self.count >= MAX_COUNTED:
            raise TooManyProblems

    def listed(self) -> list[str]:
        """The lines to show, with one more saying what was left out."""
        hidden = self.count - len(self.lines)
        if self.stopped_at:
            stopped = f"checking stopped at {self.stopped_at}, so the rest of the file was not checked"
            return [*self.lines, f"… and {hidden} more problems; {stopped}"]
        return [*self.lines, f"… and {hidden} more problems"] if hidden else list(self.lines)
