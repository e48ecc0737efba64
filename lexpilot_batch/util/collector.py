"""Pausing Python's cyclic garbage collector around a long, allocation-heavy pass.

Compiling a wave and ingesting a batch's results create hundreds of thousands of short-lived
objects (rows, parsed lines, prompt pieces) and almost no reference cycles: reference counting
frees them all, yet every 700 allocations the cycle collector walks the young objects, and now and
then every object the process holds (the held requests of `engine.settled` among them). Paused for
the pass, it costs nothing there; it runs again, as before, once the pass ends. Measured on the 1x
bench: about a tenth of a compile's time (`docs/performance.md`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside; the collector is left as it was found (a caller that already
    paused it keeps it paused)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
