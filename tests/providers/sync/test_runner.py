"""The `sync` backend against the simulated provider over real HTTP: batch-shaped output that ingest
reads, bounded concurrency and read-ahead, the SDK's 429/5xx retries, resuming after a kill, error
lines versus errors that stop a run, and keys that never reach a message or a file."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.data import Message
from lexpilot_batch.engine.answers import judge_line
from lexpilot_batch.errors import ConfigError, LexpilotError, ProviderError
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.sync import lines
from lexpilot_batch.providers.sync import runner as sync
from lexpilot_batch.providers.sync.runner import SyncRunner, saved_custom_ids
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.simulated import roles as sim_models
from lexpilot_batch.simulated.apis.openai import OpenAIApi
from lexpilot_batch.simulated.batches import sample_key
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.ratelimits import RateLimits
from tests.helpers.interrupts import PROMPT, ctrl_c_as_on_windows, needs_sigmask
from tests.helpers.simulated import jsonl, request_line

KEY = "sk-test-secret-4242"
HISTORY = [
    Message(
        role="user",
        content="我2021年3月借给朋友5万元，他写了借条，约定一年后还，现在一直不还。我想要求他还钱并支付利息。",
    ),
]
DETAILS = ["借条约定年利率6%", "2022年5月被告通过微信归还了1万元"]
QUESTIONS = ["请问借条上有没有约定利息？", "对方是否归还过部分借款？", "您们是什么关系？", "借款是现金还是转账？"]


@pytest.fixture(autouse=True)
def _no_env_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SimulatedServer]:
    with SimulatedServer(tmp_path / "sim") as running:
        yield running


def openai_routes(server: SimulatedServer) -> OpenAIApi:
    """The server's handlers of OpenAI's routes, whose chat completions a test stands in for."""
    handlers = server.handlers["openai"]
    assert isinstance(handlers, OpenAIApi)
    return handlers


def endpoint(base_url: str, key: str | None = KEY) -> Endpoint:
    return Endpoint("eval", base_url, "LEXPILOT_EVAL_API_KEY", key, backend="sync")


def cases(n: int) -> list[tuple[str, str, str, int]]:
    """(custom_id, prompt, ingest parser, n_claims) for n requests cycling over every role's prompt."""
    claims = ["返还借款5万元", "支付利息"]
    asked = [*HISTORY, Message(role="assistant", content=QUESTIONS[0])]
    out: list[tuple[str, str, str, int]] = []
    for i in range(n):
        q = QUESTIONS[i % len(QUESTIONS)] + "（" + str(i) + "）"
        kind = i % 6
        if kind == 0:
            prompt, parser = prompts.lexawn_prompt([*HISTORY, Message(role="assistant", content=q), HISTORY[0]]), "text"
        elif kind == 1:
            prompt, parser = (
                prompts.force_ask_prompt([*HISTORY, Message(role="assistant", content=q), HISTORY[0]]),
                "text",
            )
        elif kind == 2:
            prompt, parser = prompts.lca_classify_prompt(HISTORY, q), "lca_label"
        elif kind == 3:
            prompt, parser = prompts.dcg_judge_prompt(HISTORY, q, ["利息的计算标准"], DETAILS), "dcg_decision"
        elif kind == 4:
            prompt, parser = prompts.user_model_prompt(asked, ["利息的计算标准"], DETAILS), "text"
        else:
            prompt, parser = prompts.extract_verdicts_prompt(claims, f"第一项请求：支持。第二项{i}：驳回。"), "verdicts"
        out.append((f"run1-{i}-step-1", prompt, parser, len(claims)))
    return out


def write_requests(path: Path, items: list[tuple[str, str, str, int]], model: str = "sim-model") -> Path:
    lines = [
        request_line(cid, prompt, model=model, temperature=0.7, max_tokens=8192, n=1) for cid, prompt, _, _ in items
    ]
    path.write_bytes(jsonl(lines))
    return path


