"""The HTTP side of the simulated provider: a loopback-only server the `openai`, `anthropic`,
`google-genai`, `mistralai` and `together` SDKs talk to.

`SimulatedServer` serves every API's routes (`apis`, each module of which declares its own) from a
daemon thread (stdlib `ThreadingHTTPServer`, HTTP/1.1 keep-alive); `serve_forever` runs one in the
foreground. The server only dispatches: it finds the route a call is for (`apis.find`), asks for a
key, applies the per-call faults, calls the route's handler with the `routes.Request`, and answers
what it returns, or its `ApiError` in the error shape the route's API declares. It never asks
which API a call is for. On one port: OpenAI's under `/v1` (`base_url`), the others where their
provider's base URL points (`native_url`), and the OpenAI-compatible platforms' batch APIs
(Groq, Zhipu, Qianfan, SiliconFlow, Moonshot) and Ark's batch chat route under `/<platform>` and
the platform's base path (`profile_url`), by the OpenAI routes run with that platform's
differences (`profiles`), their errors in its shape. Every answer is JSON except file contents.
The HTTP 429/500/529 faults are injected here, before a route runs, so a faulted call never
changes state and the SDK's own retry is always safe (529, Anthropic's "overloaded", is the status
each API declares: Google's 503). A slow answer (`http_slow`) is held back *after* its route ran, as
when a provider does the work but answers after the client gave up: a retried POST then acts
twice, as it would for real.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.together.spec import NAME as TOGETHER
from lexpilot_batch.simulated import apis, chat, profiles
from lexpilot_batch.simulated.calls import Calls, damaged, damaged_page
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.faults import Faults, parse_faults
from lexpilot_batch.simulated.ratelimits import RateLimits, request_tokens
from lexpilot_batch.simulated.routes import Handlers, Reply, Request
from lexpilot_batch.simulated.store import Store
from lexpilot_batch.util.waiting import join

log = logging.getLogger(__name__)

# The headers an API key may come in, each API's SDK's (`SimulatedApi.key`): any of them on any route.
_KEYS = tuple(dict.fromkeys(api.key for api in apis.APIS))


def _authorised(headers: Any) -> bool:
    """Whether a call carries a key in any SDK's header (OpenAI's bearer, Anthropic's x-api-key, Google's)."""
    return any((value := headers.get(header) or "") and value.startswith(start) for header, start in _KEYS)


def check_loopback(host: str) -> str:
    """The address to bind for `host`; refuses anything that is not a loopback address."""
    if host.lower() == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if address is None or not address.is_loopback:
        raise ConfigError(
            f"refusing to serve the simulated provider on {host!r}: it only binds a loopback "
            "address (127.0.0.1, another 127.x.x.x, ::1 or localhost), never the network"
        )
    return str(address)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: a provider's front end takes a burst of new connections (a client opening
    # hundreds at once on an event loop) where socketserver's default of 5 would refuse most.
    request_queue_size = 1024
    # HTTPServer sets SO_REUSEADDR, which on Linux only lets a port in TIME_WAIT be taken again but
    # on Windows lets a second server bind a port another one listens on, silently: there, a port in
    # use is refused as elsewhere ("cannot listen").
    allow_reuse_address = os.name != "nt"
    sim: SimulatedServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out has closed its end before a slow answer is written: expected.
        if isinstance(sys.exc_info()[1], ConnectionError):
            log.debug("client %s went away before its answer was written", client_address)
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        """Drop kept-alive connections, so that no old handler serves a stopped server's state."""
        with self._open_lock:
            open_now = list(self._open)
        for connection in open_now:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)


