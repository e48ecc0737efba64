"""API keys never reach a file or an output (SPEC §7): a whole workflow through the CLI, every
command a real process, against the simulated provider in its own process, with sentinel keys;
then every byte the workflow left anywhere, and everything it printed, is searched for them.

A provider that rejects the key (HTTP 401) is a tiny server of this test that even echoes the key
back in its error message, as some providers do: the message the user sees names the variable
the key came from, never the key.

A gateway that echoes every request header in its 400/404/500 bodies (issue 23) is another: every
provider kind and both backends go through it, and the key is in no output, no file (compacted
ones uncompressed) and no row of any table; nor is a password in a base URL's userinfo or a key in
its query string.
"""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from tests.helpers.crash import SimServer, base_env

SENTINEL = "sk-SENTINEL-0123456789abcdef"
JUDGE_SENTINEL = "sk-JUDGE-SENTINEL-fedcba9876543210"
# The whole keys, their first 12 characters (a prefix some tools print) and their last 8 (what a
# masked key such as "sk-...abcdef" keeps).
NEEDLES = sorted({part for key in (SENTINEL, JUDGE_SENTINEL) for part in (key, key[:12], key[-8:])})


def cli(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "lexpilot_batch", *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=timeout,
    )


def leaks(data: bytes, needles: Iterable[str] = NEEDLES) -> list[str]:
    return [needle for needle in needles if needle.encode("utf-8") in data]


