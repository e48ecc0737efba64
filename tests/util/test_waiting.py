"""Waits in steps: what each returns is what the bare wait returns, and Ctrl-C, delivered as
Windows delivers it (`helpers.interrupts`), stops each within a second of a wait that lasts longer."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from lexpilot_batch.util import waiting
from tests.helpers.interrupts import PROMPT, ctrl_c_as_on_windows, needs_sigmask

LONG = 5.0  # how long the blocking work would last: several times PROMPT


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set when the test ends, so that no worker outlives it by LONG seconds."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=2)
    yield executor
    executor.shutdown(wait=False, cancel_futures=True)


def test_results_and_errors_are_those_of_the_future(pool: ThreadPoolExecutor) -> None:
    assert waiting.result(pool.submit(lambda: 42)) == 42

    def times_out() -> None:
        raise TimeoutError("the socket's own")  # not taken for the wait's timeout (a loop for ever)

    with pytest.raises(TimeoutError, match="the socket's own"):
        waiting.result(pool.submit(times_out))


def test_wait_first_returns_the_first_finished_or_nothing_at_its_timeout(
    pool: ThreadPoolExecutor, release: threading.Event
) -> None:
    slow = pool.submit(release.wait, LONG)
    start = time.monotonic()
    done, pending = waiting.wait_first([slow], timeout=0.5)
    assert (done, pending) == (set(), {slow}) and 0.45 <= time.monotonic() - start < 0.5 + waiting.STEP
    quick = pool.submit(lambda: None)
    done, pending = waiting.wait_first([slow, quick])
    assert (done, pending) == ({quick}, {slow})
    assert waiting.wait_first([]) == (set(), set())


def test_join_stops_at_its_timeout(release: threading.Event) -> None:
    thread = threading.Thread(target=release.wait, args=(LONG,))
    thread.start()
    start = time.monotonic()
    waiting.join(thread, timeout=0.3)
    assert thread.is_alive() and time.monotonic() - start < 0.3 + waiting.STEP
    release.set()
    waiting.join(thread)
    assert not thread.is_alive()


@needs_sigmask
@pytest.mark.parametrize("how", ["result", "wait_first", "wait_all", "join"])
def test_ctrl_c_stops_every_wait_at_once(how: str, pool: ThreadPoolExecutor, release: threading.Event) -> None:
    future: Future[bool] = pool.submit(release.wait, LONG)
    thread = threading.Thread(target=release.wait, args=(LONG,))
    thread.start()
    with pytest.raises(KeyboardInterrupt), ctrl_c_as_on_windows() as pressed:
        if how == "result":
            waiting.result(future)
        elif how == "wait_first":
            waiting.wait_first([future])
        elif how == "wait_all":
            waiting.wait_all([future])
        else:
            waiting.join(thread)
    assert pressed.since() < PROMPT


@needs_sigmask
def test_the_simulation_holds_a_bare_wait_until_it_ends(pool: ThreadPoolExecutor) -> None:
    """The control: what `ctrl_c_as_on_windows` does to a wait without a timeout, as on Windows."""
    future = pool.submit(time.sleep, 1.5)
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt), ctrl_c_as_on_windows():
        future.result()
    assert time.monotonic() - start >= 1.4
