"""API keys never reach a file or an output (SPEC §7): a whole workflow through the CLI, every
command a real process, against the simulated provider in its own process, with sentinel keys;
then every byte the workflow left anywhere, and everything it printed, is searched for them.

A provider that rejects the key (HTTP 401) is a tiny server of this test that even echoes the key
back in its error message, as some providers do: the message the user sees names the variable
the key came from, never the key.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from crash_helpers import SimServer, base_env

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


def leaks(data: bytes) -> list[str]:
    return [needle for needle in NEEDLES if needle.encode("utf-8") in data]


def leaking_files(root: Path) -> dict[str, list[str]]:
    """Every file under root (binary ones too: the SQLite database and its WAL) holding a needle."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            hits = leaks(path.read_bytes())
            if hits:
                found[path.relative_to(root).as_posix()] = hits
    return found


def test_the_search_finds_a_key_wherever_it_is(tmp_path):
    """The control: a search that cannot fail proves nothing."""
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "blob.bin").write_bytes(b"\x00\x01" + SENTINEL[:12].encode() + b"\xff")
    (tmp_path / "masked.txt").write_text(f"key sk-...{JUDGE_SENTINEL[-8:]}", encoding="utf-8")
    assert leaking_files(tmp_path) == {"deep/er/blob.bin": [SENTINEL[:12]], "masked.txt": [JUDGE_SENTINEL[-8:]]}


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


def test_the_workflow_ran_with_the_keys(workflow):
    """The simulated provider refuses a request without a bearer key, so finishing proves they were sent."""
    base, results = workflow
    status = json.loads(results[3][1].stdout)
    assert [t["done"] for t in status["runs"][0]["tasks"].values()] == [6, 3, 3, 3, 3]
    assert status["requests"]["user"]["answered"] > 0  # the sync role ran
    assert status["requests"]["judge"]["answered"] > 0  # LEXPILOT_JUDGE_API_KEY was used
    assert b"differs" in results[7][1].stderr or b"different settings" in results[7][1].stderr
    assert (base / "export" / "eval_results").is_dir()


def test_no_file_the_workflow_left_holds_a_key(workflow):
    base, _ = workflow
    searched = {p.relative_to(base).parts[0] for p in base.rglob("*") if p.is_file()}
    assert {"ws", "export", "sim-state", "sim.log"} <= searched
    assert leaking_files(base) == {}


def test_no_output_of_any_command_holds_a_key(workflow):
    _, results = workflow
    for args, done in results:
        assert leaks(done.stdout + done.stderr) == [], args


# --- a provider that rejects the key -----------------------------------------------------------------


class _Rejecting(BaseHTTPRequestHandler):
    """Answers every request 401, echoing the key it was given, as a careless provider might."""

    keys_seen: ClassVar[list[str]] = []

    def _reject(self) -> None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                self.rfile.read(size)
                self.rfile.readline()
                if size == 0:
                    break
        else:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
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
        ({"OPENAI_API_KEY": JUDGE_SENTINEL, "LEXPILOT_EVAL_API_KEY": SENTINEL}, "LEXPILOT_EVAL_API_KEY", "batch"),
        ({"OPENAI_API_KEY": SENTINEL}, "OPENAI_API_KEY", "sync"),
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
