"""The simulated provider over real HTTP, driven by the official `openai` SDK: routes, objects,
the batch lifecycle, validation, pagination, cancel, persistence across restarts, loopback only."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import openai
import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletion

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.data import Message
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from tests.helpers.interrupts import PROMPT, ctrl_c_as_on_windows, needs_sigmask
from tests.helpers.simulated import jsonl, read_lines, request_line, submit, wait

HISTORY = [
    Message(
        role="user",
        content="我2021年3月借给朋友5万元，他写了借条，约定一年后还，现在一直不还。我想要求他还钱并支付利息。",
    ),
]
DETAILS = ["借条约定年利率6%", "2022年5月被告通过微信归还了1万元"]


def all_prompts() -> dict[str, str]:
    asked = [*HISTORY, Message(role="assistant", content="请问借条上有没有约定利息？")]
    return {
        "eval-lexawn": prompts.lexawn_prompt(HISTORY),
        "eval-ask": prompts.force_ask_prompt(HISTORY),
        "eval-judge": prompts.force_judge_prompt(HISTORY),
        "judge-cls": prompts.lca_classify_prompt(HISTORY, "请问借条上写了利息吗？"),
        "judge-dcg": prompts.dcg_judge_prompt(HISTORY, "请问借条上有没有约定利息？", ["利息的计算标准"], DETAILS),
        "user-r1": prompts.user_model_prompt(asked, ["利息的计算标准"], DETAILS),
        "judge-ext": prompts.extract_verdicts_prompt(["返还借款5万元", "支付利息"], "第一项请求：结论：支持。"),
    }


@pytest.fixture(autouse=True)
def _no_env_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SimulatedServer]:
    with SimulatedServer(tmp_path / "sim") as running:
        yield running


@pytest.fixture
def client(server: SimulatedServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)


def test_round_trip_completed(client: OpenAI) -> None:
    lines = [request_line(cid, prompt, max_tokens=8192) for cid, prompt in all_prompts().items()]
    upload = client.files.create(file=("wave.jsonl", jsonl(lines)), purpose="batch")
    assert (upload.object, upload.purpose, upload.filename, upload.bytes) == (
        "file",
        "batch",
        "wave.jsonl",
        len(jsonl(lines)),
    )
    assert client.files.retrieve(upload.id).id == upload.id
    assert client.files.content(upload.id).read() == jsonl(lines)

    created = client.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"workspace_file": "requests/w0001/eval.jsonl"},
    )
    assert created.status == "validating"
    assert created.expires_at == created.created_at + 24 * 3600
    batch = wait(client, created.id)
    assert batch.status == "completed"
    assert batch.metadata == {"workspace_file": "requests/w0001/eval.jsonl"}
    assert batch.model == "sim-model"
    assert batch.request_counts.model_dump() == {"total": 7, "completed": 7, "failed": 0}
    assert batch.in_progress_at and batch.finalizing_at and batch.completed_at
    assert batch.error_file_id is None and batch.errors is None
    assert batch.usage is not None and batch.usage.total_tokens > batch.usage.input_tokens > 0

    output_file = client.files.retrieve(batch.output_file_id)
    assert output_file.purpose == "batch_output"
    output = read_lines(client, batch.output_file_id)
    assert sorted(line["custom_id"] for line in output) == sorted(all_prompts())
    for line in output:
        assert set(line) == {"id", "custom_id", "response", "error"}
        assert line["id"].startswith("batch_req_") and line["error"] is None
        assert line["response"]["status_code"] == 200
        assert line["response"]["request_id"].startswith("req_")
        completion = ChatCompletion.model_validate(line["response"]["body"])
        assert completion.model == "sim-model"
        assert completion.choices[0].finish_reason == "stop"
        assert completion.choices[0].message.content
        usage = completion.usage
        assert usage is not None and usage.prompt_tokens > 100
        assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens is not None
        assert usage.completion_tokens_details is not None
        assert usage.completion_tokens_details.reasoning_tokens is not None


def test_output_order_is_shuffled_and_deterministic(tmp_path: Path) -> None:
    lines = [request_line(f"req-{i:03d}", f"第{i}个问题：{i * 7}元") for i in range(40)]

    def order(seed: int) -> list[str]:
        with SimulatedServer(tmp_path / f"sim{seed}", seed=seed) as server:
            client = OpenAI(base_url=server.base_url, api_key="k")
            first = wait(client, submit(client, jsonl(lines)))
            again = wait(client, submit(client, jsonl(lines)))
            ids = [line["custom_id"] for line in read_lines(client, first.output_file_id)]
            assert ids == [line["custom_id"] for line in read_lines(client, again.output_file_id)]
            return ids

    seed0 = order(0)
    assert sorted(seed0) == [line["custom_id"] for line in lines]
    assert seed0 != [line["custom_id"] for line in lines]
    assert order(1) != seed0


def test_latency_advances_request_counts(tmp_path: Path) -> None:
    lines = [request_line(f"r{i}", f"问题{i}") for i in range(50)]
    with SimulatedServer(tmp_path / "sim", faults=parse_faults("latency=0.6")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k")
        start = time.monotonic()  # before the create: under load its answer can come well after the batch began
        batch_id = submit(client, jsonl(lines))
        seen: list[tuple[str, int]] = []
        while True:
            batch = client.batches.retrieve(batch_id)
            seen.append((batch.status, batch.request_counts.completed if batch.request_counts else 0))
            if batch.status == "completed":
                break
            assert time.monotonic() - start < 5
            time.sleep(0.03)
    elapsed = time.monotonic() - start
    statuses = [status for status, _ in seen]
    assert "in_progress" in statuses and 0.4 < elapsed < 4.0
    partial = [done for status, done in seen if status == "in_progress"]
    assert partial == sorted(partial) and any(0 < done < 50 for done in partial)
    assert seen[-1] == ("completed", 50)


@pytest.mark.parametrize(
    ("lines", "code", "line", "param"),
    [
        pytest.param([b'{"custom_id": "a"', None], "invalid_json_line", 1, None, id="not-json"),
        pytest.param(
            [
                None,
                None,
                b'{"custom_id": "r0", "method": "POST", "url": "/v1/chat/completions", '
                b'"body": {"model": "sim-model", "messages": [{"role": "user", "content": "x"}]}}',
            ],
            "duplicate_custom_id",
            3,
            "custom_id",
            id="duplicate",
        ),
        pytest.param(
            [
                None,
                b'{"custom_id": "z", "method": "POST", "url": "/v1/chat/completions", '
                b'"body": {"model": "other", "messages": [{"role": "user", "content": "x"}]}}',
            ],
            "mismatched_model",
            2,
            "body.model",
            id="two-models",
        ),
        pytest.param(
            [
                None,
                b'{"custom_id": "z", "method": "POST", "url": "/v1/embeddings", '
                b'"body": {"model": "sim-model", "input": "x"}}',
            ],
            "invalid_url",
            2,
            "url",
            id="wrong-url",
        ),
        pytest.param(
            [None, b'{"method": "POST", "url": "/v1/chat/completions", "body": {}}'],
            "missing_required_parameter",
            2,
            "custom_id",
            id="no-custom-id",
        ),
        pytest.param(
            [None, b'{"custom_id": "q", "url": "/v1/chat/completions", "body": {}}'],
            "missing_required_parameter",
            2,
            "method",
            id="no-method",
        ),
        pytest.param([], "empty_file", None, None, id="empty"),
        # Blank in Unicode's sense (the ideographic space) is blank too.
        pytest.param([b"   ", "\u3000".encode()], "empty_file", None, None, id="blank-lines"),
        # Not UTF-8 anywhere, even after valid lines, fails the whole file before any line.
        pytest.param([None, b'{"custom_id": "\xe4\xb8"}', b"{"], "invalid_file_format", None, None, id="not-utf8-late"),
    ],
)
def test_invalid_input_fails_the_batch_naming_the_line(
    client: OpenAI, lines: list[bytes | None], code: str, line: int | None, param: str | None
) -> None:
    # None stands for a valid line with a fresh custom_id.
    raw = [
        item if item is not None else json.dumps(request_line(f"r{i}", "你好")).encode() for i, item in enumerate(lines)
    ]
    batch = wait(client, submit(client, b"\n".join(raw) + (b"\n" if raw else b"")))
    assert batch.status == "failed" and batch.failed_at
    assert batch.output_file_id is None and batch.error_file_id is None
    assert batch.errors is not None and batch.errors.data
    error = batch.errors.data[0]
    assert (error.code, error.line, error.param) == (code, line, param)
    assert error.message


def test_a_file_over_the_request_limit_is_refused_unless_blank_or_not_utf8(
    client: OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lexpilot_batch.simulated.batches import validation

    monkeypatch.setattr(validation, "MAX_REQUESTS", 3)
    valid = [json.dumps(request_line(f"r{i}", "你好")).encode() for i in range(4)]

    def first_error(data: bytes) -> str:
        batch = wait(client, submit(client, data))
        assert batch.status == "failed" and batch.errors is not None
        return batch.errors.data[0].code or ""

    assert first_error(b"\n".join(valid) + b"\n") == "too_many_requests"
    assert wait(client, submit(client, b"\n".join(valid[:3]) + b"\n")).status == "completed"
    assert first_error(b" \n\n\n\n") == "empty_file"
    assert first_error(b"\n".join(valid) + b"\n\xff\n") == "invalid_file_format"


def test_bad_requests_are_400_and_unknown_ids_404(client: OpenAI) -> None:
    upload = client.files.create(file=("in.jsonl", jsonl([request_line("a", "x")])), purpose="batch")
    create = dict(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    too_many = {f"k{i}": "v" for i in range(17)}
    for metadata in (too_many, {"k" * 65: "v"}, {"k": "v" * 513}):
        with pytest.raises(openai.BadRequestError) as err:
            client.batches.create(**create, metadata=metadata)  # type: ignore[arg-type]
        assert err.value.body["param"].startswith("metadata")  # type: ignore[index]
    assert client.batches.create(**create, metadata={"k" * 64: "v" * 512}).status == "validating"  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):
        client.batches.create(**{**create, "endpoint": "/v1/embeddings"})  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError):
        client.files.create(file=("in.jsonl", b"{}\n"), purpose="fine-tune")
    with pytest.raises(openai.BadRequestError):
        client.files.create(file=("in.txt", b"{}\n"), purpose="batch")
    with pytest.raises(openai.NotFoundError):
        client.batches.create(**{**create, "input_file_id": "file-missing"})  # type: ignore[arg-type]
    for call in (
        lambda: client.files.retrieve("file-missing"),
        lambda: client.files.content("file-missing"),
        lambda: client.files.delete("file-missing"),
        lambda: client.batches.retrieve("batch_missing"),
        lambda: client.batches.cancel("batch_missing"),
    ):
        with pytest.raises(openai.NotFoundError) as missing:
            call()
        assert set(cast(dict[str, Any], missing.value.body)) == {"message", "type", "param", "code"}


def test_error_bodies_are_openai_json(server: SimulatedServer) -> None:
    def status_of(url: str, headers: dict[str, str]) -> tuple[int, str, dict]:
        request = urllib.request.Request(url, headers=headers)
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.headers["Content-Type"], json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers["Content-Type"], json.loads(exc.read())

    auth = {"Authorization": "Bearer sk-test"}
    assert status_of(server.base_url + "/batches/batch_nope", auth)[:2] == (404, "application/json")
    code, _, body = status_of(server.base_url + "/batches", {})
    assert code == 401 and set(body["error"]) == {"message", "type", "param", "code"}
    code, _, body = status_of(server.base_url + "/nowhere", auth)
    assert code == 404 and "Invalid URL" in body["error"]["message"]
    assert status_of(server.base_url + "/batches", auth)[2]["data"] == []


def test_list_is_newest_first_and_paginates(client: OpenAI) -> None:
    ids = [submit(client, jsonl([request_line("a", f"问题{i}")])) for i in range(5)]
    page = client.batches.list(limit=2)
    assert [b.id for b in page.data] == ids[::-1][:2]
    assert page.has_more and page.first_id == ids[4] and page.last_id == ids[3]  # type: ignore[attr-defined]
    assert [b.id for b in client.batches.list(limit=2)] == ids[::-1]  # auto-pagination follows `after`
    rest = client.batches.list(after=ids[1], limit=20)
    assert [b.id for b in rest.data] == [ids[0]] and rest.has_more is False
    for limit in (0, 101):
        with pytest.raises(openai.BadRequestError):
            client.batches.list(limit=limit)


def test_cancel_keeps_finished_requests(tmp_path: Path) -> None:
    lines = [request_line(f"r{i}", f"问题{i}") for i in range(20)]
    with SimulatedServer(tmp_path / "sim", faults=parse_faults("latency=2")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        batch_id = submit(client, jsonl(lines))
        time.sleep(0.5)  # about 3 of the 20 requests are done
        cancelling = client.batches.cancel(batch_id)
        assert cancelling.status == "cancelling" and cancelling.cancelling_at
        assert client.batches.cancel(batch_id).status in ("cancelling", "cancelled")
        batch = wait(client, batch_id)
    assert batch.status == "cancelled" and batch.cancelled_at
    with SimulatedServer(tmp_path / "sim") as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        output, errors = read_lines(client, batch.output_file_id), read_lines(client, batch.error_file_id)
        assert 0 < len(output) < 20 and len(output) + len(errors) == 20
        assert {e["error"]["code"] for e in errors} == {"batch_cancelled"}
        assert batch.request_counts is not None and batch.request_counts.completed == len(output)
        done = wait(client, submit(client, jsonl(lines[:2])))
        with pytest.raises(openai.BadRequestError, match="Cannot cancel"):
            client.batches.cancel(done.id)


def test_delete_file(client: OpenAI) -> None:
    upload = client.files.create(file=("in.jsonl", b"{}\n"), purpose="batch")
    deleted = client.files.delete(upload.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (upload.id, True, "file")
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(upload.id)


def test_state_survives_a_restart(tmp_path: Path) -> None:
    lines = [request_line(f"r{i}", f"问题{i}") for i in range(10)]
    state = tmp_path / "sim"
    with SimulatedServer(state) as first:
        client = OpenAI(base_url=first.base_url, api_key="k")
        done = wait(client, submit(client, jsonl(lines)))
        before = client.files.content(done.output_file_id).read()
    with SimulatedServer(state, faults=parse_faults("latency=1")) as second:
        client = OpenAI(base_url=second.base_url, api_key="k")
        pending = submit(client, jsonl(lines[:3]), metadata={"wave": "2"})
    with SimulatedServer(state) as third:  # a new process would see exactly this folder
        client = OpenAI(base_url=third.base_url, api_key="k")
        again = client.batches.retrieve(done.id)
        assert again.status == "completed" and again.output_file_id == done.output_file_id
        assert client.files.content(done.output_file_id).read() == before
        resumed = client.batches.retrieve(pending)
        assert resumed.status in ("validating", "in_progress", "finalizing")  # its 1 s still runs
        finished = wait(client, pending)
        assert finished.status == "completed" and finished.metadata == {"wave": "2"}
        assert len(read_lines(client, finished.output_file_id)) == 3
        assert [b.id for b in client.batches.list()] == [pending, done.id]


def test_finalising_copies_the_result_lines_and_sums_their_usage(tmp_path: Path) -> None:
    """The output and error files hold the result lines exactly as they were written; the usage is
    the same whether it was summed at creation or, for a record saved without that sum (an older
    state folder), from the output lines."""
    lines = [request_line(f"r{i}", f"第{i}个问题：借款{i * 3}万元") for i in range(30)]
    state = tmp_path / "sim"
    with SimulatedServer(state, faults=parse_faults("line_error=0.3,seed=1")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k")
        older, newer = submit(client, jsonl(lines)), submit(client, jsonl(lines))
    record_path = state / "batches" / f"{older}.json"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    del record["sim"]["usage"]
    record_path.write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")
    with SimulatedServer(state, faults=parse_faults("line_error=0.3,seed=1")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k")
        batches = {batch_id: wait(client, batch_id) for batch_id in (older, newer)}
        for batch_id, batch in batches.items():
            results = (state / "batches" / f"{batch_id}.results").read_text(encoding="utf-8").splitlines()
            answered = [(json.loads(line)["response"] or {}).get("status_code") == 200 for line in results]
            ok = [line for line, good in zip(results, answered, strict=True) if good]
            failed = [line for line, good in zip(results, answered, strict=True) if not good]
            assert 0 < len(ok) < 30 and len(ok) + len(failed) == 30
            assert client.files.content(batch.output_file_id).text == "".join(line + "\n" for line in ok)
            assert client.files.content(batch.error_file_id).text == "".join(line + "\n" for line in failed)
            prompt = sum(json.loads(line)["response"]["body"]["usage"]["prompt_tokens"] for line in ok)
            assert batch.usage is not None and batch.usage.input_tokens == prompt
    assert batches[older].usage == batches[newer].usage


def test_a_stopped_server_serves_nobody(tmp_path: Path) -> None:
    server = SimulatedServer(tmp_path / "sim")
    server.start()
    client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5)
    client.batches.list()  # leaves a kept-alive connection behind
    server.stop()
    with pytest.raises(openai.APIConnectionError):
        client.batches.list()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com", "10.0.0.1"])
def test_refuses_non_loopback_addresses(tmp_path: Path, host: str) -> None:
    with pytest.raises(ConfigError, match="loopback"):
        SimulatedServer(tmp_path, host=host)


def test_accepts_loopback_names(tmp_path: Path) -> None:
    for host in ("127.0.0.1", "127.0.0.5", "::1", "localhost", "LOCALHOST"):
        SimulatedServer(tmp_path, host=host)  # checked at construction; nothing is bound
    with SimulatedServer(tmp_path, host="localhost") as server:
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")


def test_sync_chat_completions(client: OpenAI) -> None:
    prompt = prompts.lexawn_prompt(HISTORY)
    completion = client.chat.completions.create(model="m-1", messages=[{"role": "user", "content": prompt}])
    assert completion.model == "m-1" and completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].message.content
    again = client.chat.completions.create(model="m-1", messages=[{"role": "user", "content": prompt}])
    assert again.choices[0].message.content == completion.choices[0].message.content  # (seed, prompt)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m-1", messages=[])


def test_runs_as_a_module_in_its_own_process(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "lexpilot_batch.simulated", "--state-dir", str(tmp_path / "sim"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        client = OpenAI(base_url=base_url, api_key="k")
        batch = wait(client, submit(client, jsonl([request_line("a", prompts.force_ask_prompt(HISTORY))])))
        assert batch.status == "completed"
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert (tmp_path / "sim" / "batches").is_dir()


def test_module_refuses_a_network_address(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "lexpilot_batch.simulated", "--state-dir", str(tmp_path), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0 and "loopback" in result.stderr


def test_config_errors_are_lexpilot_errors() -> None:
    with pytest.raises(LexpilotError):
        SimulatedServer(Path("."), host="0.0.0.0")


@needs_sigmask
def test_ctrl_c_while_the_server_stops_is_acted_on_at_once_as_on_windows(tmp_path: Path) -> None:
    """`stop` waits for the serving thread in steps (`util.waiting`), not in `BaseServer.shutdown`'s
    bare `Event.wait()`: Ctrl-C, delivered as Windows before Python 3.14 delivers it to such a wait
    (`tests.helpers.interrupts`), is acted on within a second while the serving thread is held."""
    server = SimulatedServer(tmp_path / "sim")
    server.start()
    httpd = server._httpd
    assert httpd is not None
    holding = threading.Event()
    release = threading.Event()

    def held() -> None:  # run by serve_forever each round: the serving thread busy for 5 s
        holding.set()
        release.wait(5)

    httpd.service_actions = held  # type: ignore[method-assign]
    assert holding.wait(5)
    try:
        with pytest.raises(KeyboardInterrupt), ctrl_c_as_on_windows() as pressed:
            server.stop()
        assert pressed.since() < PROMPT
    finally:
        release.set()
    server.stop()  # a second Ctrl-C-free stop finishes it
    assert server._httpd is None