def file_bytes(path: Path) -> bytes:
    """A file's bytes, a compacted (gzip) one's uncompressed: a key must not hide in a finished wave's file."""
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def leaking_files(root: Path, needles: Iterable[str] = NEEDLES) -> dict[str, list[str]]:
    """Every file under root (binary ones too: the SQLite database and its WAL; compacted ones
    uncompressed) holding a needle."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            hits = leaks(file_bytes(path), needles)
            if hits:
                found[path.relative_to(root).as_posix()] = hits
    return found


def test_the_search_finds_a_key_wherever_it_is(tmp_path):
    """The control: a search that cannot fail proves nothing."""
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "blob.bin").write_bytes(b"\x00\x01" + SENTINEL[:12].encode() + b"\xff")
    (tmp_path / "masked.txt").write_text(f"key sk-...{JUDGE_SENTINEL[-8:]}", encoding="utf-8")
    (tmp_path / "w0001.output.jsonl.gz").write_bytes(gzip.compress(SENTINEL.encode()))
    assert leaking_files(tmp_path) == {
        "deep/er/blob.bin": [SENTINEL[:12]],
        "masked.txt": [JUDGE_SENTINEL[-8:]],
        "w0001.output.jsonl.gz": sorted([SENTINEL, SENTINEL[:12], SENTINEL[-8:]]),
    }


# --- the whole workflow ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workflow(tmp_path_factory) -> Iterator[tuple[Path, list[tuple[list[str], subprocess.CompletedProcess[bytes]]]]]:
    """prepare, poll-and-advance --submit --wait, status, report, export and refused commands."""
    base = tmp_path_factory.mktemp("secrets")
    root, out = base / "ws", base / "export"
    with SimServer(base / "sim-state", seed=0, faults="", log=base / "sim.log") as sim:
        env = base_env(OPENAI_BASE_URL=sim.url, OPENAI_API_KEY=SENTINEL, LEXPILOT_JUDGE_API_KEY=JUDGE_SENTINEL)
        provider = ["--provider", "env", "--user-backend", "sync", "--root", str(root)]
        run = ["--stage", "all", "--run-id", "r1", "--model", "sim-eval", "--limit", "3"]
        commands: list[tuple[list[str], int]] = [
            (["prepare", *run, *provider], 0),
            (["poll-and-advance", "--submit", "--wait", "--poll-interval", "0.05", *provider], 0),
            (["status", "--root", str(root)], 0),
            (["status", "--format", "json", "--root", str(root)], 0),
            (["report", "--root", str(root)], 0),
            (["report", "--format", "json", "--root", str(root)], 0),
            (["export", "--out", str(out), "--root", str(root)], 0),
            (["prepare", *run, "--temperature", "0.3", *provider], 1),  # a refused manifest
            (["prepare", "--stage", "all", "--run-id", "r2", "--model", " ", *provider], 1),  # no model
            (["poll-and-advance", "--submit", "--provider", "nope", "--root", str(root)], 1),
        ]
        results = []
        for args, expected in commands:
            done = cli(args, base, env)
            assert done.returncode == expected, (args, done.stderr.decode("utf-8", "replace")[-3000:])
            results.append((args, done))
    yield base, results


@pytest.mark.slow  # the whole workflow through ten CLI processes: a long simulation
def test_the_workflow_ran_with_the_keys(workflow):
    """The simulated provider refuses a request without a bearer key, so finishing proves they were sent."""
    base, results = workflow
    status = json.loads(results[3][1].stdout)
    assert [t["done"] for t in status["runs"][0]["tasks"].values()] == [6, 3, 3, 3, 3]
    assert status["requests"]["user"]["answered"] > 0  # the sync role ran
    assert status["requests"]["judge"]["answered"] > 0  # LEXPILOT_JUDGE_API_KEY was used
    assert b"differs" in results[7][1].stderr or b"different settings" in results[7][1].stderr
    assert (base / "export" / "eval_results").is_dir()


@pytest.mark.slow  # the whole workflow through ten CLI processes: a long simulation
def test_no_file_the_workflow_left_holds_a_key(workflow):
    base, _ = workflow
    searched = {p.relative_to(base).parts[0] for p in base.rglob("*") if p.is_file()}
    assert {"ws", "export", "sim-state", "sim.log"} <= searched
    assert leaking_files(base) == {}


@pytest.mark.slow  # the whole workflow through ten CLI processes: a long simulation
def test_no_output_of_any_command_holds_a_key(workflow):
    _, results = workflow
    for args, done in results:
        assert leaks(done.stdout + done.stderr) == [], args


# --- a provider that rejects the key -----------------------------------------------------------------


def _read_body(handler: BaseHTTPRequestHandler) -> None:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            handler.rfile.read(size)
            handler.rfile.readline()
            if size == 0:
                break
    else:
        handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


class _Rejecting(BaseHTTPRequestHandler):
    """Answers every request 401, echoing the key it was given, as a careless provider might."""

    keys_seen: ClassVar[list[str]] = []

    def _reject(self) -> None:
        _read_body(self)
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        self.keys_seen.append(key)
        body = json.dumps(
            {
                "error": {
                    "message": f"Incorrect API key provided: {key}.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            }
        ).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _reject

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def rejecting() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Rejecting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Rejecting.keys_seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("keys", "variable", "backend"),
    [
        ({"OPENAI_API_KEY": SENTINEL}, "OPENAI_API_KEY", "batch"),
        pytest.param(  # the same refusal through another variable: slow (`-m slow`)
            {"OPENAI_API_KEY": JUDGE_SENTINEL, "LEXPILOT_EVAL_API_KEY": SENTINEL},
            "LEXPILOT_EVAL_API_KEY",
            "batch",
            marks=pytest.mark.slow,
        ),
        pytest.param({"OPENAI_API_KEY": SENTINEL}, "OPENAI_API_KEY", "sync", marks=pytest.mark.slow),
    ],
)
def test_a_rejected_key_names_its_variable_not_the_key(tmp_path, rejecting, keys, variable, backend):
    env = base_env(OPENAI_BASE_URL=rejecting, **keys)
    target = ["--provider", "env", "--eval-backend", backend, "--root", str(tmp_path / "ws")]
    prepared = cli(["prepare", "--stage", "lca", "--model", "m", "--limit", "1", *target], tmp_path, env)
    assert prepared.returncode == 0, prepared.stderr.decode("utf-8", "replace")
    done = cli(["poll-and-advance", "--submit", *target], tmp_path, env, timeout=60)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith("Error: ") and "HTTP 401" in stderr and f"check {variable}" in stderr, stderr
    assert SENTINEL in _Rejecting.keys_seen  # the control: the key was sent, and echoed back
    assert leaks(done.stdout + done.stderr + prepared.stdout + prepared.stderr) == []
    assert leaking_files(tmp_path) == {}


# --- a gateway that echoes the request's headers (issue 23) ---------------------------------------------
#
# Every provider kind and both backends, against a server that answers every call 500, then 404, then
# 400 with a body quoting every header it was sent (Authorization, x-api-key, x-goog-api-key included)
# and the path with its query, as gateways and proxies do. The commands run in this process through
# `cli.main` (the real entry point, `Error:` lines included): a subprocess per command would cost
# minutes here, and the Gemini SDK's retry delay can only be set to zero in-process.

ECHO = "ECHOED-BY-THE-GATEWAY"  # in every echo: the control that provider text did reach the user


class _Echoing(BaseHTTPRequestHandler):
    """Answers every request with `status`, its JSON error body quoting the request's headers."""

    status: ClassVar[int] = 500
    keys_seen: ClassVar[list[str]] = []
    protocol_version = "HTTP/1.1"

    def _echo(self) -> None:
        _read_body(self)
        headers = dict(self.headers.items())
        self.keys_seen.extend([self.path, *headers.values()])
        quoted = "; ".join(f"{k}: {v}" for k, v in headers.items())
        body = json.dumps(
            {
                "type": "error",
                "error": {
                    "message": f"{ECHO} {self.command} {self.path} with headers {quoted}",
                    "type": "invalid_request_error",
                    "code": self.status,
                    "status": "INVALID_ARGUMENT"
                    if self.status == 400
                    else "NOT_FOUND"
                    if self.status == 404
                    else "INTERNAL",
                    "headers": headers,
                    "path": self.path,
                },
            }
        ).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("retry-after-ms", "1")  # the SDKs' retries of a 500, without their backoff
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _echo

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def echoing() -> Iterator[tuple[str, type[_Echoing]]]:
    """(root URL, handler class: set `status` on it) of a header-echoing server."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echoing)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Echoing.keys_seen = []
    _Echoing.status = 500
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Echoing
    finally:
        server.shutdown()
        server.server_close()


def database_dump(root: Path) -> str:
    """Every row of every table of the workspace's database, as text."""
    import sqlite3

    db = sqlite3.connect(root / "state" / "lexpilot.sqlite3")
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert {"requests", "threads", "anomalies", "files", "runs"} <= set(tables)
        return "\n".join(f"{t}: {row!r}" for t in tables for row in db.execute(f'SELECT * FROM "{t}"'))
    finally:
        db.close()


