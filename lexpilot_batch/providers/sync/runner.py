"""The `sync` backend: a compiled batch request file run one request at a time, through its API's
synchronous call (`providers.sync.call`: OpenAI's `POST /chat/completions`, Anthropic's Messages,
Gemini's generateContent).

For providers without a Batch API (DeepSeek's, for one), and for the small groups `--tail-sync`
sends at once. The output file has the API's batch OUTPUT shape, so ingest reads it with the same
code as a downloaded one. For OpenAI's:

- answered: `{"id", "custom_id", "response": {"status_code": 200, "request_id", "body": <the raw
  chat.completion JSON>}, "error": null}`; the raw JSON keeps fields the SDK's models do not
  declare, such as DeepSeek's `reasoning_content`;
- refused (a 4xx that retrying will not fix, e.g. 400 or 422): `response` holds that status and the
  provider's `{"error": {...}}` body;
- failed after the SDK's own retries (timeouts, connection errors, 5xx): `response` null and
  `error` `{"code": "request_timeout" | "server_error" | "connection_error", "message"}`; the
  engine retries such a request as a new attempt.

Every string of a failure line is redacted before it is written (`redaction`): a gateway that
echoes the request's headers in its error body would otherwise put the key in `responses/`. Every
line, answers too, then passes a `redaction.Scrubber` (keys, key-shaped and bearer tokens), as a
downloaded batch's results do: the one change made to what the provider sent.

(Anthropic's and Gemini's lines are their batch results' own, `providers.sync.call`.)

Requests are streamed from the file, as many in flight as the `window.Window` of its (endpoint,
model, tier) allows, shared with the other files of that key sent at once (`at_once.Lane`): it
grows while answers come back with room left under the provider's rate limits and halves on a 429
or an answer whose `x-ratelimit-remaining-*` runs low, never past `concurrency` (the ceiling).
The calls in flight are tasks of one event loop (`at_once.run_files`: every file of a pass on
it), sent through the
SDK's asynchronous client (`ChatCall.asend`: OpenAI's and Anthropic's `Async*` clients, the genai
client's `aio` side), so a thousand in flight cost a thousand sockets and no thread each: the run
holds its own thread and at most `at_once.LOOP_THREADS` helpers of the loop (address lookups). A client
carries at most `CALLS_PER_CLIENT` of them; more open more clients, as the window grows. An API whose
SDK has no asynchronous client (`ChatCall.new_async_client` None) is sent from a pool whose threads
are made as the window first needs them, never more than the ceiling. Every wait of the loop goes
through the one clock (`clock.sleep`) and lasts at most `waiting.STEP`, so Ctrl-C stops a run at
once on every platform, cutting the calls in flight. Backoff on 429/5xx (honouring `retry-after`) is first
the SDK's, set by `max_retries`. A request still refused for the rate (429)
after those is no failure of its own: it is put back and sent again after a backoff of its own
(`retry-after`, else doubling from `RATE_LIMIT_WAIT`), never written as a failed line, so it uses
up none of its attempts. One refused `RATE_LIMIT_ROUNDS` times in a row stops the run with a
`ProviderUnavailable` ("nothing was lost"): the next run sends it again.

The flex tier (`flex=True`, `providers.routing.flex`): every body carries its API's tier field
(`routing.flex.tier_fields`: `service_tier`, generateContent's `serviceTier`), and a 429
means "resource unavailable" (no charge; OpenAI's advice is to back off and retry, or go
elsewhere). It is backed off the same way, from `FLEX_WAIT`; one request refused `FLEX_ROUNDS` times
in a row stops the run with `FlexRefused`, the lines saved until then kept, so that the engine can
send the rest of the file's requests as a batch (`engine.poll`). The output is appended one whole line at a time
by the loop's one thread, so a run can be killed at any moment and resumed: a request whose line is saved is
never sent again, and a line cut by the kill is dropped and its request sent again.

A broken endpoint must not become thousands of error lines. A rejected key (401) stops the run at
once. Failures that can mean the endpoint as a whole is wrong or down (403, 404, and transport
failures that outlasted the retries) are held back while they come in an unbroken streak: the
first `PROBE` requests all failing so, or later `2 × concurrency` in a row, stops the run with a
`ConfigError` / `ProviderError` and none of the streak is written, so the next run sends those
requests again. A success, or a request-specific refusal such as a 400, ends a streak, and the
held failures are then written as ordinary lines.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import math
import os
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from lexpilot_batch.errors import ConfigError, LexpilotError, ProviderUnavailable
from lexpilot_batch.providers.file_batch import retry_after
from lexpilot_batch.providers.registry import BARE, chat_call
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.routing.flex import tier_fields
from lexpilot_batch.providers.sync import window as windows
from lexpilot_batch.providers.sync.at_once import Lane, SyncJob, run_files
from lexpilot_batch.providers.sync.call import FATAL, RATE, SUSPECT, CallResult, ChatCall
from lexpilot_batch.providers.sync.lines import count_requests, first_model, read_requests, saved_custom_ids
from lexpilot_batch.util import clock
from lexpilot_batch.util.redaction import Scrubber, redact_data
from lexpilot_batch.util.waiting import STEP

PROBE = 3  # failures in a row, before any success, that stop a run
SYNC_RETRIES = 5  # the SDK's retries of one request (timeouts, connection errors, 429, 5xx)
RATE_LIMIT_ROUNDS = 8  # 429s after the SDK's retries, for one request, that stop a run
RATE_LIMIT_WAIT = 1.0  # seconds before a 429'd request is sent again (doubling, capped at 60 s)
FLEX_ROUNDS = 6  # 429s in a row for one request on the flex tier: the file's rest goes to a batch
FLEX_WAIT = 2.0  # seconds before a refused flex call is sent again (doubling, capped at 60 s)
RATE_BACKOFF = clock.Backoff(RATE_LIMIT_WAIT, 60.0)
FLEX_BACKOFF = clock.Backoff(FLEX_WAIT, 60.0)
# Calls in flight per asynchronous client: a client's connection pool looks over all its connections
# at each request (httpcore's), so a thousand in flight go through ten clients, not one.
CALLS_PER_CLIENT = 100
FSYNC_EVERY = 100  # lines between fsyncs; a crash loses at most these, and resume re-sends them


class FlexRefused(ProviderUnavailable):
    """The flex tier kept refusing a file's requests for want of capacity (`FLEX_ROUNDS`)."""