def output_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_line_has_the_batch_output_shape_and_ingest_reads_it(server: SimulatedServer, tmp_path: Path) -> None:
    items = cases(18)  # judges among them answer with DeepSeek-style `reasoning_content`
    requests = write_requests(tmp_path / "req.jsonl", items)
    out = tmp_path / "responses" / "out.jsonl"
    progress: list[tuple[int, int]] = []

    stats = SyncRunner(endpoint(server.base_url), concurrency=4).run(
        requests, out, lambda done, total: progress.append((done, total))
    )

    assert (stats.total, stats.already_done, stats.sent, stats.ok, stats.failed) == (18, 0, 18, 18, 0)
    assert progress[0] == (0, 18) and progress[-1] == (18, 18) and len(progress) == 19
    lines = output_lines(out)
    by_id = {line["custom_id"]: line for line in lines}
    assert len(lines) == len(by_id) == 18
    reasoning_seen = 0
    for cid, prompt, parser, n_claims in items:
        line = by_id[cid]
        assert set(line) == {"id", "custom_id", "response", "error"}
        assert line["id"].startswith("syncreq_") and line["error"] is None
        assert line["response"]["status_code"] == 200
        assert line["response"]["request_id"].startswith("req_")
        body = line["response"]["body"]
        assert body["object"] == "chat.completion" and body["usage"]["prompt_tokens"] > 0
        ok, _, _, error, _, _ = judge_line(line, parser, n_claims)
        assert ok, (cid, error)
        # Fields the SDK's models do not declare survive: the raw JSON is what is saved. The custom_id,
        # sent as the call's X-Client-Request-Id, draws the answer as a batch line's custom_id does.
        expected = sim_models.respond(prompt, server.seed, sample=sample_key(cid)).reasoning
        assert body["choices"][0]["message"].get("reasoning_content") == expected
        reasoning_seen += expected is not None
    assert reasoning_seen > 0
    raw = out.read_bytes()
    assert "借款".encode() in raw or "借条".encode() in raw  # UTF-8, not \\u escapes
    assert KEY.encode() not in raw


