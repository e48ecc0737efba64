"""The product's progress bars: tqdm's on a terminal, plain lines anywhere else.

A Ctrl-C can land inside `tqdm.__init__` (the random Ctrl-C campaign of
`tests/scenarios/test_crash.py` found it building the rate averages). tqdm registered the bar in
`__new__`, before `__init__` set its position, so its `__del__` then fails (`'tqdm' object has no
attribute 'pos'`) and Python prints "Exception ignored in tqdm.__del__" with a traceback under the
command's "Interrupted" line. `Bar` is a tqdm whose finaliser leaves such a half-built bar alone;
`cli.output.end_progress` forgets it.

When stderr is no terminal (a log file, a pipe, `nohup`, CI), a bar's `\\r` redraws and block
characters would fill the log: `bar` then gives `Lines`, which writes one plain line each time what
the bar shows changes.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


class Bar(tqdm):
    def __del__(self) -> None:
        if hasattr(self, "pos"):  # built: closed as tqdm closes it
            super().__del__()


class Lines:
    """A bar for a stream that is no terminal: `desc: P% n/total unit postfix`, one line each time
    it changes (the same line is never written twice), no `\\r`, no block characters."""

    def __init__(self, total: int, desc: str, unit: str = "it", **_: Any) -> None:
        self.total, self.n, self.desc, self.unit = total, 0, desc, unit
        self.postfix = ""
        self._last: str | None = None

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text
        if refresh:
            self.refresh()

    def set_description_str(self, text: str, refresh: bool = True) -> None:
        self.desc = text
        if refresh:
            self.refresh()

    def refresh(self) -> None:
        share = f"{100 * self.n / self.total:3.0f}%" if self.total else "  ?%"
        line = f"{self.desc}: {share} {self.n}/{self.total} {self.unit} {self.postfix}".rstrip()
        if line != self._last:
            self._last = line
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        """Nothing to clear: every line written stays."""


def on_terminal() -> bool:
    """Whether stderr (where bars go) is a terminal that redraws a line in place."""
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def bar(**options: Any) -> Bar | Lines:
    """A tqdm `Bar` on a terminal, else `Lines`; the options are tqdm's."""
    return Bar(**options) if on_terminal() else Lines(**options)
