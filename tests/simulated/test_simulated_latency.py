"""The simulated provider's latency model, and a chat completion that answers as the batch line of
its custom_id does (what `--tail-sync` relies on for identical records)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

import pytest
from openai import OpenAI

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.data import Message
from lexpilot_batch.simulated import FaultSpecError, SimulatedServer, parse_faults
from lexpilot_batch.simulated import chat as sim_chat
from lexpilot_batch.simulated.batches import current
from lexpilot_batch.simulated.latency import batch_seconds, chat_seconds
from tests.helpers.simulated import jsonl, read_lines, request_line, submit, wait

HISTORY = [Message(role="user", content="我2021年3月借给朋友5万元，他写了借条，约定一年后还，现在一直不还。")]


@pytest.fixture(autouse=True)
def _no_env_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


def test_latencies_are_spread_within_bounds_and_fixed_by_what_they_time() -> None:
    faults = parse_faults("latency=60,sync_latency=2,latency_spread=0.25,seed=3")
    batches = [batch_seconds(faults, f"input-{i}") for i in range(200)]
    chats = [chat_seconds(faults, f"run-{i}-gen-1") for i in range(200)]
    assert 45 <= min(batches) < 50 and 70 < max(batches) <= 75
    assert 1.5 <= min(chats) < 1.7 and 2.3 < max(chats) <= 2.5
    assert batches == [batch_seconds(faults, f"input-{i}") for i in range(200)]
    assert batch_seconds(parse_faults("latency=60"), "x") == 60 and chat_seconds(parse_faults(""), "x") == 0
    with pytest.raises(FaultSpecError, match="latency_spread"):
        parse_faults("latency_spread=1.5")


def lines() -> list[dict[str, Any]]:
    return [
        request_line("k1-0-lca.c.gen-1", prompts.lexawn_prompt(HISTORY)),
        request_line("k1-0-lca.c.classify-1", prompts.lca_classify_prompt(HISTORY, "请问借条上写了利息吗？")),
        request_line("k2-0-lca.c.gen-1", prompts.lexawn_prompt(HISTORY)),  # the same prompt, another run
    ]


def test_a_batch_ends_its_latency_after_creation_and_a_chat_completion_takes_its_own(tmp_path, monkeypatch):
    data = jsonl(lines())
    faults = "latency=100,sync_latency=1.5,latency_spread=0.5,seed=4"
    with SimulatedServer(tmp_path / "sim", faults=parse_faults(faults)) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        batch_id = submit(client, data)
        assert server.store is not None
        record = server.store.get_batch(batch_id)
        assert record is not None
        took = batch_seconds(server.faults, hashlib.sha256(data).hexdigest())
        assert 50 <= took <= 150 and took != 100
        start = record["sim"]["created"]
        assert current(server.store, record, start + took - 0.5)["status"] == "finalizing"
        assert current(server.store, record, start + took + 0.5)["status"] == "completed"
        slept: list[float] = []
        monkeypatch.setattr(sim_chat.time, "sleep", slept.append)
        body = lines()[0]["body"]
        client.post("/chat/completions", cast_to=object, body=body, options={"headers": {"X-Client-Request-Id": "c-1"}})
        assert slept == [chat_seconds(server.faults, "c-1")] and 0.75 <= slept[0] <= 2.25


def test_a_chat_completion_answers_as_the_batch_line_of_its_custom_id(tmp_path):
    with SimulatedServer(tmp_path / "sim", faults=parse_faults("truncate=0.3,malformed_judge=0.3,seed=2")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        batch = wait(client, submit(client, jsonl(lines())))
        batched = {
            line["custom_id"]: line["response"]["body"]
            for line in read_lines(client, batch.output_file_id) + read_lines(client, batch.error_file_id)
        }
        for line in lines():
            cid = line["custom_id"]
            chat = cast(
                dict[str, Any],
                client.post(
                    "/chat/completions",
                    cast_to=object,
                    body=line["body"],
                    options={"headers": {"X-Client-Request-Id": cid}},
                ),
            )
            assert chat["choices"] == batched[cid]["choices"] and chat["usage"] == batched[cid]["usage"], cid
        # Two runs' identical prompts answer independently, in a batch and through chat alike.
        assert batched["k1-0-lca.c.gen-1"]["choices"] != batched["k2-0-lca.c.gen-1"]["choices"]


def test_native_batches_and_calls_take_the_latency_of_the_file_and_the_line_they_send(tmp_path, monkeypatch):
    """The latency model on Anthropic's and Gemini's routes: a batch takes what an OpenAI batch of
    the same request file takes (drawn by the file's hash, as `bench/run_bench.py` computes it from a
    workspace), a synchronous call what the chat completion of its custom_id takes."""
    pytest.importorskip("anthropic")
    pytest.importorskip("google.genai")
    from lexpilot_batch.providers.anthropic.batch import AnthropicBatchBackend
    from lexpilot_batch.providers.anthropic.chat import AnthropicChat
    from lexpilot_batch.providers.anthropic.spec import NAME as ANTHROPIC
    from lexpilot_batch.providers.batch import BatchSource
    from lexpilot_batch.providers.google.batch import GoogleBatchBackend
    from lexpilot_batch.providers.google.chat import GeminiChat
    from lexpilot_batch.providers.google.spec import NAME as GOOGLE
    from lexpilot_batch.providers.ids import id_tag
    from lexpilot_batch.providers.lines import request_line as line_of
    from lexpilot_batch.providers.registry import PROFILES
    from lexpilot_batch.providers.routing.endpoints import Endpoint

    tag, prompt = id_tag("ws"), prompts.lexawn_prompt(HISTORY)
    ids = ["k1-0-lca.c.gen-1", "k2-0-lca.c.gen-1"]
    shapes = {
        ANTHROPIC: ("claude-sim", '{"max_tokens":1024,"temperature":0.7}', AnthropicBatchBackend, AnthropicChat),
        GOOGLE: (
            "gemini-sim",
            '{"generationConfig":{"temperature":0.7,"maxOutputTokens":1024}}',
            GoogleBatchBackend,
            GeminiChat,
        ),
    }
    faults = "latency=100,sync_latency=1.5,latency_spread=0.5,seed=4"
    with SimulatedServer(tmp_path / "sim", faults=parse_faults(faults)) as server:
        for api, (model, fields, backend_class, chat_class) in shapes.items():
            path = tmp_path / f"{api}.jsonl"
            path.write_bytes(b"".join(line_of(cid, model, prompt, fields, "", None, api, tag) for cid in ids))
            endpoint = Endpoint("eval", server.root_url, "KEY", "k")
            backend = backend_class(endpoint, PROFILES[api])
            info = backend.create(backend.upload(path), {}, None, BatchSource(path, model))
            internal = "batch_" + info.id.removeprefix("msgbatch_").removeprefix("batches/")
            assert server.store is not None
            stored = server.store.get_batch(internal)
            assert stored is not None
            sim = stored["sim"]
            took = batch_seconds(server.faults, hashlib.sha256(path.read_bytes()).hexdigest())
            assert took != 100 and sim["end"] - sim["created"] == pytest.approx(took), api
            slept: list[float] = []
            call = chat_class(endpoint, 10.0, 0, model)
            line = json.loads(path.read_bytes().splitlines()[0])
            with monkeypatch.context() as patched:
                patched.setattr(sim_chat.time, "sleep", slept.append)
                answer = call.send(line[call.id_key], line["params" if api == ANTHROPIC else "request"])
            assert answer.line is not None and call.answered(answer.line), api
            assert slept == [chat_seconds(server.faults, ids[0])], api
