"""Control characters never reach a terminal (issue 23, item 5): `text.terminal_safe`, and every
command that prints a failure reason, a request's error, an anomaly, a batch's errors or what a
provider answered, with a payload that clears the screen and retitles the window."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lexpilot_batch.util.text import display_width, pad, terminal_safe

# Clear screen, cursor home, window title, bell, the 8-bit CSI, a right-to-left override, and a
# carriage return and line feed that would forge a line of their own.
PAYLOAD = "\x1b[2J\x1b[H\x1b]0;pwned\x07 boom \x9b31m\u202eevil\r\nRun forged  model x"
RAW = [b"\x1b", b"\x07", "\x9b".encode(), "\u202e".encode(), b"\r"]


def raw_controls(data: bytes) -> list[bytes]:
    return [c for c in RAW if c in data]


def test_terminal_safe_escapes_what_drives_a_terminal():
    assert terminal_safe(PAYLOAD) == (
        "\\u001b[2J\\u001b[H\\u001b]0;pwned\\u0007 boom \\u009b31m\\u202eevil\\r\\nRun forged  model x"
    )
    assert terminal_safe("合同纠纷\u3000第一审 — ok") == "合同纠纷\u3000第一审 — ok"  # printable, not ASCII
    assert terminal_safe("a\nb\r\nc\td", keep_newlines=True) == "a\nb\\r\nc\\td"
    # Inside JSON strings the escapes mean the characters themselves: a document stays the same.
    doc = json.dumps({"reason": "\x9b\u202e\x1b"}, ensure_ascii=False, indent=2)
    assert json.loads(terminal_safe(doc, keep_newlines=True)) == {"reason": "\x9b\u202e\x1b"}
    assert display_width(pad("案", 4)) == 4


@pytest.fixture
def hostile_workspace(tmp_path, in_process) -> Path:
    """A finished simulated run whose stored texts all carry the payload: a failed thread's reason,
    a request's error, an ingest anomaly, a batch's errors and status."""
    root = tmp_path / "ws"
    code, out = in_process(
        ["run", "--stage", "lca", "--provider", "simulated", "--model", "sim-eval", "--limit", "2", "--root", str(root)]
    )
    assert code == 0, out.decode("utf-8", "replace")
    db = sqlite3.connect(root / "state" / "lexpilot.sqlite3")
    with db:
        db.execute(
            "UPDATE threads SET status = 'failed', reason = ? WHERE pk = (SELECT MIN(pk) FROM threads)", (PAYLOAD,)
        )
        db.execute(
            "UPDATE requests SET status = 'failed', error = ? WHERE pk = (SELECT MIN(pk) FROM requests)", (PAYLOAD,)
        )
        db.execute(
            "INSERT INTO anomalies (file_pk, kind, custom_id, detail, at) VALUES (1, 'bad_line', ?, ?, 0)",
            (PAYLOAD, PAYLOAD),
        )
        db.execute(
            "UPDATE files SET status = 'submitted', batch_status = ?, batch_errors = ?, batch_id = ?"
            " WHERE pk = (SELECT MAX(pk) FROM files)",
            (PAYLOAD, json.dumps([{"code": PAYLOAD, "message": PAYLOAD}]), "batch_" + PAYLOAD),
        )
    db.close()
    return root


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["status", "--format", "json"],
        ["doctor"],
    ],
    ids=" ".join,
)
def test_stored_payloads_never_reach_the_terminal_raw(hostile_workspace, in_process, args):
    code, out = in_process([*args, "--root", str(hostile_workspace)])
    assert b"Traceback" not in out, out.decode("utf-8", "replace")
    assert raw_controls(out) == [], out.decode("utf-8", "replace")[-3000:]
    assert b"\\u001b[2J" in out or b"\\u009b" in out  # the control: the payload was printed, escaped
    if args[0] == "status":
        if "json" in args:
            assert json.loads(out)["failed_threads"][0]["reason"] == PAYLOAD  # the same text, safely written
        else:
            assert not any(line.startswith(b"Run forged") for line in out.splitlines()), out.decode()


class _Hostile(BaseHTTPRequestHandler):
    """Answers every call 400 with the payload as the provider's message."""

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps(
            {"error": {"message": f"bad request {PAYLOAD}", "type": "invalid_request_error", "code": None}}
        ).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def hostile_provider() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("backend", ["batch", "sync"])
def test_a_provider_answering_the_payload_never_reaches_the_terminal_raw(
    tmp_path, monkeypatch, in_process, hostile_provider, backend
):
    """batch: the upload's 400 is the `Error:` line; sync: each request's 400 fails its thread, whose
    reason `status` prints."""
    monkeypatch.setenv("OPENAI_BASE_URL", hostile_provider)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-hostile-0123456789")
    target = ["--provider", "env", "--eval-backend", backend, "--root", str(tmp_path / "ws")]
    outputs = []
    for args in (
        ["prepare", "--stage", "lca", "--model", "m", "--limit", "1", *target],
        ["poll-and-advance", "--submit", *target],
        ["status", "--root", str(tmp_path / "ws")],
        ["doctor", "--root", str(tmp_path / "ws")],
    ):
        _, out = in_process(args)
        assert b"Traceback" not in out, out.decode("utf-8", "replace")
        outputs.append(out)
    printed = b"".join(outputs)
    assert b"bad request \\u001b[2J" in (outputs[1] if backend == "batch" else outputs[2])  # it was printed
    assert raw_controls(printed) == [], printed.decode("utf-8", "replace")[-3000:]
