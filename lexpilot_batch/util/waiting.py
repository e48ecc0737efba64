"""Waiting for another thread in short steps, so that Ctrl-C stops the wait on Windows too.

On Windows before Python 3.14 a wait on a lock without a timeout — `Future.result()`,
`concurrent.futures.wait`, `Event.wait()`, `Thread.join()`, `Queue.get()` — is not interrupted by
Ctrl-C: the signal is noted, but its `KeyboardInterrupt` is raised only once the wait ends, which
for a slow provider call can be minutes (CPython gh-125541, fixed in 3.14 for locks and events;
bpo-29971). POSIX interrupts such waits. A wait with a timeout returns to the interpreter at each
timeout, which runs the pending signal handler then; so every wait here is a loop of waits of at
most `STEP` seconds, and Ctrl-C is acted on within `STEP` on every platform. (`time.sleep` is
interruptible on Windows already.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, wait
from typing import Any, TypeVar

T = TypeVar("T")

# Short enough that Ctrl-C feels immediate, long enough that a wait costs nothing.
STEP = 0.2


def wait_first(
    futures: Iterable[Future[Any]], timeout: float | None = None
) -> tuple[set[Future[Any]], set[Future[Any]]]:
    """`concurrent.futures.wait(futures, timeout, return_when=FIRST_COMPLETED)`, in steps: (done,
    not done), done empty only once `timeout` (None: no limit) has passed."""
    return _wait(futures, timeout, FIRST_COMPLETED)


def wait_all(futures: Iterable[Future[Any]]) -> None:
    """Until every future has finished (raised, cancelled or returned); raises nothing of theirs."""
    _wait(futures, None, ALL_COMPLETED)


def result(future: Future[T]) -> T:
    """`future.result()`, in steps: what it returned, or what it raised.

    Not a loop of `result(timeout=STEP)` catching `TimeoutError`: a worker that raises a
    `TimeoutError` of its own (a socket's) would make that loop wait for ever."""
    wait_all([future])
    return future.result()


def join(thread: threading.Thread, timeout: float | None = None) -> None:
    """`thread.join(timeout)`, in steps (whether it ended: `thread.is_alive()`, as after `join`)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while thread.is_alive():
        left = STEP if deadline is None else min(STEP, deadline - time.monotonic())
        if left <= 0:
            return
        thread.join(left)


def _wait(
    futures: Iterable[Future[Any]], timeout: float | None, return_when: str
) -> tuple[set[Future[Any]], set[Future[Any]]]:
    fs = set(futures)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = STEP if deadline is None else max(0.0, min(STEP, deadline - time.monotonic()))
        done, pending = wait(fs, timeout=left, return_when=return_when)
        if not pending or (done and return_when == FIRST_COMPLETED):
            return done, pending
        if deadline is not None and time.monotonic() >= deadline:
            return done, pending