class _HTTPServerV6(_HTTPServer):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the SDK reuses connections
    # Headers and body go out in separate writes; with Nagle on, delayed ACKs add ~40 ms to
    # every keep-alive call.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:  # Together's signed upload URL, S3's PutObject (Bedrock's)
        self._dispatch("PUT")

    def do_HEAD(self) -> None:  # S3's HeadObject: the headers of a GET, no body
        self._dispatch("HEAD")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self, method: str) -> None:
        sim = self.server.sim
        began = time.monotonic()
        # The body is always read, even for an error answer, so keep-alive stays in step.
        body = self._read_body()
        path, _, raw_query = self.path.partition("?")
        path = path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(raw_query).items()}
        profiled = profiles.match(path)
        profile = profiled[0] if profiled else None
        if profiled:
            path = profiled[1]
        api = apis.owner(path)  # whose error shape answers a path no route has
        limited: dict[str, str] = {}  # a synchronous call's rate-limit headers (`ratelimits`)
        try:
            api, route, args = apis.find(method, path, profile, self.headers)
            if not route.keyless and not _authorised(self.headers):
                raise ApiError(
                    401,
                    "You didn't provide an API key. Provide it in an Authorization header (Bearer KEY).",
                    param=None,
                    code="missing_api_key",
                )
            sim.calls.record(route.name, self.headers.get("x-stainless-retry-count", "0"), profile)
            sim.calls.http_fault(route.name, api.overloaded)
            if route.chat and (sim.faults.rpm or sim.faults.tpm):
                limited = sim.admit(profile.name if profile else api.name, args, body)
            if route.creates:
                sim.calls.late(route.name)
            request = Request(method, args, query, self.headers, body, profile)
            result = route.handler(sim.handlers[api.name], request)
        except ApiError as exc:
            if exc.code == "resource_unavailable":  # the flex tier refusing (`chat`)
                sim.calls.count("flex_429", route.name)
            shaped = profile.error_body(exc) if profile else api.error_body(exc)
            self._send(
                exc.status,
                json.dumps(shaped, ensure_ascii=False).encode("utf-8"),
                "application/json",
                {**limited, **exc.headers},
            )
            return
        except Exception:  # a bug of ours: answer like the real service, log it for us
            log.exception("simulated provider failed on %s %s", method, path)
            error = ApiError(500, "The server had an error while processing your request.", type="server_error")
            shaped = profile.error_body(error) if profile else api.error_body(error)
            self._send(500, json.dumps(shaped).encode("utf-8"), "application/json")
            return
        if route.on_flex is not None and route.on_flex(result):
            sim.calls.count("flex_answers", route.name)
        if route.chat:
            sim.calls.chat_span(model_of(args, body), self.headers.get(chat.HEADER) or "", began)
        sim.calls.slow(route.name)
        reply = result if isinstance(result, Reply) else Reply(result)
        if limited:
            reply = Reply(reply.data, {**limited, **reply.headers}, reply.status)
        page = route.page
        if isinstance(reply.data, bytes):
            self._download(route.name, path, reply, "application/octet-stream", lambda kind: damaged(kind, reply.data))
        elif page is not None and isinstance(reply.data, dict) and reply.data.get(page):
            # A page of results is a download too (`Route.page`).
            self._download(route.name, path, reply, "application/json", lambda k: damaged_page(k, reply.data, page))
        else:
            data = b"" if reply.data is None else json.dumps(reply.data, ensure_ascii=False).encode("utf-8")
            self._send(reply.status, data, "application/json", reply.headers)

    def _download(
        self, route: str, path: str, reply: Reply, content_type: str, damage: Callable[[str], tuple[bytes, str]]
    ) -> None:
        """Answer a download (a file's content, or a page of results): it may come back damaged,
        though whole as far as HTTP can tell (`damaged_download`: `damage` makes it so), or break
        off half-way (`cut_download`)."""
        sim = self.server.sim
        data = reply.data if isinstance(reply.data, bytes) else json.dumps(reply.data, ensure_ascii=False).encode()
        kind = sim.calls.damage(route, path) if data else None
        if kind is not None:
            self._send(reply.status, *damage(kind), reply.headers)
            return
        if len(data) > 1 and sim.calls.cut(route):
            self._send(reply.status, data, content_type, reply.headers, cut=len(data) // 2)
            self.close_connection = True
            return
        self._send(reply.status, data, content_type, reply.headers)

    def _send(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None, cut: int | None = None
    ) -> None:
        """Answer `data`; with `cut`, only its first `cut` bytes, under the whole one's length."""
        extra = dict(headers or {})
        self.send_response(status)
        self.send_header("Content-Type", extra.pop("Content-Type", content_type))
        self.send_header("Content-Length", extra.pop("Content-Length", str(len(data))))  # a HEAD's: its GET's
        self.send_header("x-request-id", "req_" + os.urandom(12).hex())
        for key, value in extra.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data if cut is None else data[:cut])


