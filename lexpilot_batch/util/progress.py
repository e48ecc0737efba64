"""The product's progress bars: tqdm's, except for what a bar interrupted while it was built does.

A Ctrl-C can land inside `tqdm.__init__` (the random Ctrl-C campaign of
`tests/scenarios/test_crash.py` found it building the rate averages). tqdm registered the bar in
`__new__`, before `__init__` set its position, so its `__del__` then fails (`'tqdm' object has no
attribute 'pos'`) and Python prints "Exception ignored in tqdm.__del__" with a traceback under the
command's "Interrupted" line. `Bar` is a tqdm whose finaliser leaves such a half-built bar alone;
`cli.output.end_progress` forgets it.
"""

from __future__ import annotations

from tqdm import tqdm


class Bar(tqdm):
    def __del__(self) -> None:
        if hasattr(self, "pos"):  # built: closed as tqdm closes it
            super().__del__()
