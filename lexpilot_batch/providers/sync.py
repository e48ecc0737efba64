"""The `sync` backend: a compiled batch request file run through `POST /chat/completions`.

For providers without a Batch API (DeepSeek's, for one). The output file has the batch OUTPUT
shape, so ingest reads it with the same code as a downloaded one:

- answered: `{"id", "custom_id", "response": {"status_code": 200, "request_id", "body": <the raw
  chat.completion JSON>}, "error": null}`; the raw JSON keeps fields the SDK's models do not
  declare, such as DeepSeek's `reasoning_content`;
- refused (a 4xx that retrying will not fix, e.g. 400 or 422): `response` holds that status and the
  provider's `{"error": {...}}` body;
- failed after the SDK's own retries (timeouts, connection errors, 5xx): `response` null and
  `error` `{"code": "request_timeout" | "server_error" | "connection_error", "message"}`; the
  engine retries such a request as a new attempt.

Requests are streamed from the file, a bounded number at a time; backoff on 429/5xx (honouring
`retry-after`) is the SDK's, set by `max_retries`. A request still refused for the rate (429)
after those is no failure of its own: it is put back and sent again after a backoff of its own
(`retry-after`, else doubling from `RATE_LIMIT_WAIT`), never written as a failed line, so it uses
up none of its attempts. One refused `RATE_LIMIT_ROUNDS` times in a row stops the run with a
`ProviderError` ("nothing was lost"): the next run sends it again. The output is appended one whole line at a time
by one thread, so a run can be killed at any moment and resumed: a request whose line is saved is
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

import heapq
import json
import os
import time
import uuid
from collections.abc import Callable, Generator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import openai

from lexpilot_batch.config import Endpoint
from lexpilot_batch.errors import ConfigError, LexpilotError, ProviderError
from lexpilot_batch.providers.errors import error_message, translate

try:  # the HTTP library under the SDK: httpx2 from openai 3, httpx before
    import httpx2 as _http
except ImportError:  # pragma: no cover - depends on the installed SDK
    import httpx as _http  # type: ignore[no-redef]

PROBE = 3  # failures in a row, before any success, that stop a run
RATE_LIMIT_ROUNDS = 8  # 429s after the SDK's retries, for one request, that stop a run
RATE_LIMIT_WAIT = 1.0  # seconds before a 429'd request is sent again (doubling, capped at 60 s)
FSYNC_EVERY = 100  # lines between fsyncs; a crash loses at most these, and resume re-sends them
ROUTE = "/chat/completions"
CLIENT_REQUEST_ID = "X-Client-Request-Id"  # at most 512 ASCII characters; a custom_id has at most 64

# What a finished call means for the run.
_OK = "ok"  # 200: the route works
_REFUSED = "refused"  # a request-specific 4xx: written, and the route works
_SUSPECT = "suspect"  # may mean the whole endpoint is wrong or down: held while in a streak
_FATAL = "fatal"  # the key was rejected: stop now
_RATE = "rate_limited"  # refused for the rate: sent again later, never written


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


@dataclass(frozen=True)
class _Result:
    custom_id: str
    kind: str
    line: dict[str, Any] | None
    model: str = ""
    exc: Exception | None = None
    body: dict[str, Any] | None = None  # kept for a request sent again (rate-limited)


class SyncRunner:
    """Runs request files against one endpoint's `/chat/completions`."""

    def __init__(self, endpoint: Endpoint, concurrency: int = 8, timeout: float = 120.0, max_retries: int = 5) -> None:
        if concurrency < 1:
            raise ConfigError(f"the sync backend needs a concurrency of at least 1, not {concurrency}")
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.client = self._new_client()

    def _new_client(self) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.require_key(),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def run(
        self,
        request_path: Path,
        output_path: Path,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> SyncStats:
        """Send every request of `request_path` that `output_path` does not answer yet.

        `on_progress(saved, total)` is called at the start and after every line written.
        Raises `ConfigError` / `ProviderError` when the endpoint as a whole fails (see the module
        docstring); the lines written until then stay, and running again resumes.
        """
        saved = saved_custom_ids(output_path)
        total, already = _count(request_path, saved)
        stats = SyncStats(total=total, already_done=already)
        if on_progress:
            on_progress(already, total)
        output_path.parent.mkdir(parents=True, exist_ok=True)
        if already == total:
            output_path.touch()  # the engine ingests a file even when nothing was left to send
            return stats
        requests = _requests(request_path)
        todo = (r for r in requests if r[0] not in saved)
        later: list[tuple[float, str, dict[str, Any]]] = []  # (not before, custom_id, body): 429s
        refusals: dict[str, int] = {}
        client = self.client
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="lexpilot-sync")
        pending: set[Future[_Result]] = set()
        finished_cleanly = False
        with open(output_path, "ab") as out:
            state = _Run(self, request_path.name, out, stats, on_progress)
            try:
                while state.fatal is None:
                    # At most 2 × concurrency submitted: the file is read only as fast as it is sent.
                    while len(pending) < 2 * self.concurrency:
                        now = time.monotonic()
                        if later and later[0][0] <= now:
                            _, custom_id, body = heapq.heappop(later)
                            pending.add(pool.submit(self._send, client, custom_id, body))
                            continue
                        item = next(todo, None)
                        if item is None:
                            break
                        pending.add(pool.submit(self._send, client, *item))
                    if not pending:
                        if not later:
                            break
                        time.sleep(max(0.0, later[0][0] - time.monotonic()))
                        continue
                    done, pending = wait(
                        pending,
                        timeout=max(0.0, later[0][0] - time.monotonic()) if later else None,
                        return_when=FIRST_COMPLETED,
                    )
                    for future in done:
                        result = future.result()
                        if result.kind != _RATE:
                            state.take(result)
                            continue
                        stats.rate_limited += 1
                        count = refusals[result.custom_id] = refusals.get(result.custom_id, 0) + 1
                        if count >= RATE_LIMIT_ROUNDS:
                            state.fatal = state.fatal or ProviderError(
                                f"sending {request_path.name}: the {self.endpoint.where} kept refusing requests for "
                                f"the rate (HTTP 429, {count} times for one request, each after the SDK's retries); "
                                "nothing was lost, run the same command again later (or with a lower --concurrency)"
                            )
                            continue
                        wait_s = _retry_after(result.exc) or min(RATE_LIMIT_WAIT * 2 ** (count - 1), 60.0)
                        assert result.body is not None
                        heapq.heappush(later, (time.monotonic() + wait_s, result.custom_id, result.body))
                if state.fatal is not None:
                    raise state.fatal
                state.finish()
                finished_cleanly = True
            finally:
                requests.close()
                if not finished_cleanly:
                    # Drop what is queued and cut what is in flight (closing the client ends its
                    # connections), so that an error or Ctrl-C does not wait out long calls.
                    for future in pending:
                        future.cancel()
                    client.close()
                    self.client = self._new_client()
                pool.shutdown(wait=finished_cleanly, cancel_futures=True)
                out.flush()
                os.fsync(out.fileno())
        return stats

    def _send(self, client: openai.OpenAI, custom_id: str, body: dict[str, Any]) -> _Result:
        """One request, through the SDK's retries; never raises for an HTTP or network failure."""
        model = str(body.get("model", ""))
        try:
            # The low-level post sends the body exactly as compiled (the batch API's contract) and
            # returns the raw response, whose JSON keeps every field the provider sent. The custom_id
            # goes along as the client's id of the call (OpenAI logs it for support; the simulated
            # provider answers by it exactly as a batch line with that custom_id is answered).
            response = client.post(
                ROUTE, cast_to=_http.Response, body=body, options={"headers": {CLIENT_REQUEST_ID: custom_id}}
            )
        except openai.AuthenticationError as exc:
            return _Result(custom_id, _FATAL, None, model, exc)
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status == 429:
                return _Result(custom_id, _RATE, None, model, exc, body)
            if status == 408:
                return _Result(custom_id, _SUSPECT, self._failure(custom_id, "request_timeout", exc), model, exc)
            if status == 409 or status >= 500:
                return _Result(custom_id, _SUSPECT, self._failure(custom_id, "server_error", exc), model, exc)
            line = _line(custom_id, status, exc.request_id, _error_body(exc))
            kind = _SUSPECT if status in (403, 404) else _REFUSED
            return _Result(custom_id, kind, line, model, exc)
        except openai.APITimeoutError as exc:
            return _Result(custom_id, _SUSPECT, self._failure(custom_id, "request_timeout", exc), model, exc)
        except openai.APIConnectionError as exc:
            return _Result(custom_id, _SUSPECT, self._failure(custom_id, "connection_error", exc), model, exc)
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            message = f"HTTP {response.status_code} with a body that is not a JSON object"
            return _Result(custom_id, _SUSPECT, _error_line(custom_id, "server_error", message), model)
        return _Result(
            custom_id, _OK, _line(custom_id, response.status_code, response.headers.get("x-request-id"), data)
        )

    def _failure(self, custom_id: str, code: str, exc: openai.APIError) -> dict[str, Any]:
        retries = f"after {self.max_retries} retries"
        if isinstance(exc, openai.APIStatusError):
            message = f"HTTP {exc.status_code} {retries}: {error_message(exc)}"
        elif isinstance(exc, openai.APITimeoutError):
            message = f"no answer within {self.timeout:g} s, {retries}"
        else:
            message = f"could not connect to {self.endpoint.base_url}, {retries}: {exc.__cause__ or exc}"
        return _error_line(custom_id, code, message)


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
        self.held: list[_Result] = []
        self.fatal: LexpilotError | None = None
        self.unsynced = 0

    def take(self, result: _Result) -> None:
        self.stats.sent += 1
        if result.kind == _FATAL:
            self.fatal = self.fatal or self._error(result, f"sending {self.file_name}")
        elif result.kind == _SUSPECT:
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

    def _write(self, result: _Result) -> None:
        assert result.line is not None
        data = (json.dumps(result.line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        self.out.write(data)  # one whole line, from this one thread
        self.out.flush()
        self.unsynced += 1
        if self.unsynced >= FSYNC_EVERY:
            os.fsync(self.out.fileno())
            self.unsynced = 0
        response = result.line.get("response")
        if isinstance(response, dict) and response.get("status_code") == 200:
            self.stats.ok += 1
        else:
            self.stats.failed += 1
        if self.on_progress:
            self.on_progress(self.stats.already_done + self.stats.ok + self.stats.failed, self.stats.total)

    def _error(self, result: _Result, what: str) -> LexpilotError:
        endpoint = self.runner.endpoint
        hint = (
            f"Check the model name ({result.model!r}) and that {endpoint.base_url}{ROUTE} is the provider's "
            "chat completions route"
        )
        if isinstance(result.exc, openai.APIError):
            error = translate(result.exc, what, endpoint, not_found_hint=hint)
            if error is not None:
                return error
        return ProviderError(
            f"{what}: the {endpoint.where} answered without a usable body; "
            "nothing was lost, run the same command again later"
        )


def _line(custom_id: str, status: int, request_id: str | None, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": _line_id(),
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": request_id, "body": body},
        "error": None,
    }


def _error_line(custom_id: str, code: str, message: str) -> dict[str, Any]:
    return {"id": _line_id(), "custom_id": custom_id, "response": None, "error": {"code": code, "message": message}}


def _retry_after(exc: Exception | None) -> float | None:
    """The seconds a 429 answer asks to wait, when it says."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(float(headers[name]) * scale, 60.0)
        except (KeyError, TypeError, ValueError):
            continue
    return None


def _line_id() -> str:
    return "syncreq_" + uuid.uuid4().hex[:24]


def _error_body(exc: openai.APIStatusError) -> dict[str, Any]:
    """The provider's error answer as it sent it, in the `{"error": {...}}` shape ingest reads."""
    try:
        data = exc.response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return data
    message = None
    if isinstance(data, dict):
        message = data.get("error") if isinstance(data.get("error"), str) else data.get("message")
    text = message or exc.response.text[:1000] or exc.message
    return {"error": {"message": str(text), "type": None, "param": None, "code": None}}


def saved_custom_ids(output_path: Path) -> set[str]:
    """The custom_ids an output file already answers, after repairing a cut last line.

    A line cut by a kill is removed (the file is truncated to the end of its last complete line),
    unless it lacks only its newline, which is then added. A complete line that cannot be read
    (only a power loss leaves one) stays for ingest to report, and its request is sent again.
    """
    if not output_path.exists():
        return set()
    saved: set[str] = set()
    end = 0
    tail = b""
    with open(output_path, "r+b") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                tail = raw
                break
            end += len(raw)
            custom_id = _saved_custom_id(raw)
            if custom_id is not None:
                saved.add(custom_id)
        if tail:
            custom_id = _saved_custom_id(tail)
            if custom_id is not None:
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")
                saved.add(custom_id)
            else:
                fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
    return saved


def _saved_custom_id(raw: bytes) -> str | None:
    try:
        obj = json.loads(raw)
    except ValueError:  # also UnicodeDecodeError
        return None
    custom_id = obj.get("custom_id") if isinstance(obj, dict) else None
    return custom_id if isinstance(custom_id, str) else None


def _requests(path: Path) -> Generator[tuple[str, dict[str, Any]], None, None]:
    """(custom_id, body) of every request line, streaming; `LexpilotError` for a line that is not one."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            where = f"{path} line {number}"
            try:
                obj = json.loads(raw)
            except ValueError:
                raise LexpilotError(f"{where} is not JSON; this request file is damaged, compile it again") from None
            custom_id = obj.get("custom_id") if isinstance(obj, dict) else None
            body = obj.get("body") if isinstance(obj, dict) else None
            if not isinstance(custom_id, str) or not custom_id or not isinstance(body, dict):
                raise LexpilotError(
                    f"{where} is not a batch request line (it needs a custom_id and a body object); "
                    "this request file is damaged, compile it again"
                )
            url = obj.get("url", ROUTE)
            if not (isinstance(url, str) and url.rstrip("/").endswith(ROUTE)) or obj.get("method", "POST") != "POST":
                raise LexpilotError(
                    f"{where} is a {obj.get('method')} {url} request; the sync backend runs only POST /v1{ROUTE}"
                )
            yield custom_id, body


def _count(path: Path, saved: set[str]) -> tuple[int, int]:
    """(requests in the file, of which already saved); checks every line before anything is sent."""
    total = already = 0
    seen: set[str] = set()
    for custom_id, _ in _requests(path):
        if custom_id in seen:
            raise LexpilotError(f"{path}: custom_id {custom_id!r} appears twice; this request file is damaged")
        seen.add(custom_id)
        total += 1
        already += custom_id in saved
    return total, already