# (model, the variables that send it to the echoing server: {name: value with {url} for its root})
PROVIDER_KINDS = {
    "bare/OPENAI_API_KEY": ("m", {"OPENAI_BASE_URL": "{url}/v1", "OPENAI_API_KEY": SENTINEL}),
    "bare/LEXPILOT_EVAL_API_KEY": (
        "m",
        {"LEXPILOT_EVAL_BASE_URL": "{url}/v1", "LEXPILOT_EVAL_API_KEY": SENTINEL, "OPENAI_API_KEY": JUDGE_SENTINEL},
    ),
    "openai/": ("openai/gpt-x", {"OPENAI_BASE_URL": "{url}/v1", "OPENAI_API_KEY": SENTINEL}),
    "anthropic/": ("anthropic/claude-x", {"ANTHROPIC_BASE_URL": "{url}", "ANTHROPIC_API_KEY": SENTINEL}),
    "google/": ("google/gemini-x", {"GOOGLE_GEMINI_BASE_URL": "{url}", "GOOGLE_API_KEY": SENTINEL}),
    "azure/": ("azure/dep", {"AZURE_OPENAI_BASE_URL": "{url}/openai/v1", "AZURE_OPENAI_API_KEY": SENTINEL}),
    "dashscope/": (
        "dashscope/qwen-x",
        {"DASHSCOPE_BASE_URL": "{url}/compatible-mode/v1", "DASHSCOPE_API_KEY": SENTINEL},
    ),
    "openai-api/sima/": ("openai-api/sima/m", {"SIMA_BASE_URL": "{url}/v1", "SIMA_API_KEY": SENTINEL}),
    "deepseek/": ("deepseek/deepseek-chat", {"DEEPSEEK_BASE_URL": "{url}/v1", "DEEPSEEK_API_KEY": SENTINEL}),
}
SCENARIOS = [
    (kind, backend)
    for kind in PROVIDER_KINDS
    for backend in ("batch", "sync")
    if not (kind == "deepseek/" and backend == "batch")  # DeepSeek has no Batch API: refused before sending
]
# The default suite echoes through one OpenAI-shaped and each native API, both backends between
# them; every other pair is part of the slow campaign (`-m slow`).
EVERY_RUN = {
    ("bare/OPENAI_API_KEY", "batch"),
    ("bare/OPENAI_API_KEY", "sync"),
    ("anthropic/", "batch"),
    ("google/", "sync"),
}


