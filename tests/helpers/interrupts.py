"""Ctrl-C as Windows delivers it, on Linux: for the tests that every wait of the product gives way to it.

On Windows before Python 3.14 a thread waiting on a lock without a timeout (`Future.result()`,
`concurrent.futures.wait`, `Event.wait()`) is not woken by Ctrl-C: the signal handler runs only
once the wait ends (CPython gh-125541). POSIX wakes it, so on Linux such a wait would pass any test
that presses Ctrl-C. `ctrl_c_as_on_windows` makes Linux behave as Windows: SIGINT is blocked in the
test's thread and raised `after` seconds in on a helper thread, whose C-level handler only marks it
pending; the test's thread runs the Python handler (a `KeyboardInterrupt`) when it next executes
bytecode — at once when it waits in steps (`util.waiting`), only when the wait ends otherwise.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import pytest

needs_sigmask = pytest.mark.skipif(
    not hasattr(signal, "pthread_sigmask"), reason="simulates Windows' Ctrl-C with POSIX signal masks"
)

# How soon Ctrl-C must be acted on; the blocking calls of the tests last several times longer.
PROMPT = 1.0


class Pressed:
    """When Ctrl-C was pressed: a test measures how soon it was acted on from there, not from its
    own start (a loaded machine can take most of a second to set a test up)."""

    at: float | None = None

    def since(self) -> float:
        assert self.at is not None, "Ctrl-C was not pressed"
        return time.monotonic() - self.at


@contextmanager
def ctrl_c_as_on_windows(after: float = 0.3) -> Iterator[Pressed]:
    """Ctrl-C `after` seconds into the block, which only a wait in steps sees before it ends."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handler)

    pressed = Pressed()

    def press() -> None:
        time.sleep(after)
        pressed.at = time.monotonic()
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # to this thread, which does not block it

    presser = threading.Thread(target=press, name="ctrl-c")
    presser.start()  # before the mask: a thread inherits its creator's
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield pressed
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        presser.join()
        signal.signal(signal.SIGINT, previous)