@dataclass
class SyncStats:
    """`total` request lines; `already_done` saved before this run; `sent` calls finished in this
    run (each counted once, whatever the SDK retried); `ok` / `failed` lines written by it."""

    total: int = 0
    already_done: int = 0
    sent: int = 0
    ok: int = 0
    failed: int = 0
    rate_limited: int = 0  # 429s after the SDK's retries, each sent again
    peak_in_flight: int = 0  # the most calls in flight at once (`window.Window`)
    window_cuts: int = 0  # times the window halved (429s, or rate limits running low)
    redacted: int = 0  # secrets replaced in the lines written (`redaction.Scrubber`)
    stopped: bool = False  # `may_start` said no before every request was sent: run again later
    ended_at: float | None = None  # when its run ended (`clock.now`)


class SyncRunner:
    """Runs request files against one endpoint's synchronous call of one API shape (`providers.sync.call`)."""

    def __init__(
        self,
        endpoint: Endpoint,
        concurrency: int = 8,
        timeout: float = 120.0,
        max_retries: int = SYNC_RETRIES,
        api: str = BARE.name,
        model: str = "",
        flex: bool = False,
    ) -> None:
        """`api` is the shape of the files' lines (`registry.Provider.api`); `model` the model as sent,
        for an API whose lines do not name it (Gemini's); `flex`: on the flex tier; `concurrency`:
        the most calls in flight (`window.Window`'s ceiling)."""
        if concurrency < 1:
            raise ConfigError(f"the sync backend needs a concurrency of at least 1, not {concurrency}")
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.flex = flex
        self.extra = tier_fields(api) if flex else {}
        self.call: ChatCall = chat_call(api, endpoint, timeout, max_retries, model)

    def key(self, request_path: Path) -> tuple[str, str, bool]:
        """(endpoint, model, tier) of a file: what one rate limit, and so one window, covers."""
        return (self.endpoint.base_url, first_model(request_path, self.call), self.flex)

    def run(
        self,
        request_path: Path,
        output_path: Path,
        on_progress: Callable[[int, int], None] | None = None,
        may_start: Callable[[], bool] | None = None,
    ) -> SyncStats:
        """Send every request of `request_path` that `output_path` does not answer yet: `run_files`
        with this one file (`SyncJob` says what the arguments are). Raises what stopped it:
        `ConfigError` / `ProviderError` when the endpoint as a whole fails (see the module
        docstring); the lines written until then stay, and running again resumes."""
        outcome = run_files([SyncJob(self, request_path, output_path, on_progress, may_start)])[0]
        if isinstance(outcome, LexpilotError):
            raise outcome
        return outcome

    async def arun(self, job: SyncJob, lanes: dict[Hashable, Lane]) -> SyncStats:
        """`job`'s file sent on the running loop, its calls in the `Lane` of its key in `lanes` (made
        here for the first file of the key), which the files of that key share."""
        call = self.call
        request_path, output_path, on_progress = job.request_path, job.output_path, job.on_progress
        saved = saved_custom_ids(output_path, call.id_key)
        total, already = count_requests(request_path, saved, call)
        stats = SyncStats(total=total, already_done=already)
        if on_progress:
            on_progress(already, total)
        output_path.parent.mkdir(parents=True, exist_ok=True)
        if already == total:
            output_path.touch()  # the engine ingests a file even when nothing was left to send
            stats.ended_at = clock.now()
            return stats
        key = self.key(request_path)
        lane = lanes.get(key) or lanes.setdefault(key, Lane(windows.learned(key, self.concurrency)))
        cuts = lane.window.cuts
        requests = read_requests(request_path, call)
        extra = self.extra
        todo = ((cid, {**body, **extra} if extra else body) for cid, body in requests if cid not in saved)
        with open(output_path, "ab") as out:
            state = _Run(self, request_path.name, out, stats, on_progress)
            try:
                await self._send_all(todo, state, lane, job.may_start)
                stats.window_cuts = lane.window.cuts - cuts
                if state.fatal is not None:
                    raise state.fatal
                state.finish()
            finally:
                requests.close()
                out.flush()
                os.fsync(out.fileno())
        stats.ended_at = clock.now()
        return stats

    async def _send_all(
        self,
        todo: Iterator[tuple[str, dict[str, Any]]],
        state: _Run,
        lane: Lane,
        may_start: Callable[[], bool] | None = None,
    ) -> None:
        """Send `todo`, as many in flight as `lane` has room for, each answer taken (`_Run.take`) as it
        lands, until all are answered, the run must stop (a fatal outcome) or `may_start` says no
        more may begin (`stats.stopped`: those in flight are waited for). The calls are tasks of
        this loop through the SDK's asynchronous client (`ChatCall.asend`); an API whose SDK has
        none sends them from a pool whose threads are made as the window first needs them."""
        call, stats, name, window = self.call, state.stats, state.file_name, lane.window
        client = call.new_async_client()
        clients = [] if client is None else [client]
        shards = math.ceil(self.concurrency / CALLS_PER_CLIENT)
        threads = None if client is not None else ThreadPoolExecutor(self.concurrency, "lexpilot-sync")
        loop = asyncio.get_running_loop()
        in_flight: dict[asyncio.Future[CallResult], int] = {}  # each call's window ticket
        landed: deque[asyncio.Future[CallResult]] = deque()  # calls ended, in the order they ended
        wake = lane.join()
        later: list[tuple[float, str, dict[str, Any]]] = []  # (not before, custom_id, body): 429s
        refusals: dict[str, int] = {}
        exhausted = False  # every line of `todo` sent once

        def ended(future: asyncio.Future[CallResult]) -> None:
            landed.append(future)
            wake.set()

        def send(custom_id: str, body: dict[str, Any]) -> None:
            future: asyncio.Future[CallResult]
            ticket = window.ticket(windows.call_tokens(body))  # its tokens: the stated limits' width
            if threads is None:
                if len(clients) < shards and len(in_flight) >= len(clients) * CALLS_PER_CLIENT:
                    clients.append(call.new_async_client())
                shard = clients[ticket % len(clients)]
                future = asyncio.ensure_future(call.asend(shard, custom_id, body))
            else:
                future = loop.run_in_executor(threads, call.send, custom_id, body)
            in_flight[future] = ticket
            lane.busy += 1
            future.add_done_callback(ended)
            stats.peak_in_flight = max(stats.peak_in_flight, len(in_flight))

        finished = False
        try:
            while state.fatal is None:
                # At most the window in flight, this key's files together: the file is read only as
                # fast as it is sent.
                while lane.room():
                    if may_start is not None and not may_start():
                        stats.stopped = True
                        break
                    if later and later[0][0] <= clock.monotonic():
                        _, custom_id, body = heapq.heappop(later)
                        send(custom_id, body)
                        continue
                    item = next(todo, None)
                    if item is None:
                        exhausted = True
                        break
                    send(*item)
                if not in_flight and (stats.stopped or (exhausted and not later)):
                    break
                if not landed:
                    # Until a call of this file ends, or of another file of the key (`Lane.ended`),
                    # or a request backing off is due and the window has room for it.
                    room = later and lane.room()
                    await _until(wake, later[0][0] - clock.monotonic() if room else None)
                wake.clear()
                while landed:
                    future = landed.popleft()
                    ticket = in_flight.pop(future)
                    lane.ended()
                    result = future.result()
                    if result.kind != RATE:
                        window.answered(ticket, result.headers)
                        state.take(result)
                        continue
                    window.refused(ticket)
                    stats.rate_limited += 1
                    count = refusals[result.custom_id] = refusals.get(result.custom_id, 0) + 1
                    if self.flex and count >= FLEX_ROUNDS:
                        state.fatal = state.fatal or FlexRefused(
                            f"sending {name} on the flex tier: the {self.endpoint.where} answered "
                            f"429 (resource unavailable) {count} times for one request; its other requests go "
                            "as a batch"
                        )
                        continue
                    if count >= RATE_LIMIT_ROUNDS:
                        state.fatal = state.fatal or ProviderUnavailable(
                            f"sending {name}: the {self.endpoint.where} kept refusing requests for "
                            f"the rate (HTTP 429, {count} times for one request, each after the SDK's retries); "
                            "nothing was lost, run the same command again later (or with a lower --concurrency)"
                        )
                        continue
                    schedule = FLEX_BACKOFF if self.flex else RATE_BACKOFF
                    wait_s = schedule.wait(count - 1, retry_after(result.exc))
                    assert result.body is not None
                    heapq.heappush(later, (clock.monotonic() + wait_s, result.custom_id, result.body))
            finished = state.fatal is None
        finally:
            try:
                if not finished:
                    # Cut what is in flight (a stop, an error, Ctrl-C), so as not to wait out long calls; what
                    # they would have answered is not written, and the next run sends them again.
                    for future in in_flight:
                        future.cancel()
                    if threads is not None:
                        call.reset()  # closing the client ends its threads' connections
                if in_flight and clients:
                    await asyncio.wait(in_flight)
                for opened in clients:
                    await call.close_async_client(opened)
                if threads is not None:
                    threads.shutdown(wait=finished, cancel_futures=True)
            finally:
                lane.ended(len(in_flight))
                lane.leave(wake)


