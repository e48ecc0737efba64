"""The HTTP side of the simulated provider: a loopback-only server the `openai`, `anthropic` and
`google-genai` SDKs talk to.

`SimulatedServer` serves the routes of `api.Api` from a daemon thread (stdlib
`ThreadingHTTPServer`, HTTP/1.1 keep-alive); `serve_forever` runs one in the foreground. On one
port: OpenAI's under `/v1` (`base_url`), Mistral's batch jobs under `/v1/batch/jobs` (the same
`base_url`, its files OpenAI's routes), Anthropic's Message Batches under `/v1/messages/batches`
and Gemini's Batch Mode under `/v1beta` and `/upload/v1beta` (both at `root_url`), and each API's
synchronous call (chat completions, Messages, generateContent: `chat`). The OpenAI-compatible
platforms' batch APIs (Groq, Zhipu, Qianfan, SiliconFlow, Moonshot) and Ark's batch chat route are
served under `/<platform>` and the platform's base path (`profile_url`), by the OpenAI routes run
with that platform's differences (`profiles`), their errors in its shape. Every answer is
JSON except file contents, and every failure is the error body of its route's API with its HTTP
status. The HTTP 429/500/529 faults are injected here, before a route runs, so a faulted call never
changes state and the SDK's own retry is always safe (529, Anthropic's "overloaded", is Google's
503). A slow answer (`http_slow`) is held back *after* its route ran, as when a provider does the
work but answers after the client gave up: a retried POST then acts twice, as it would for real.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import random
import re
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.simulated import chat, profiles
from lexpilot_batch.simulated.api import Api
from lexpilot_batch.simulated.errors import ApiError, error_body
from lexpilot_batch.simulated.faults import CREATE_ROUTES, Faults, parse_faults
from lexpilot_batch.simulated.gemini_api import Reply
from lexpilot_batch.simulated.store import Store
from lexpilot_batch.simulated.together_api import Answer
from lexpilot_batch.util.waiting import join

log = logging.getLogger(__name__)

# (method, path pattern, route name, what its method is given, the API it belongs to); a route
# named `anthropic_x` (`gemini_x`, `mistral_x`, `together_x`) is `Api.anthropic.x` (`Api.gemini.x`, ...).
_ROUTES: list[tuple[str, re.Pattern[str], str, str, str]] = [
    ("POST", re.compile(r"/v1/files"), "upload_file", "multipart", "openai"),
    ("GET", re.compile(r"/v1/files"), "list_files", "query", "openai"),
    ("GET", re.compile(r"/v1/files/([^/]+)/content"), "file_content", "id", "openai"),
    ("GET", re.compile(r"/v1/files/([^/]+)"), "retrieve_file", "id", "openai"),
    ("DELETE", re.compile(r"/v1/files/([^/]+)"), "delete_file", "id", "openai"),
    ("POST", re.compile(r"/v1/batches"), "create_batch", "json", "openai"),
    ("GET", re.compile(r"/v1/batches"), "list_batches", "query", "openai"),
    ("GET", re.compile(r"/v1/batches/([^/]+)"), "retrieve_batch", "id", "openai"),
    ("POST", re.compile(r"/v1/batches/([^/]+)/cancel"), "cancel_batch", "id", "openai"),
    ("POST", re.compile(r"/v1/chat/completions"), "chat_completion", "chat", "openai"),
    # Volcengine Ark's batch chat route (`ark/` names' base URL ends in /batch): a chat completion.
    ("POST", re.compile(r"/v1/batch/chat/completions"), "chat_completion", "chat", "openai"),
    ("POST", re.compile(r"/v1/batch/jobs"), "mistral_create", "json", "mistral"),
    ("GET", re.compile(r"/v1/batch/jobs"), "mistral_list", "query", "mistral"),
    ("GET", re.compile(r"/v1/batch/jobs/([^/]+)"), "mistral_get", "id", "mistral"),
    ("POST", re.compile(r"/v1/batch/jobs/([^/]+)/cancel"), "mistral_cancel", "id", "mistral"),
    ("POST", re.compile(r"/v1/messages/batches"), "anthropic_create", "json", "anthropic"),
    ("GET", re.compile(r"/v1/messages/batches"), "anthropic_list", "query", "anthropic"),
    ("GET", re.compile(r"/v1/messages/batches/([^/]+)"), "anthropic_retrieve", "id", "anthropic"),
    ("POST", re.compile(r"/v1/messages/batches/([^/]+)/cancel"), "anthropic_cancel", "id", "anthropic"),
    ("GET", re.compile(r"/v1/messages/batches/([^/]+)/results"), "anthropic_results", "id", "anthropic"),
    ("POST", re.compile(r"/v1/messages"), "anthropic_message", "chat", "anthropic"),
    ("POST", re.compile(r"/upload/v1beta/files"), "gemini_upload_start", "upload", "gemini"),
    ("POST", re.compile(r"/upload/v1beta/files/sessions/([^/]+)"), "gemini_upload_chunk", "upload", "gemini"),
    ("GET", re.compile(r"/v1beta/files/([a-z0-9]+)"), "gemini_get_file", "id", "gemini"),
    ("GET", re.compile(r"/v1beta/files/([a-z0-9]+):download"), "gemini_download", "id", "gemini"),
    ("POST", re.compile(r"/v1beta/models/([^/:]+):batchGenerateContent"), "gemini_create", "id+json", "gemini"),
    ("POST", re.compile(r"/v1beta/models/([^/:]+):generateContent"), "gemini_generate", "id+chat", "gemini"),
    ("GET", re.compile(r"/v1beta/batches"), "gemini_list", "query", "gemini"),
    ("GET", re.compile(r"/v1beta/batches/([^/:]+)"), "gemini_get", "id", "gemini"),
    ("POST", re.compile(r"/v1beta/batches/([^/:]+):cancel"), "gemini_cancel", "id", "gemini"),
    # Together AI's Batch API (`together_api`): OpenAI's paths with its own shapes, under /together.
    ("POST", re.compile(r"/together/v1/files"), "together_upload_start", "form", "together"),
    ("PUT", re.compile(r"/together/upload/([^/]+)/([^/]+)"), "together_upload_put", "upload", "together"),
    ("POST", re.compile(r"/together/v1/files/([^/]+)/preprocess"), "together_preprocess", "id", "together"),
    ("GET", re.compile(r"/together/v1/files/([^/]+)/content"), "together_file_content", "id", "together"),
    ("GET", re.compile(r"/together/v1/files/([^/]+)"), "together_get_file", "id", "together"),
    ("POST", re.compile(r"/together/v1/batches"), "together_create", "json", "together"),
    ("GET", re.compile(r"/together/v1/batches"), "together_list", "query", "together"),
    ("GET", re.compile(r"/together/v1/batches/([^/]+)"), "together_get", "id", "together"),
    ("POST", re.compile(r"/together/v1/batches/([^/]+)/cancel"), "together_cancel", "id", "together"),
    ("POST", re.compile(r"/together/v1/chat/completions"), "chat_completion", "chat", "together"),
]


# The routes given a platform's profile besides the ids in their path (`api.Api`'s `profile=`).
_PROFILED_BY_ID = frozenset({"retrieve_batch", "cancel_batch"})


def _handler(api: Api, name: str) -> Callable[..., Any]:
    for prefix in ("anthropic_", "gemini_", "mistral_", "together_"):
        if name.startswith(prefix):
            return getattr(getattr(api, prefix[:-1]), name[len(prefix) :])
    return getattr(api, name)


def _authorised(headers: Any) -> bool:
    """A key in any SDK's header: OpenAI's (and this Anthropic SDK's) bearer, Anthropic's x-api-key, Google's."""
    return headers.get("Authorization", "").startswith("Bearer ") or bool(
        headers.get("x-api-key") or headers.get("x-goog-api-key")
    )


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


def _on_flex(answer: dict) -> bool:
    """Whether an answer says it ran on the flex tier: chat's `service_tier`, Gemini's
    `usageMetadata.serviceTier`."""
    meta = answer.get("usageMetadata")
    return answer.get("service_tier") == "flex" or (isinstance(meta, dict) and meta.get("serviceTier") == "flex")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
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

    def do_PUT(self) -> None:  # Together's signed upload URL
        self._dispatch("PUT")

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
        # The body is always read, even for an error answer, so keep-alive stays in step.
        body = self._read_body()
        path, _, raw_query = self.path.partition("?")
        path = path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(raw_query).items()}
        profiled = profiles.match(path)
        profile = profiled[0] if profiled else None
        if profiled:
            path = profiled[1]
        api = (
            "gemini"
            if path.startswith(("/v1beta", "/upload/"))
            else "anthropic"
            if path.startswith("/v1/messages")
            else "mistral"
            if path.startswith("/v1/batch/jobs")
            else "together"
            if path.startswith("/together/")
            else "openai"
        )
        try:
            route, args = self._route(method, path, profile)
            name, style, api = route
            more: dict[str, Any] = {"profile": profile} if profile else {}
            # An upload session's URL is its own credential, as Google's (and Together's signed
            # URL) is: the SDK sends no key there.
            if not _authorised(self.headers) and name not in ("gemini_upload_chunk", "together_upload_put"):
                raise ApiError(
                    401,
                    "You didn't provide an API key. Provide it in an Authorization header (Bearer KEY).",
                    param=None,
                    code="missing_api_key",
                )
            sim._record(name, self.headers.get("x-stainless-retry-count", "0"), profile)
            sim._http_fault(name, api)
            sim._maybe_late(name)
            assert sim.api is not None
            fn = _handler(sim.api, name)
            if style == "multipart":
                result = fn(self.headers.get("Content-Type", ""), body, **more)
            elif style == "json":
                result = fn(_json(body), **more)
            elif style == "chat":  # the client's id of the call draws what a batch draws by custom_id
                result = fn(_json(body), self.headers.get(chat.HEADER), **more)
            elif style == "id+chat":
                result = fn(*args, _json(body), self.headers.get(chat.HEADER))
            elif style == "query":
                result = fn(query, **more)
            elif style == "upload":
                result = fn(self.headers, body, *args)
            elif style == "id+json":
                result = fn(*args, _json(body))
            elif name in _PROFILED_BY_ID:
                result = fn(*args, **more)
            elif style == "form":
                result = fn(self.headers, body, query)
            else:
                result = fn(*args)
        except ApiError as exc:
            if exc.code == "resource_unavailable":  # the flex tier refusing (`chat`)
                sim._count("flex_429", name)
            shaped = profiles.error_body(exc, profile) if profile else error_body(exc, api)
            self._send(
                exc.status, json.dumps(shaped, ensure_ascii=False).encode("utf-8"), "application/json", exc.headers
            )
            return
        except Exception:  # a bug of ours: answer like the real service, log it for us
            log.exception("simulated provider failed on %s %s", method, path)
            error = ApiError(500, "The server had an error while processing your request.", type="server_error")
            shaped = profiles.error_body(error, profile) if profile else error_body(error, api)
            self._send(500, json.dumps(shaped).encode("utf-8"), "application/json")
            return
        if isinstance(result, dict) and _on_flex(result):
            sim._count("flex_answers", name)
        sim._maybe_slow(name)
        headers = None
        if isinstance(result, Answer):  # Together's upload: a 302 to the signed URL, or a 409
            data = b"" if result.data is None else json.dumps(result.data, ensure_ascii=False).encode("utf-8")
            self._send(result.status, data, "application/json", result.headers)
            return
        if isinstance(result, Reply):
            result, headers = result.data, result.headers
        if isinstance(result, bytes):
            if len(result) > 1 and sim._maybe_cut(name):  # the connection breaks off half-way through the body
                self._send(200, result, "application/octet-stream", headers, cut=len(result) // 2)
                self.close_connection = True
                return
            self._send(200, result, "application/octet-stream", headers)
        else:
            self._send(200, json.dumps(result, ensure_ascii=False).encode("utf-8"), "application/json", headers)

    def _route(
        self, method: str, path: str, profile: profiles.Profile | None = None
    ) -> tuple[tuple[str, str, str], tuple[str, ...]]:
        allowed = False
        for route_method, pattern, name, style, api in _ROUTES:
            match = pattern.fullmatch(path)
            # A platform serves OpenAI's routes only, and Ark its chat completions alone.
            if match and profile is not None and (api != "openai" or not (profile.batches or style == "chat")):
                match = None
            if match:
                if route_method == method:
                    return (name, style, api), tuple(unquote(g) for g in match.groups())
                allowed = True
        if allowed:
            raise ApiError(405, f"Method {method} is not allowed on {path}.", code="method_not_allowed")
        raise ApiError(404, f"Invalid URL ({method} {path})", param=None, code=None)

    def _send(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None, cut: int | None = None
    ) -> None:
        """Answer `data`; with `cut`, only its first `cut` bytes, under the whole one's length."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", "req_" + os.urandom(12).hex())
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data if cut is None else data[:cut])


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ApiError(
            400,
            "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.",
            param=None,
            code=None,
        ) from None


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
        self.faults = faults if faults is not None else parse_faults(None)
        self.host = check_loopback(host)
        self.port = port
        self.seed = seed
        # calls, http_429, http_500, http_slow, retried calls, flex_429 refusals and flex_answers seen;
        # each also per route ("calls:upload_file")
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._rng = random.Random(self.faults.seed)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.api: Api | None = None

    def start(self) -> None:
        if self._httpd is not None:
            return
        self.api = Api(Store(self.state_dir), self.faults, self.seed, self._roll)
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
        self.api.anthropic.root = self.api.gemini.root = self.api.together.root = self.root_url
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

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (`OPENAI_BASE_URL`)."""
        return self.root_url + "/v1"

    def profile_url(self, platform: str) -> str:
        """The base URL of an OpenAI-compatible platform's API on this server (`profiles`), as its
        real one ends: `.../zhipu/api/paas/v4`, `.../qianfan/v2`, `.../ark/api/v3/batch`."""
        return self.root_url + "/" + platform + profiles.PROFILES[platform].base

    def native_url(self, api: str) -> str:
        """The base URL of a native API on this server, as its provider's variable takes it:
        Anthropic's and Gemini's the server itself, Mistral's OpenAI's (its batch jobs beside the
        files routes), Together's under /together."""
        if api in ("anthropic", "google"):
            return self.root_url
        if api == "mistral":
            return self.base_url
        if api == "together":
            return self.together_url
        raise ValueError(f"the simulated provider speaks no {api!r} API of its own")

    @property
    def together_url(self) -> str:
        """Together AI's base URL (`TOGETHER_BASE_URL`): its routes are OpenAI's paths, under /together."""
        return self.root_url + "/together/v1"

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

    # --- called by the handler ---------------------------------------------------------------

    def _count(self, what: str, route: str) -> None:
        with self._lock:
            self.stats[what] += 1
            self.stats[f"{what}:{route}"] += 1

    def _record(self, route: str, retry_count: str, profile: profiles.Profile | None = None) -> None:
        self._count("calls", route)
        if retry_count not in ("", "0"):
            self._count("retried", route)
        if profile is not None:  # "calls:zhipu:create_batch": the platform's own calls
            with self._lock:
                self.stats[f"calls:{profile.name}:{route}"] += 1
                if retry_count not in ("", "0"):
                    self.stats[f"retried:{profile.name}:{route}"] += 1

    def _roll(self) -> float:
        """One draw of the per-call faults' seeded generator (any handler thread's, and `chat`'s)."""
        with self._lock:
            return self._rng.random()

    def _struck(self, fault: str, route: str) -> bool:
        """Whether a per-call fault (`http_slow`, `late_create`, `cut_download`) strikes this call:
        drawn only while it is on, and counted when it strikes."""
        chance = getattr(self.faults, fault)
        if not chance:
            return False
        if self._roll() < chance:
            self._count(fault, route)
            return True
        return False

    def _maybe_slow(self, route: str) -> None:
        """Maybe hold the answer of a call whose route has run (drawn per call)."""
        if self.faults.applies_to(route) and self._struck("http_slow", route):
            time.sleep(self.faults.slow_seconds)

    def _maybe_cut(self, route: str) -> bool:
        """Whether to break off this download of a file's content half-way (drawn per call)."""
        return self._struck("cut_download", route)

    def _maybe_late(self, route: str) -> None:
        """Maybe hold a batches create *before* it runs (drawn per call): the batch appears only
        after a client with a shorter timeout gave up on its answer."""
        if route in CREATE_ROUTES and self._struck("late_create", route):
            time.sleep(self.faults.slow_seconds)

    def forget_batches(self) -> int:
        """Forget every batch, as a provider whose restart lost its queue (files stay). Returns how many."""
        if self.api is None:
            raise RuntimeError("the simulated server is not started; call start() first")
        return self.api.store.forget_batches()

    def _http_fault(self, route: str, api: str = "openai") -> None:
        """Maybe answer 429, 500 or 529 instead of running the route (drawn per call)."""
        faults = self.faults
        if not (faults.http_429 or faults.http_500 or faults.http_529) or not faults.applies_to(route):
            return
        roll = self._roll()
        wait = {
            "retry-after": str(max(0, round(faults.retry_after))),
            "retry-after-ms": str(int(faults.retry_after * 1000)),
        }
        if roll < faults.http_429:
            self._count("http_429", route)
            raise ApiError(
                429,
                "Rate limit reached for requests (simulated). Please try again shortly.",
                type="requests",
                code="rate_limit_exceeded",
                headers=wait,
            )
        if roll < faults.http_429 + faults.http_500:
            self._count("http_500", route)
            # Real 500s carry no retry-after; ours do, so that retries in tests stay fast.
            raise ApiError(
                500,
                "The server had an error while processing your request. Sorry about that!",
                type="server_error",
                headers=wait,
            )
        if roll < faults.http_429 + faults.http_500 + faults.http_529:
            self._count("http_529", route)
            raise ApiError(503 if api == "gemini" else 529, "Overloaded", type="overloaded_error", headers=wait)


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
            f"TOGETHER_BASE_URL={server.together_url} (any API key)",
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
