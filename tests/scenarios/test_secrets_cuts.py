"""Redact before cutting (issue 44, item 4): a sentinel key placed to straddle every place the
product shortens a provider's text leaves no fragment of 8 or more of its characters in any output,
any row of any table or any file, `responses/` included.

Two sentinels, each at several offsets across each cut (the cut keeping 8, half, and all but one of
its characters): `CONFIGURED`, the value of `OPENAI_API_KEY` with no key's shape (only knowing it
finds it), and `SHAPED`, an `sk-` key the workspace was never given (only its shape finds it). The
default suite places each at the middle of each cut; the slow campaign (`-m slow`) at every offset.

| cut | the text | driven by |
| --- | --- | --- |
| 1,000 characters of an error body that is not JSON (`openai.chat`) | a gateway's 400 to the sync backend | prepare, poll-and-advance, status, doctor through the CLI |
| 80 of an unreadable line, 100 of a stray custom_id, 40 and 80 of a conflicting answer and failure (`ingest`); 60 of a finish_reason, 500 of a refusal (`answers`); 120 of a judge's output (`judges`) | result lines | `ingest FILE` (the manual backend) and status, doctor through the CLI; and the same lines, never scrubbed (as saved before the key was known), through ingest's own reading |
| 200 of a line beyond the bounds (`result_lines`) | result lines | ingest's own reading |
| 40 of a line, 64 of a custom_id (`doctor`) | a saved, not ingested file | `doctor` |
| 300 of a quota refusal (`budgets`) | a batch's error | `budgets.lower_after_refusal` |
| 200 of an answer without a job or a signed URL (`together.batch`) | Together's answers | its backend against a fake client |
| 160 of a failure reason (`status`) | a stored reason | `status` |

Every one of them leaks on the code before `redaction.redact_cut` (a part of the key survives the
cut, and no longer matches), and the end-to-end ones also for want of `redaction.Scrubber` and the
key shapes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from lexpilot_batch.engine import budgets
from lexpilot_batch.engine.answers import read_content
from lexpilot_batch.engine.ingest import apply_result_files
from lexpilot_batch.engine.result_lines import read_lines
from lexpilot_batch.state.workspace import Workspace

CONFIGURED = "Vq7ZxP9pLm2NwR4tY8bK3sD6fH1j"  # OPENAI_API_KEY: no key's shape
SHAPED = "sk-proj-Cw8TqL2vN6xR9zK4mB7yP3dF"  # never configured: an `sk-` key's shape
FRAGMENT = 8


def offsets(key: str) -> list[int]:
    """How many of its characters the cut keeps: 8 (the first that would be a leak), half, all but one."""
    return [FRAGMENT, len(key) // 2, len(key) - 1]


# (key, characters the cut keeps): every offset in the slow campaign, the middle one by default.
PLACEMENTS = [
    pytest.param(key, kept, id=f"{name}-{kept}", marks=() if kept == len(key) // 2 else pytest.mark.slow)
    for name, key in (("configured", CONFIGURED), ("shaped", SHAPED))
    for kept in offsets(key)
]


def fragments(key: str) -> set[str]:
    return {key[i : i + FRAGMENT] for i in range(len(key) - FRAGMENT + 1)}


def leaked(data: bytes | str, key: str) -> list[str]:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return sorted(f for f in fragments(key) if f in text)


def straddling(cut: int, kept: int, key: str, head: str = "x", tail: str = " and more") -> str:
    """Text whose cut at `cut` keeps the first `kept` characters of `key`: it starts at `cut - kept`,
    after a space (where an echo puts a key: after a header's name, a quote, a word)."""
    before = cut - kept - 1
    return (head * (before // len(head) + 1))[:before] + " " + key + tail


def leaking_files(root: Path, key: str) -> dict[str, list[str]]:
    """Every file under `root` holding a fragment (the database and its WAL too)."""
    return {
        p.relative_to(root).as_posix(): hits
        for p in root.rglob("*")
        if p.is_file() and (hits := leaked(p.read_bytes(), key))
    }


def database_dump(root: Path) -> str:
    db = sqlite3.connect(root / "state" / "lexpilot.sqlite3")
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(f"{t}: {row!r}" for t in tables for row in db.execute(f'SELECT * FROM "{t}"'))
    finally:
        db.close()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CONFIGURED)


def assert_nowhere(key: str, outputs: list[tuple[str, bytes | str]], root: Path) -> None:
    for what, out in outputs:
        assert leaked(out, key) == [], (what, out[-1500:])
    assert leaked(database_dump(root), key) == []
    assert leaking_files(root, key) == {}  # (the inputs a test wrote beside it hold the key, on purpose)


# --- 1,000 characters of a gateway's error body, through the sync backend -----------------------------


class _Refusing(BaseHTTPRequestHandler):
    """Answers every call 400 with a plain-text body (no JSON) whose first 1,000 characters end inside `key`."""

    body: ClassVar[bytes] = b""
    url: ClassVar[str] = ""
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(400)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def refusing() -> Iterator[type[_Refusing]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Refusing.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield _Refusing
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("key", "kept"), PLACEMENTS)
def test_a_gateway_error_body_cut_at_1000_characters_keeps_no_part_of_a_key(
    tmp_path, monkeypatch, in_process, keys, refusing, key, kept
):
    refusing.body = straddling(1000, kept, key, head="upstream said: ").encode()
    monkeypatch.setenv("OPENAI_BASE_URL", refusing.url)
    monkeypatch.setenv("OPENAI_API_KEY", CONFIGURED)
    root = tmp_path / "ws"
    target = ["--eval-backend", "sync", "--root", str(root)]
    outputs: list[tuple[str, bytes | str]] = []
    for args in (
        ["prepare", "--stage", "lca", "--model", "m", "--limit", "1", "--provider", "env", *target],
        ["poll-and-advance", "--submit", "--provider", "env", *target],
        ["status", "--verbose", "--root", str(root)],
        ["status", "--format", "json", "--root", str(root)],
        ["doctor", "--root", str(root)],
    ):
        _, out = in_process(args)
        outputs.append((args[0], out))
    # The controls: the key straddles the cut; the gateway's words reached the request's error.
    assert refusing.body.decode()[:1000].endswith(key[:kept])
    assert "upstream said" in database_dump(root)
    assert_nowhere(key, outputs, root)


# --- result lines from elsewhere (`ingest FILE`), and the same lines as saved before a key was known ---------


def answer_line(
    custom_id: str, content: str | None = "好的。", finish: str = "stop", refusal: str | None = None
) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    body = {"choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    return {"custom_id": custom_id, "response": {"status_code": 200, "body": body}, "error": None}


def crafted(ids: list[str], key: str, kept: int) -> tuple[list[str], list[str]]:
    """(first file, second file) of result lines for four requests, a key straddling each cut:
    a finish_reason (60), a refusal (500); two answers the second file contradicts with an answer
    (40) and a failure (80); an unreadable line (80), a stray custom_id (100), a line too deep with
    no id (200)."""
    first = [
        answer_line(ids[0], finish=straddling(60, kept, key)),
        answer_line(ids[1], content=None, refusal=straddling(500, kept, key)),
        answer_line(ids[2]),
        answer_line(ids[3]),
        {**answer_line(ids[3]), "custom_id": straddling(100, kept, key)},
    ]
    error = {"code": "server_error", "message": straddling(80 - len("server_error: "), kept, key)}
    second = [
        answer_line(ids[2], content=straddling(40, kept, key)),
        {"custom_id": ids[3], "response": None, "error": error},
    ]
    deep = '{"a":' * 100 + json.dumps(straddling(200 - 5 * 100, kept, key)) + "}" * 100
    lines = [json.dumps(line, ensure_ascii=False) for line in first] + [straddling(80, kept, key), deep]
    return lines, [json.dumps(line, ensure_ascii=False) for line in second]


def manual_workspace(in_process: Callable, root: Path) -> list[tuple[str, bytes | str]]:
    outputs: list[tuple[str, bytes | str]] = []
    backends = ["--eval-backend", "manual", "--user-backend", "manual", "--judge-backend", "manual"]
    for args in (
        ["prepare", "--stage", "lca", "--model", "sim-eval", "--limit", "2", *backends, "--root", str(root)],
        ["poll-and-advance", "--submit", "--root", str(root)],
    ):
        code, out = in_process(args)
        assert code == 0, out
        outputs.append((args[0], out))
    return outputs


def ids_of(root: Path, wave: int, role: str = "eval") -> list[str]:
    db = sqlite3.connect(root / "state" / "lexpilot.sqlite3")
    try:
        query = "SELECT custom_id FROM requests WHERE wave = ? AND role = ? AND status = 'pending' ORDER BY pk"
        return [r[0] for r in db.execute(query, (wave, role))]
    finally:
        db.close()


@pytest.mark.parametrize(("key", "kept"), PLACEMENTS)
def test_result_lines_ingested_from_elsewhere_keep_no_part_of_a_key(tmp_path, in_process, keys, key, kept):
    root = tmp_path / "ws"
    outputs = manual_workspace(in_process, root)
    ids = ids_of(root, 1)
    first, second = crafted(ids, key, kept)
    for n, lines in enumerate((first, second)):
        path = tmp_path / f"elsewhere-{n}.jsonl"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        outputs.append((f"ingest {n}", in_process(["ingest", str(path), "--root", str(root)])[1]))
    # Wave 2: the judge's classifications, one of them no JSON, the key straddling its 120-character quote.
    outputs.append(("poll", in_process(["poll-and-advance", "--submit", "--root", str(root)])[1]))
    judged = ids_of(root, 2, "judge")
    assert judged
    judge_lines = [answer_line(judged[0], content=straddling(120, kept, key))] + [answer_line(i) for i in judged[1:]]
    path = tmp_path / "judged.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in judge_lines), encoding="utf-8")
    outputs.append(("ingest judged", in_process(["ingest", str(path), "--root", str(root)])[1]))
    for args in (["status", "--verbose"], ["status", "--format", "json"], ["doctor"]):
        outputs.append((args[0], in_process([*args, "--root", str(root)])[1]))
    # The controls: each line reached what it fails or records.
    dump = database_dump(root)
    assert "refusal:" in dump and "cut off (finish_reason=" in dump and "no JSON object in judge output" in dump
    assert "conflict" in dump and "unknown_custom_id" in dump and "bad_line" in dump
    assert_nowhere(key, outputs, root)


@pytest.mark.parametrize(("key", "kept"), PLACEMENTS)
def test_lines_saved_before_their_key_was_known_are_cut_after_they_are_redacted(tmp_path, in_process, keys, key, kept):
    """Ingest's own reading of result lines no `Scrubber` saw (a file saved by an earlier version, or
    before the key was set): every anomaly and failure it stores quotes them redacted, then cut."""
    root = tmp_path / "ws"
    outputs = manual_workspace(in_process, root)
    ids = ids_of(root, 1)
    first, second = crafted(ids, key, kept)
    too_large = '{"custom_id": "' + straddling(200 - 15, kept, key) + '", "x": "' + "y" * (9 << 20) + '"}'
    with Workspace(root) as ws:
        [file_pk] = [r[0] for r in ws.store.conn.execute("SELECT pk FROM files WHERE wave = 1")]
        for n, lines in enumerate((first + [too_large], second)):
            path = tmp_path / f"saved-{n}.jsonl"
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            with ws.store.transaction() as tx:
                stats = apply_result_files(tx, [file_pk], [path], None)
            outputs.append((f"ingest {n}", "\n".join(stats.anomalies)))
            outputs += [(f"read {n}: line {number}", raw) for number, _, raw, flaw in read_lines(path) if flaw]
    outputs.append(("judge", str(read_content(straddling(120, kept, key), "lca_label", 0))))
    dump = database_dump(root)
    assert "refusal:" in dump and "conflict" in dump and "bad_line" in dump
    assert any(what.startswith("read 0") and len(raw) > 150 for what, raw in outputs)  # the 200-character quote
    assert_nowhere(key, outputs, root)


# --- doctor, budgets, Together, status ------------------------------------------------------------------


@pytest.mark.parametrize(("key", "kept"), PLACEMENTS)
def test_doctor_quotes_a_damaged_saved_file_redacted_then_cut(tmp_path, in_process, keys, key, kept):
    root = tmp_path / "ws"
    outputs = manual_workspace(in_process, root)
    ids = ids_of(root, 1)
    db = sqlite3.connect(root / "state" / "lexpilot.sqlite3")
    try:
        # Results saved, not yet ingested (as an earlier version saved them): an unreadable line
        # (quoted to 40 characters) and then a line of no request here (its id quoted to 64).
        rel = "responses/w0001/saved.output.jsonl"
        db.execute("UPDATE files SET status = 'downloaded', output_path = ?, backend = 'batch'", (rel,))
        db.commit()
    finally:
        db.close()
    saved = root / rel
    saved.parent.mkdir(parents=True, exist_ok=True)
    for name, lines in (
        ("unreadable", [straddling(40, kept, key)]),
        ("stray", [json.dumps(answer_line(ids[0])), json.dumps({"custom_id": straddling(64, kept, key)})]),
    ):
        saved.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        outputs.append((name, in_process(["doctor", "--root", str(root)])[1]))
    saved.unlink()
    assert b"is not a result object" in outputs[-2][1] and b"not a request of this file" in outputs[-1][1]
    assert_nowhere(key, outputs, root)


@pytest.mark.parametrize(("key", "kept"), PLACEMENTS)
def test_a_quota_refusal_is_recorded_redacted_then_cut(tmp_path, keys, key, kept):
    root = tmp_path / "ws"
    with Workspace(root) as ws, ws.store.transaction() as db:
        budgets.lower_after_refusal(db, "m", straddling(300, kept, key), 1000, 1000, 1.0)
    assert "xxxx" in database_dump(root)  # the control: the message is recorded
    assert_nowhere(key, [], root)


class _Answering:
    """A client whose every POST answers `answer` (a 200 that holds neither a job nor a signed URL)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def with_options(self, **options: Any) -> _Answering:
        return self

    def post(self, *args: Any, **kwargs: Any) -> Any:
        return self.answer


@pytest.mark.parametrize(("key", "kept"), PLACEMENTS)
def test_together_answers_without_a_job_are_quoted_redacted_then_cut(tmp_path, keys, key, kept):
    from lexpilot_batch.providers.routing.endpoints import Endpoint
    from lexpilot_batch.providers.together.batch import TogetherBatchBackend
    from lexpilot_batch.providers.together.spec import LIMITS

    backend = TogetherBatchBackend(Endpoint("eval", "http://127.0.0.1:9/v1", "OPENAI_API_KEY", CONFIGURED), LIMITS)
    outputs: list[tuple[str, bytes | str]] = []
    # `str(answer)` of a dict quotes its keys first: the key straddles the 200-character cut.
    backend.client = _Answering({"note": straddling(200 - len("{'note': '"), kept, key)})  # type: ignore[assignment]
    with pytest.raises(Exception) as created:
        backend._create("file-1", {}, None, None)
    outputs.append(("create", str(created.value)))
    with pytest.raises(Exception) as uploaded:
        backend._start_upload({})
    outputs.append(("upload", str(uploaded.value)))
    assert all("note" in out for _, out in outputs)  # the controls: the answers are quoted
    for what, out in outputs:
        assert leaked(out, key) == [], (what, out)


@pytest.mark.parametrize(("key", "kept"), PLACEMENTS)
def test_status_cuts_a_stored_reason_after_redacting_it(tmp_path, in_process, keys, key, kept):
    """A failure reason stored before its key was known (an earlier version's workspace): `status`
    prints it redacted, then cut to 160 characters."""
    root = tmp_path / "ws"
    manual_workspace(in_process, root)
    db = sqlite3.connect(root / "state" / "lexpilot.sqlite3")
    try:
        db.execute(
            "UPDATE threads SET status = 'failed', reason = ? WHERE pk = (SELECT MIN(pk) FROM threads)",
            (straddling(160, kept, key),),
        )
        db.commit()
    finally:
        db.close()
    _, shown = in_process(["status", "--root", str(root)])
    assert b"most often:" in shown
    assert leaked(shown, key) == [], shown