def echo_workflow(run, root: Path, model: str, backend: str, handler: type[_Echoing]) -> list[tuple[list[str], bytes]]:
    """prepare, then poll-and-advance --submit against 500, 404 and 400 answers, then status,
    status --format json and doctor: every command's arguments and output."""
    target = ["--eval-backend", backend, "--create-grace", "0", "--root", str(root)]
    outputs = []
    code, out = run(["prepare", "--stage", "lca", "--model", model, "--limit", "1", "--provider", "env", *target])
    assert code == 0, out.decode("utf-8", "replace")
    outputs.append((["prepare"], out))
    for status in (500, 404, 400):
        handler.status = status
        code, out = run(["poll-and-advance", "--submit", "--provider", "env", *target])
        outputs.append(([f"poll-and-advance at HTTP {status}"], out))
        assert b"Traceback" not in out, out.decode("utf-8", "replace")
    for args in (["status"], ["status", "--format", "json"], ["doctor"]):
        _, out = run([*args, "--root", str(root)])
        outputs.append((args, out))
    return outputs


@pytest.mark.parametrize(
    ("kind", "backend"),
    [pytest.param(k, b, id=f"{k}-{b}", marks=() if (k, b) in EVERY_RUN else pytest.mark.slow) for k, b in SCENARIOS],
)
def test_no_echoed_key_is_printed_stored_or_written(tmp_path, monkeypatch, echoing, in_process, kind, backend):
    url, handler = echoing
    model, variables = PROVIDER_KINDS[kind]
    for name, value in variables.items():
        monkeypatch.setenv(name, value.format(url=url))
    root = tmp_path / "ws"
    outputs = echo_workflow(in_process, root, model, backend, handler)
    # The controls: the key was sent, and what the gateway said reached the user (and, for the sync
    # backend's 400, the database and responses/): a leak would be seen.
    assert any(SENTINEL in seen for seen in handler.keys_seen), handler.keys_seen[:5]
    printed = b"".join(out for _, out in outputs)
    assert ECHO.encode() in printed
    dump = database_dump(root)
    if backend == "sync":
        assert ECHO in dump
        assert any(ECHO.encode() in file_bytes(p) for p in (root / "responses").rglob("*.jsonl*"))
    for args, out in outputs:
        assert leaks(out) == [], (args, out.decode("utf-8", "replace")[-2000:])
    assert leaks(dump.encode("utf-8")) == []
    assert leaking_files(tmp_path) == {}
    # ... and the user still learns which variable is at fault.
    assert b"[redacted " + variables_of(variables).encode() in printed