async def _until(wake: asyncio.Event, due: float | None) -> None:
    """Until a call ends (`wake`), `due` seconds pass on the one clock (`clock.sleep`: a request's
    backoff ends; None: no such wait) or `waiting.STEP` seconds, whichever comes first: a loop that
    wakes in steps acts on Ctrl-C within a step on every platform, as `util.waiting`'s waits do."""
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(wake.wait())]
    if due is not None:
        waits.append(asyncio.ensure_future(clock.sleep(due)))
    try:
        await asyncio.wait(waits, timeout=STEP, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()


class _Run:
    """One `run`'s bookkeeping: writing lines, and the streak of held-back failures."""

    def __init__(
        self,
        runner: SyncRunner,
        file_name: str,
        out: BinaryIO,
        stats: SyncStats,
        on_progress: Callable[[int, int], None] | None,
    ) -> None:
        self.runner = runner
        self.file_name = file_name
        self.out = out
        self.stats = stats
        self.on_progress = on_progress
        self.healthy = False  # a request was answered or refused on its merits
        self.held: list[CallResult] = []
        self.fatal: LexpilotError | None = None
        self.unsynced = 0
        self.scrubber = Scrubber()

    def take(self, result: CallResult) -> None:
        self.stats.sent += 1
        if result.kind == FATAL:
            self.fatal = self.fatal or self._error(result, f"sending {self.file_name}")
        elif result.kind == SUSPECT:
            if self.fatal is not None:
                return  # stopping: like the streak, this request is sent again next run
            self.held.append(result)
            limit = max(PROBE, 2 * self.runner.concurrency) if self.healthy else PROBE
            if len(self.held) >= limit:
                if self.healthy:
                    what = f"sending {self.file_name}: {len(self.held)} requests in a row failed"
                else:
                    what = f"sending {self.file_name}: the first {len(self.held)} requests all failed"
                self.fatal = self._error(result, what)
        else:
            self.healthy = True
            if self.fatal is None:
                self._flush_held()
            self._write(result)

    def finish(self) -> None:
        if self.held and not self.healthy:
            n = len(self.held)
            what = f"sending {self.file_name}: {'the only request' if n == 1 else f'all {n} requests'} failed"
            raise self._error(self.held[-1], what)
        self._flush_held()

    def _flush_held(self) -> None:
        for held in self.held:
            self._write(held)
        self.held.clear()

    def _write(self, result: CallResult) -> None:
        assert result.line is not None
        answered = self.runner.call.answered(result.line)
        # A failure line quotes what the provider or the SDK said, which may echo the request's
        # headers (the key) or the URL's credentials; an answer is data and is kept as it came,
        # but for a key in it, replaced as in a downloaded batch's results (`redaction.Scrubber`).
        line = result.line if answered else redact_data(result.line)
        data = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        before = self.scrubber.replaced
        data = self.scrubber.feed(data) + self.scrubber.close()
        self.stats.redacted += self.scrubber.replaced - before
        self.out.write(data)  # one whole line, from this one thread
        self.out.flush()
        self.unsynced += 1
        if self.unsynced >= FSYNC_EVERY:
            os.fsync(self.out.fileno())
            self.unsynced = 0
        if answered:
            self.stats.ok += 1
        else:
            self.stats.failed += 1
        if self.on_progress:
            self.on_progress(self.stats.already_done + self.stats.ok + self.stats.failed, self.stats.total)

    def _error(self, result: CallResult, what: str) -> LexpilotError:
        error = self.runner.call.error(result, what)
        if error is not None:
            return error
        return ProviderUnavailable(
            f"{what}: the {self.runner.endpoint.where} answered without a usable body; "
            "nothing was lost, run the same command again later"
        )
