"""The sync and flex files of a poll pass sent at once (`run_files`): one event loop, whose tasks
are every file's calls in flight (`runner.SyncRunner.arun`).

Files of different (endpoint, model, tier) run in parallel, each key's calls bounded by its one
adaptive window (`window.Window`), which every file of the key shares through its `Lane`:
`--concurrency` is the ceiling of each key, the calls in flight to one model, as each model has its
own rate limits (a pass of three models may hold three times the ceiling in all). A file keeps
everything it has alone: its output appended one whole line at a time, its streak of failures, its
`may_start` hook, its fatal outcome (`FlexRefused`, a rejected key, an endpoint that is down), which
stops that file and no other. An error that is not a file's own (Ctrl-C, a bug) stops them all at
once, as a kill would: their calls are cut, their saved lines kept, and the next run sends the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.sync import window as windows

if TYPE_CHECKING:
    from lexpilot_batch.providers.sync.runner import SyncRunner, SyncStats

LOOP_THREADS = 8  # the event loop's own helpers (its default executor: address lookups for new connections)


@dataclass
class SyncJob:
    """One file for `run_files`: its requests, the output file its answers are appended to, and the
    engine's hooks: `on_progress(saved, total)`, called at the start and after every line written;
    `may_start()` (`engine.off_peak`), asked before each call: once it says no, no call of the file
    is started, those in flight finish, and its run returns `stopped` (its other requests are sent
    by a later run, as after a kill)."""

    runner: SyncRunner
    request_path: Path
    output_path: Path
    on_progress: Callable[[int, int], None] | None = None
    may_start: Callable[[], bool] | None = None


class Lane:
    """The calls in flight of one (endpoint, model, tier) in one `run_files`: its window
    (`window.Window`, `--concurrency` its ceiling), shared by every file of the key, so that the
    files of one model together hold at most the window; a call that ends wakes each file's loop,
    so that the room it leaves is taken by whichever file has calls to send."""

    def __init__(self, window: windows.Window) -> None:
        self.window = window
        self.busy = 0  # calls of the key's files in flight
        self._wakes: list[asyncio.Event] = []

    def room(self) -> bool:
        return self.busy < self.window.limit()

    def join(self) -> asyncio.Event:
        """A file's wake-up: set when a call of any file of the key ends."""
        wake = asyncio.Event()
        self._wakes.append(wake)
        return wake

    def leave(self, wake: asyncio.Event) -> None:
        self._wakes.remove(wake)

    def ended(self, calls: int = 1) -> None:
        self.busy -= calls
        for wake in self._wakes:
            wake.set()


def run_files(jobs: Sequence[SyncJob]) -> list[SyncStats | LexpilotError]:
    """Send the files of `jobs` at once, as tasks of one event loop (the module docstring), what each
    key's window learned kept for the next run of the key (`window.keep`).

    One outcome per job, in order: its `SyncStats`, or the `LexpilotError` that stopped it
    (`FlexRefused`, a fatal endpoint error), which stops no other file. Anything else (Ctrl-C, a
    bug) stops every file at once, as a kill would, their calls cut and their saved lines kept."""
    lanes: dict[Hashable, Lane] = {}

    async def one(job: SyncJob) -> SyncStats | LexpilotError:
        try:
            return await job.runner.arun(job, lanes)
        except LexpilotError as error:
            return error

    async def everything() -> list[SyncStats | LexpilotError]:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(LOOP_THREADS, "lexpilot-loop"))
        return await asyncio.gather(*(one(job) for job in jobs))  # another error: `asyncio.run` cuts the rest

    try:
        return asyncio.run(everything())
    finally:
        for key, lane in lanes.items():
            windows.keep(key, lane.window)