def variables_of(variables: dict[str, str]) -> str:
    """The variable the sentinel key is in."""
    return next(name for name, value in variables.items() if value == SENTINEL)


PASSWORD = "pa55-SENTINEL-w0rd"
QUERY_KEY = "qk-SENTINEL-9876543210"


@pytest.mark.parametrize("backend", ["batch", "sync"])
@pytest.mark.parametrize(
    ("base_url", "secret", "recorded"),
    [
        ("http://user:{secret}@{host}/v1", PASSWORD, "http://127.0.0.1:*/v1"),
        ("http://{host}/v1?api-key={secret}", QUERY_KEY, "http://127.0.0.1:*/v1?api-key=[redacted]"),
    ],
    ids=["userinfo", "query"],
)
def test_credentials_in_the_base_url_go_nowhere(
    tmp_path, monkeypatch, echoing, in_process, backend, base_url, secret, recorded
):
    """A password in OPENAI_BASE_URL's userinfo, or a key in its query string, is in no output, no
    file and no row: not in the manifest's endpoints, nor in `files.endpoint`."""
    url, handler = echoing
    monkeypatch.setenv("OPENAI_BASE_URL", base_url.format(secret=secret, host=url.removeprefix("http://")))
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    root = tmp_path / "ws"
    outputs = echo_workflow(in_process, root, "m", backend, handler)
    # Basic credentials sent from the userinfo are base64 of "user:password": no better hidden.
    needles = [secret, base64.b64encode(f"user:{secret}".encode()).decode(), *NEEDLES]
    assert any(secret in seen or needles[1] in seen for seen in handler.keys_seen), handler.keys_seen[:8]
    printed = b"".join(out for _, out in outputs)
    assert ECHO.encode() in printed
    for args, out in outputs:
        assert leaks(out, needles) == [], (args, out.decode("utf-8", "replace")[-2000:])
    assert leaks(database_dump(root).encode("utf-8"), needles) == []
    assert leaking_files(tmp_path, needles) == {}
    manifest = json.loads(next((root / "runs").rglob("manifest.json")).read_text(encoding="utf-8"))
    assert manifest["endpoints"]["eval"] == recorded


def test_a_traceback_is_printed_redacted(monkeypatch, capsys):
    """A bug's traceback can quote an SDK exception, and so the provider's echo of the key: the
    CLI's excepthook prints it as Python would, redacted and with control characters escaped."""
    from lexpilot_batch.cli.output import redacting_excepthook

    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    try:
        raise RuntimeError(f"unexpected answer: Authorization: Bearer {SENTINEL}\x1b[2J")
    except RuntimeError as exc:
        redacting_excepthook(type(exc), exc, exc.__traceback__)
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "RuntimeError: unexpected answer" in err
    assert "[redacted OPENAI_API_KEY]" in err and "\\u001b[2J" in err
    assert leaks(err.encode()) == [] and "\x1b" not in err


def test_a_bug_in_a_command_is_printed_redacted_through_main(monkeypatch, in_process, tmp_path):
    """typer puts its own excepthook in place of the CLI's when the app is called, and that hook
    prints through Python's own: a bug's traceback reached the terminal unredacted."""
    from lexpilot_batch.report import produce
    from lexpilot_batch.util.redaction import register_secret

    register_secret("OPENAI_API_KEY", SENTINEL)

    def bug(*args, **kwargs):
        raise RuntimeError(f"unexpected answer: Authorization: Bearer {SENTINEL}")

    monkeypatch.setattr(produce, "produce_report", bug)
    code, out = in_process(["report", "--root", str(tmp_path / "ws")])
    text = out.decode("utf-8")
    assert code == 1 and "Traceback (most recent call last):" in text and "RuntimeError: unexpected answer" in text
    assert "[redacted OPENAI_API_KEY]" in text and leaks(out) == []