def test_concurrency_and_read_ahead_are_bounded(
    server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    concurrency = 3
    requests = write_requests(tmp_path / "req.jsonl", cases(24))
    original = openai_routes(server).chat_completion
    lock = threading.Lock()
    state = {"active": 0, "max_active": 0, "finished": 0, "max_ahead": 0}
    pulled: list[int] = []

    def slow(body: Any, request_id: str | None = None) -> Any:
        with lock:
            state["active"] += 1
            state["max_active"] = max(state["max_active"], state["active"])
            if pulled:
                state["max_ahead"] = max(state["max_ahead"], pulled[-1] - state["finished"])
        try:
            time.sleep(0.03)
            return original(body, request_id)
        finally:
            with lock:
                state["active"] -= 1
                state["finished"] += 1

    real_requests = lines.read_requests

    def counting(path: Path, call: Any) -> Iterator[tuple[str, dict]]:
        pulled.append(0)
        for item in real_requests(path, call):
            pulled[-1] += 1
            yield item

    monkeypatch.setattr(openai_routes(server), "chat_completion", slow)
    monkeypatch.setattr(lines, "read_requests", counting)  # the check's and the key's reads
    monkeypatch.setattr(sync, "read_requests", counting)  # the sending pass's
    stats = SyncRunner(endpoint(server.base_url), concurrency=concurrency).run(requests, tmp_path / "out.jsonl")

    assert stats.ok == 24
    assert 2 <= state["max_active"] <= concurrency  # parallel, and never more than asked
    # The check reads every line, the window's key one (its model), and the sending pass reads at
    # most 2 x concurrency requests ahead of the answers.
    assert pulled[:2] == [24, 1] and len(pulled) == 3 and state["max_ahead"] <= 2 * concurrency


def test_429_and_500_are_retried_by_the_sdk_and_all_succeed(tmp_path: Path) -> None:
    faults = parse_faults("http_429=0.35,http_500=0.1,retry_after=0.01,seed=5")
    requests = write_requests(tmp_path / "req.jsonl", cases(16))
    with SimulatedServer(tmp_path / "sim", faults=faults) as server:
        stats = SyncRunner(endpoint(server.base_url), concurrency=4, max_retries=10).run(
            requests, tmp_path / "out.jsonl"
        )
        counts = dict(server.stats)
    assert stats.ok == 16 and stats.failed == 0
    assert counts["http_429"] > 0 and counts["retried"] > 0
    assert counts["calls"] == 16 + counts["http_429"] + counts.get("http_500", 0)
    assert all(line["response"]["status_code"] == 200 for line in output_lines(tmp_path / "out.jsonl"))


def test_429_beyond_the_retries_is_sent_again_and_never_written_as_a_failure(
    server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 that outlasts the SDK's retries is no failure of the request: it is sent again after a
    backoff and answered, using up none of its attempts (issue 16: a sync 429 used them up)."""
    items = cases(4)
    requests = write_requests(tmp_path / "req.jsonl", items)
    original = openai_routes(server).chat_completion
    unlucky = items[2][1]
    refused = [0]

    def limited(body: Any, request_id: str | None = None) -> Any:
        if body["messages"][0]["content"] == unlucky and refused[0] < 5:
            refused[0] += 1
            raise ApiError(
                429,
                "Rate limit reached (test).",
                type="requests",
                code="rate_limit_exceeded",
                headers={"retry-after-ms": "5"},
            )
        return original(body, request_id)

    monkeypatch.setattr(openai_routes(server), "chat_completion", limited)
    before = server.stats["calls"]
    stats = SyncRunner(endpoint(server.base_url), concurrency=1, max_retries=2).run(requests, tmp_path / "out.jsonl")

    assert (stats.ok, stats.failed, stats.rate_limited) == (4, 0, 1)
    # The unlucky one: a try and two SDK retries, all 429; sent again: two more 429s, then a 200.
    assert server.stats["calls"] - before == 3 + 6
    line = {x["custom_id"]: x for x in output_lines(tmp_path / "out.jsonl")}[items[2][0]]
    ok, *_ = judge_line(line, "text", 0)
    assert ok


def test_a_429_that_never_ends_stops_the_run_and_writes_nothing_for_it(
    server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = cases(3)
    requests = write_requests(tmp_path / "req.jsonl", items)
    original = openai_routes(server).chat_completion
    unlucky = items[1][1]

    def limited(body: Any, request_id: str | None = None) -> Any:
        if body["messages"][0]["content"] == unlucky:
            raise ApiError(
                429, "Rate limit reached (test).", code="rate_limit_exceeded", headers={"retry-after-ms": "1"}
            )
        return original(body, request_id)

    monkeypatch.setattr(openai_routes(server), "chat_completion", limited)
    out = tmp_path / "out.jsonl"
    with pytest.raises(ProviderError, match=r"HTTP 429, 8 times for one request.*nothing was lost"):
        SyncRunner(endpoint(server.base_url), concurrency=1, max_retries=0).run(requests, out)
    assert saved_custom_ids(out) == {items[0][0], items[2][0]}  # sent again by the next run


def test_resume_sends_only_what_is_missing_and_cuts_a_partial_line(server: SimulatedServer, tmp_path: Path) -> None:
    items = cases(12)
    requests = write_requests(tmp_path / "req.jsonl", items)
    out = tmp_path / "out.jsonl"
    # A first run that got through five requests, then was killed while writing the sixth line.
    SyncRunner(endpoint(server.base_url)).run(write_requests(tmp_path / "head.jsonl", items[:5]), out)
    head = out.read_bytes()
    cut = json.dumps({"id": "syncreq_x", "custom_id": items[5][0], "response": {"status_code": 200}})
    out.write_bytes(head + cut[: len(cut) // 2].encode("utf-8"))

    calls = server.stats["calls"]
    stats = SyncRunner(endpoint(server.base_url), concurrency=3).run(requests, out)

    assert (stats.total, stats.already_done, stats.sent, stats.ok) == (12, 5, 7, 7)
    assert server.stats["calls"] - calls == 7
    data = out.read_bytes()
    assert data.startswith(head)  # saved lines are never rewritten
    lines = output_lines(out)
    assert sorted(line["custom_id"] for line in lines) == sorted(cid for cid, *_ in items)
    assert all(line["response"]["status_code"] == 200 for line in lines)

    # Nothing left: a further run sends nothing.
    again = SyncRunner(endpoint(server.base_url)).run(requests, out)
    assert (again.already_done, again.sent) == (12, 0)
    assert server.stats["calls"] - calls == 7
    assert out.read_bytes() == data


def test_a_last_line_missing_only_its_newline_is_kept(server: SimulatedServer, tmp_path: Path) -> None:
    items = cases(3)
    out = tmp_path / "out.jsonl"
    SyncRunner(endpoint(server.base_url)).run(write_requests(tmp_path / "head.jsonl", items[:2]), out)
    out.write_bytes(out.read_bytes().rstrip(b"\n"))

    assert saved_custom_ids(out) == {items[0][0], items[1][0]}
    assert out.read_bytes().endswith(b"}\n")
    calls = server.stats["calls"]
    stats = SyncRunner(endpoint(server.base_url)).run(write_requests(tmp_path / "req.jsonl", items), out)
    assert (stats.already_done, stats.sent) == (2, 1) and server.stats["calls"] - calls == 1
    assert len(output_lines(out)) == 3


def test_a_400_is_written_as_a_line_and_does_not_stop_the_run(server: SimulatedServer, tmp_path: Path) -> None:
    items = cases(3)
    bad = {
        "custom_id": "run1-9-bad-1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "sim-model", "messages": [], "max_tokens": 8192},
    }
    requests = tmp_path / "req.jsonl"
    # The bad request first: a refusal on its merits is not taken for a broken endpoint.
    requests.write_bytes(jsonl([bad]) + write_requests(tmp_path / "good.jsonl", items).read_bytes())

    stats = SyncRunner(endpoint(server.base_url), concurrency=1).run(requests, tmp_path / "out.jsonl")

    assert (stats.total, stats.ok, stats.failed) == (4, 3, 1)
    line = {x["custom_id"]: x for x in output_lines(tmp_path / "out.jsonl")}["run1-9-bad-1"]
    assert line["error"] is None
    assert line["response"]["status_code"] == 400 and line["response"]["request_id"].startswith("req_")
    assert "messages" in line["response"]["body"]["error"]["message"]
    ok, _, _, error, kind, _ = judge_line(line, "text", 0)
    assert not ok and kind == "permanent" and (error or "").startswith("HTTP 400")


def test_a_missing_key_is_a_config_error_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="LEXPILOT_EVAL_API_KEY"):
        SyncRunner(endpoint("http://127.0.0.1:9/v1", key=None))


def test_a_rejected_key_stops_the_run_naming_the_variable_not_the_key(
    server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reject(body: Any, request_id: str | None = None) -> Any:
        raise ApiError(401, "Incorrect API key provided.", code="invalid_api_key")

    monkeypatch.setattr(openai_routes(server), "chat_completion", reject)
    out = tmp_path / "out.jsonl"
    with pytest.raises(ConfigError) as caught:
        SyncRunner(endpoint(server.base_url), concurrency=2).run(write_requests(tmp_path / "req.jsonl", cases(30)), out)
    message = str(caught.value)
    assert "LEXPILOT_EVAL_API_KEY" in message and "HTTP 401" in message and "eval role" in message
    assert KEY not in message
    assert server.stats["calls"] <= 1 + 2 * 2  # stopped at once, with what was already queued
    assert out.read_bytes() == b""


@pytest.mark.parametrize("broken", ["route", "model"])
def test_an_endpoint_wide_404_stops_early_and_writes_nothing(
    server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    base_url = server.base_url + "/nowhere" if broken == "route" else server.base_url
    if broken == "model":

        def unknown_model(body: Any, request_id: str | None = None) -> Any:
            raise ApiError(404, f"The model `{body['model']}` does not exist.", code="model_not_found")

        monkeypatch.setattr(openai_routes(server), "chat_completion", unknown_model)
    out = tmp_path / "out.jsonl"
    requests = write_requests(tmp_path / "req.jsonl", cases(40), model="no-such-model")

    with pytest.raises(ProviderError) as caught:
        SyncRunner(endpoint(base_url), concurrency=2).run(requests, out)

    message = str(caught.value)
    assert "HTTP 404" in message and "eval role" in message and "no-such-model" in message
    assert KEY not in message
    assert server.stats["calls"] <= sync.PROBE + 2 * 2
    assert out.read_bytes() == b""  # nothing saved, so a fixed configuration sends everything


def test_an_unreachable_endpoint_is_a_provider_error_and_saves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    runner = SyncRunner(endpoint(f"http://127.0.0.1:{free_port()}/v1"), concurrency=2, max_retries=1)
    with pytest.raises(ProviderError, match="could not reach the eval role"):
        runner.run(write_requests(tmp_path / "req.jsonl", cases(10)), out)
    assert out.read_bytes() == b""


def test_after_a_success_failures_are_lines_and_a_timeout_is_request_timeout(
    server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = cases(7)
    original = openai_routes(server).chat_completion
    # Sent one at a time, a success between each failure: none of them is a streak.
    slow_prompt, broken_prompt, missing_prompt = items[1][1], items[3][1], items[5][1]

    def mixed(body: Any, request_id: str | None = None) -> Any:
        prompt = body["messages"][0]["content"]
        if prompt == slow_prompt:
            time.sleep(1.0)
        if prompt == broken_prompt:
            raise ApiError(500, "boom", type="server_error", headers={"retry-after-ms": "1"})
        if prompt == missing_prompt:
            raise ApiError(404, "not here", code="model_not_found")
        return original(body, request_id)

    monkeypatch.setattr(openai_routes(server), "chat_completion", mixed)
    # The slow calls answer after the client gave up; keep the server quiet about the broken pipes.
    server._httpd.handle_error = lambda *args: None  # type: ignore[method-assign,union-attr]
    out = tmp_path / "out.jsonl"
    stats = SyncRunner(endpoint(server.base_url), concurrency=1, timeout=0.3, max_retries=1).run(
        write_requests(tmp_path / "req.jsonl", items), out
    )

    assert (stats.ok, stats.failed) == (4, 3)
    by_id = {x["custom_id"]: x for x in output_lines(out)}
    assert by_id[items[1][0]]["error"]["code"] == "request_timeout"
    assert by_id[items[3][0]]["error"]["code"] == "server_error"
    assert "HTTP 500" in by_id[items[3][0]]["error"]["message"]
    assert by_id[items[5][0]]["response"]["status_code"] == 404
    for cid, _, parser, n_claims in (items[1], items[3], items[5]):
        assert not judge_line(by_id[cid], parser, n_claims)[0]


def test_an_outage_mid_run_stops_it_and_a_later_run_finishes(
    server: SimulatedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = cases(10)
    requests = write_requests(tmp_path / "req.jsonl", items)
    original = openai_routes(server).chat_completion
    answered = [0]

    def outage(body: Any, request_id: str | None = None) -> Any:
        if answered[0] >= 3:
            raise ApiError(503, "down", type="server_error", headers={"retry-after-ms": "1"})
        answered[0] += 1
        return original(body, request_id)

    monkeypatch.setattr(openai_routes(server), "chat_completion", outage)
    out = tmp_path / "out.jsonl"
    with pytest.raises(ProviderError, match=r"3 requests in a row failed.*HTTP 503"):
        SyncRunner(endpoint(server.base_url), concurrency=1, max_retries=1).run(requests, out)
    assert len(output_lines(out)) == 3  # the failed streak is not saved: it is sent again

    monkeypatch.setattr(openai_routes(server), "chat_completion", original)
    stats = SyncRunner(endpoint(server.base_url), concurrency=2).run(requests, out)
    assert (stats.already_done, stats.sent, stats.ok) == (3, 7, 7)
    assert sorted(x["custom_id"] for x in output_lines(out)) == sorted(cid for cid, *_ in items)


def test_a_damaged_request_file_is_refused_before_anything_is_sent(server: SimulatedServer, tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "req.jsonl", cases(3))
    requests.write_bytes(requests.read_bytes() + b'{"custom_id": "x"}\n')
    with pytest.raises(LexpilotError, match="line 4"):
        SyncRunner(endpoint(server.base_url)).run(requests, tmp_path / "out.jsonl")
    assert server.stats["calls"] == 0


class _Answers:
    """A chat completions endpoint answering each call with the body named by its
    X-Client-Request-Id (the line's custom_id), over real HTTP."""

    def __init__(self, bodies: dict[str, bytes]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                self.rfile.read(int(self.headers["Content-Length"]))
                body = bodies[self.headers["X-Client-Request-Id"]]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_answers_beyond_the_bounds_of_a_result_line_are_failures_written_at_once(tmp_path: Path) -> None:
    """A body nested 100,000 deep or over 8 MiB is no answer: a failure line (never a RecursionError,
    never a line no reader takes), and the run goes on."""
    from lexpilot_batch.engine.result_lines import read_lines
    from lexpilot_batch.util.jsonbounds import MAX_LINE_BYTES

    def completion(content: str) -> bytes:
        message = {"role": "assistant", "content": content}
        body = {"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        return json.dumps(body, ensure_ascii=False).encode()

    items = cases(3)
    deep, huge, good = (cid for cid, *_ in items)
    answers = _Answers(
        {
            deep: b'{"object": "chat.completion", "choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            huge: completion("很长的回答。" * (MAX_LINE_BYTES // 18 + 1)),
            good: completion("请问借条上写了利息吗？"),
        }
    )
    try:
        out = tmp_path / "out.jsonl"
        stats = SyncRunner(endpoint(answers.base_url), concurrency=1).run(
            write_requests(tmp_path / "r.jsonl", items), out
        )
    finally:
        answers.close()
    assert (stats.total, stats.ok, stats.failed) == (3, 1, 2)
    lines = {line["custom_id"]: line for _, line, _, flaw in read_lines(out) if flaw is None and line}
    assert set(lines) == {deep, huge, good}
    for cid, bound in ((deep, "nested deeper than 64 levels"), (huge, "over the 8 MiB")):
        ok, _, _, error, kind, _ = judge_line(lines[cid], "text", 0)
        assert error is not None
        assert not ok and kind == "transport" and "an answer no result line may hold" in error and bound in error
    assert judge_line(lines[good], "text", 0)[0]


@needs_sigmask
def test_ctrl_c_during_a_long_call_stops_the_run_at_once_as_on_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's event loop wakes in steps (`runner._until`, as `util.waiting`'s waits do): Ctrl-C,
    delivered as Windows before Python 3.14 delivers it to a bare wait (`helpers.interrupts`), stops
    the run within a second, not when the calls in flight end; nothing is written for them."""
    requests = write_requests(tmp_path / "req.jsonl", cases(4))
    out = tmp_path / "out.jsonl"
    runner = SyncRunner(endpoint("http://127.0.0.1:9/v1"), concurrency=2)
    sent: list[str] = []

    async def long_call(client: Any, custom_id: str, body: dict[str, Any]) -> Any:
        sent.append(custom_id)
        await asyncio.sleep(10)  # a provider taking its time
        raise AssertionError("the run should have stopped before this call ended")

    monkeypatch.setattr(runner.call, "asend", long_call)
    with pytest.raises(KeyboardInterrupt), ctrl_c_as_on_windows() as pressed:
        runner.run(requests, out)
    assert pressed.since() < PROMPT
    assert sent and out.read_bytes() == b""


# --- the adaptive window (`sync.window`) against the simulated provider's rate limits ----------------


def _slow_route(server: SimulatedServer, monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    original = openai_routes(server).chat_completion

    def slow(body: Any, request_id: str | None = None) -> Any:
        time.sleep(seconds)
        return original(body, request_id)

    monkeypatch.setattr(openai_routes(server), "chat_completion", slow)


def test_the_runner_grows_past_its_start_without_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    requests = write_requests(tmp_path / "req.jsonl", cases(60))
    with SimulatedServer(tmp_path / "sim") as server:
        _slow_route(server, monkeypatch, 0.05)
        monkeypatch.setattr(sync.windows, "START", 8)
        stats = SyncRunner(endpoint(server.base_url), concurrency=32).run(requests, tmp_path / "out.jsonl")
    assert stats.ok == 60 and stats.window_cuts == 0
    assert 8 < stats.peak_in_flight <= 32


def test_the_runner_shrinks_on_the_providers_limits_and_answers_each_request_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", cases(48))
    # The server's minute passes 100 times faster (30 a minute: one call each 20 ms of real time);
    # the runner's backoff after a 429 is cut to match (the wait it is told is tested elsewhere).
    told = sync.retry_after
    monkeypatch.setattr(sync, "retry_after", lambda exc: (told(exc) or 1.0) / 100)
    # A burst of 48 against 30 a minute, re-sent by an event loop within a millisecond of each wait:
    # a request may meet more 429s than `RATE_LIMIT_ROUNDS` while the window halves down to the
    # limit. That stop is tested on its own (above); here the window is what is tested.
    monkeypatch.setattr(sync, "RATE_LIMIT_ROUNDS", 100)
    with SimulatedServer(tmp_path / "sim", faults=parse_faults("rpm=30")) as server:
        start = time.monotonic()
        server.limits = RateLimits(lambda: (time.monotonic() - start) * 100)
        _slow_route(server, monkeypatch, 0.01)
        stats = SyncRunner(endpoint(server.base_url), concurrency=64, max_retries=0).run(
            requests, tmp_path / "out.jsonl"
        )
        refused = server.stats["rate_limited"]
    assert stats.ok == 48 and stats.failed == 0
    assert refused > 0 and stats.rate_limited == refused  # every 429 reached the runner (no SDK retries)
    assert stats.window_cuts >= 1 and stats.peak_in_flight <= 64
    ids = [line["custom_id"] for line in output_lines(tmp_path / "out.jsonl")]
    assert len(ids) == len(set(ids)) == 48