class SimulatedServer:
    """The simulated provider on a loopback port, serving from a daemon thread.

    Usable as a context manager. `faults=None` reads `$LEXPILOT_SIM_FAULTS` (no faults if unset).
    `seed` drives the simulated models and the shuffling of output files; `faults.seed` drives
    the faults. All state lives in `state_dir`, so a new server on the same folder resumes.
    """

    def __init__(
        self,
        state_dir: Path,
        faults: Faults | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.calls = Calls(faults if faults is not None else parse_faults(None))
        self.host = check_loopback(host)
        self.port = port
        self.seed = seed
        self.stats = self.calls.stats  # what `calls` counted, per route too ("calls:upload_file")
        self.limits = RateLimits()  # the synchronous calls' rate limits (`rpm`, `tpm` faults)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.store: Store | None = None
        # Each API's handlers over the store (`apis`), by the API's name.
        self.handlers: dict[str, Handlers] = {}

    def start(self) -> None:
        if self._httpd is not None:
            return
        self.store = Store(self.state_dir)
        self.handlers = {
            api.name: api.handlers(self.store, self.faults, self.seed, self.calls.roll) for api in apis.APIS
        }
        cls = _HTTPServerV6 if ":" in self.host else _HTTPServer
        try:
            httpd = cls((self.host, self.port), _Handler)
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {self.host}:{self.port} ({exc.strerror or exc}); choose another --port, "
                "or 0 for any free one"
            ) from None
        httpd.sim = self
        self._httpd = httpd
        for handlers in self.handlers.values():
            handlers.root = self.root_url
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="lexpilot-simulated", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is None:
            return
        # `BaseServer.shutdown()` waits on an Event without a timeout, which Ctrl-C cannot stop on
        # Windows before Python 3.14 (`util.waiting`); it is asked for on a helper thread, and the
        # serving thread, which ends when it has shut down, is waited for in steps.
        stopping = threading.Thread(target=self._httpd.shutdown, name="lexpilot-simulated-stop", daemon=True)
        stopping.start()
        if self._thread is not None:
            join(self._thread)
        join(stopping)
        self._httpd.server_close()
        self._httpd.close_connections()
        self._httpd = None
        self._thread = None

    def admit(self, api: str, args: tuple[str, ...], body: bytes) -> dict[str, str]:
        """Take one synchronous call of `api` (or its platform) against its model's rate limits
        (`ratelimits`): the headers its answer carries, or the 429 `ApiError`. The model is the
        body's, else the path's (generateContent's `models/{model}`)."""
        try:
            return self.limits.admit(self.faults, api, model_of(args, body), request_tokens(_payload(body)))
        except ApiError:
            self.calls.count("rate_limited", api)
            raise

    @property
    def faults(self) -> Faults:
        """The faults of this server's calls; set anew, the per-call faults change at once (the
        handlers keep those they started with)."""
        return self.calls.faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        self.calls.faults = faults

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (`OPENAI_BASE_URL`)."""
        return self.root_url + "/v1"

    def profile_url(self, platform: str) -> str:
        """The base URL of an OpenAI-compatible platform's API on this server (`profiles`), as its
        real one ends: `.../zhipu/api/paas/v4`, `.../qianfan/v2`, `.../ark/api/v3/batch`."""
        return self.root_url + "/" + platform + profiles.PROFILES[platform].base

    def native_url(self, api: str) -> str:
        """The base URL of an API on this server (`api`: its `providers.spec.ApiSpec.name`), as its
        provider's variable takes it (`SimulatedApi.base_path`): Anthropic's and Gemini's the server
        itself, Mistral's OpenAI's (its batch jobs beside the files routes), Together's under /together."""
        found = apis.native(api)
        if found is None or found.base_path is None:
            raise ValueError(f"the simulated provider speaks no {api!r} API of its own")
        return self.root_url + found.base_path

    @property
    def root_url(self) -> str:
        """The server itself: Anthropic's and Gemini's base URL (`ANTHROPIC_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`)."""
        if self._httpd is None:
            raise RuntimeError("the simulated server is not started; call start() first")
        port = self._httpd.server_address[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}"

    def __enter__(self) -> SimulatedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def forget_batches(self) -> int:
        """Forget every batch, as a provider whose restart lost its queue (files stay). Returns how many."""
        if self.store is None:
            raise RuntimeError("the simulated server is not started; call start() first")
        return self.store.forget_batches()


def serve_forever(
    state_dir: Path,
    host: str,
    port: int,
    faults: Faults | None,
    seed: int,
    *,
    url_line: bool = False,
    forget_batches: bool = False,
) -> None:
    """Serve in the foreground until Ctrl-C, then shut down cleanly.

    `url_line` first prints the bare base URL on a line of its own (for a parent process);
    `forget_batches` starts as a provider whose restart lost every batch.
    """
    server = SimulatedServer(state_dir, faults=faults, host=host, port=port, seed=seed)
    server.start()
    if forget_batches:
        server.forget_batches()
    try:
        if url_line:
            print(server.base_url, flush=True)
        print(f"Simulated provider at {server.base_url} (state in {state_dir}); Ctrl-C to stop", flush=True)
        print(
            f"  OpenAI: OPENAI_BASE_URL={server.base_url}; Anthropic Message Batches: ANTHROPIC_BASE_URL="
            f"{server.root_url}; Gemini Batch Mode: GOOGLE_GEMINI_BASE_URL={server.root_url}; Together: "
            f"TOGETHER_BASE_URL={server.native_url(TOGETHER)} (any API key)",
            flush=True,
        )
        platforms = ", ".join(f"{name}: {server.profile_url(name)}" for name in profiles.PROFILES)
        print(f"  OpenAI-compatible platforms (their *_BASE_URL): {platforms}", flush=True)
        if server.faults != Faults():
            print(f"Faults: {server.faults.describe()}", flush=True)
        while True:
            time.sleep(0.5)  # interruptible by Ctrl-C on every platform, unlike Event.wait()
    except KeyboardInterrupt:
        print("Stopping the simulated provider.", file=sys.stderr, flush=True)
    finally:
        server.stop()


def _payload(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        return None  # the route refuses it; it still counts, as a real provider's would


def model_of(args: tuple[str, ...], body: bytes) -> str:
    """The model a synchronous call names: the body's, else the path's (generateContent's `models/{model}`)."""
    payload = _payload(body)
    model = payload.get("model") if isinstance(payload, dict) else None
    return model if isinstance(model, str) and model else (args[0] if args else "")
