"""Rehearsals that tell the truth (issue 25): every line a whole benchmark compiles, for every kind
of model, validates against the installed SDKs' request types, and the simulated provider refuses
each lenient case the real APIs refuse, in each API's own error shape.

Sources: the installed SDKs' types (`openai` `CompletionCreateParamsNonStreaming` and
`ChatCompletionMessageParam`; `anthropic` `messages.batch_create_params.Request`; `google-genai`
`types.GenerationConfig` and `types.Content`), checked here with plain pydantic `TypeAdapter`s
and key sets, apart from the guard's own strict validators (`providers.schema`); Azure OpenAI's
batch how-to for its `/chat/completions` url and endpoint; the error shapes of each API
(OpenAI `{"error": {message, type, param, code}}`, Anthropic `{"type": "error", "error": {type,
message}}`, Google `{"error": {code, message, status}}`).
"""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine.loop import prepare
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.providers.openai.lines import CHAT_URLS
from lexpilot_batch.providers.sync.call import http  # the SDKs' HTTP library: httpx2 under openai 3, httpx before
from lexpilot_batch.simulated import SimulatedServer
from lexpilot_batch.state.compaction import read_saved
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.model_list import ModelOptions
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.engine import finish, thread_counts
from tests.helpers.simulated import jsonl, request_line, wait

THINKING = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
MODELS = (
    "openai/gpt-4o-mini",  # a chat model
    "openai/o4-mini",  # a reasoning model
    "azure/my-deployment",
    "dashscope/qwen-plus",
    "anthropic/claude-sonnet-4-5",  # without thinking
    "anthropic/claude-opus-4-1",  # with thinking
    "google/gemini-2.5-flash",
)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "LEXPILOT_", "DASHSCOPE_", "AZURE_OPENAI_", "ANTHROPIC_", "GOOGLE_")):
            monkeypatch.delenv(name)


def _keys(tp: Any) -> set[str]:
    return set(typing.get_type_hints(tp))


def validate_lines(lines: list[tuple[dict, dict]]) -> dict[str, int]:
    """Every (file row, line) checked against the installed SDKs' types; lines per model."""
    from anthropic.types.messages import batch_create_params
    from google.genai import types
    from openai.types.chat import ChatCompletionMessageParam, completion_create_params
    from pydantic import TypeAdapter

    chat_keys = _keys(completion_create_params.CompletionCreateParamsNonStreaming)
    chat = TypeAdapter(completion_create_params.CompletionCreateParamsNonStreaming)
    messages = TypeAdapter(list[ChatCompletionMessageParam])
    claude = TypeAdapter(batch_create_params.Request)
    claude_keys = _keys(batch_create_params.MessageCreateParamsNonStreaming)
    seen: dict[str, int] = {}
    for row, line in lines:
        model = row["model"]
        seen[model] = seen.get(model, 0) + 1
        if model.startswith("anthropic/"):
            assert set(line) == {"custom_id", "params"}
            claude.validate_python(line)
            assert set(line["params"]) <= claude_keys, line["params"].keys()
            assert "temperature" not in line["params"]  # item 7: the installed SDK has none
            assert ("thinking" in line["params"]) == (model == "anthropic/claude-opus-4-1")
        elif model.startswith("google/"):
            assert set(line) == {"key", "request"}
            request = line["request"]
            assert set(request) == {"contents", "generationConfig"}
            types.GenerationConfig.model_validate(request["generationConfig"])
            for content in request["contents"]:
                types.Content.model_validate(content)
        else:
            assert set(line) == {"custom_id", "method", "url", "body"} and line["url"] in CHAT_URLS
            body = line["body"]
            assert set(body) <= chat_keys, body.keys()
            chat.validate_python(body)
            messages.validate_python(body["messages"])
            if model == "openai/o4-mini":
                assert "temperature" not in body and "max_tokens" not in body and body["reasoning_effort"] == "low"
    return seen


def test_wave_one_of_every_task_for_every_kind_of_model_validates_against_the_installed_sdks(
    tmp_path: Path, clean_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast half of the test below (the default suite): `prepare --stage all` compiles the
    first requests of every task for every kind of model, no key needed, and every line keeps the
    installed SDKs' types."""
    monkeypatch.setenv("AZURE_OPENAI_BASE_URL", "https://example.openai.azure.com/openai/v1")
    with Workspace(tmp_path / "ws") as ws:
        session = Session(ws, ProviderOptions())
        prepare(ws, session, _spec())
        rows = [dict(r) for r in ws.store.conn.execute("SELECT * FROM files ORDER BY pk")]
        lines = [
            (row, json.loads(raw))
            for row in rows
            for raw in read_saved(ws.path(row["path"])).decode("utf-8").splitlines()
        ]
    assert set(validate_lines(lines)) == set(MODELS)


def _spec() -> RunSpec:
    return RunSpec(
        ("r1",),
        MODELS,
        "all",
        Settings(),
        limit=1,
        model_options={
            "anthropic/claude-opus-4-1": ModelOptions(THINKING),
            "openai/o4-mini": ModelOptions({"reasoning_effort": "low"}),
        },
    )


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry waits of ours and of the Gemini SDK are zero (its resumable upload sleeps by itself)."""
    import time
    import types as pytypes

    import google.genai._api_client as genai_client

    from lexpilot_batch.providers.google import client as google_client
    from lexpilot_batch.util import clock as waits

    monkeypatch.setattr(waits, "pause", lambda seconds: None)
    monkeypatch.setattr(google_client, "RETRY_DELAY", 0.0)
    clock = pytypes.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
    clock.sleep = lambda seconds: None
    monkeypatch.setattr(genai_client, "time", clock)


@pytest.mark.slow  # every wave of every task for seven models through the simulated routes: tens of seconds
def test_every_line_of_every_task_for_every_kind_of_model_validates_against_the_installed_sdks(
    tmp_path: Path, clean_env: None, quick: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each provider's own routes (Claude's Message Batches, Gemini's Batch Mode, Azure's
    `/chat/completions`) on the simulated server, as a user points them at `serve-simulated`."""

    spec = _spec()
    with SimulatedServer(tmp_path / "sim") as server:
        for var in ("OPENAI_BASE_URL", "AZURE_OPENAI_BASE_URL", "DASHSCOPE_BASE_URL"):
            monkeypatch.setenv(var, server.base_url)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.root_url)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.root_url)
        for var in (
            "OPENAI_API_KEY",
            "AZURE_OPENAI_API_KEY",
            "DASHSCOPE_API_KEY",
            "ANTHROPIC_API_KEY",
            "GOOGLE_API_KEY",
        ):
            monkeypatch.setenv(var, "sk-simulated")
        with Workspace(tmp_path / "ws") as ws:
            session = Session(ws, ProviderOptions(create_grace=0.3))
            try:
                prepare(ws, session, spec)
                finish(ws, session)
            finally:
                session.close()
            assert set(thread_counts(ws)) == {"done"}
            rows = [dict(r) for r in ws.store.conn.execute("SELECT * FROM files ORDER BY pk")]
            lines = [
                (row, json.loads(raw))
                for row in rows
                for raw in read_saved(ws.path(row["path"])).decode("utf-8").splitlines()
            ]

    seen = validate_lines(lines)
    assert set(MODELS) <= set(seen), seen
    assert len({row["wave"] for row in rows}) >= 4


# --- the simulated provider, as strict as the real APIs -------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> typing.Iterator[SimulatedServer]:
    with SimulatedServer(tmp_path_factory.mktemp("sim")) as sim:
        yield sim


PROMPT = "请问合同纠纷如何处理？"


@pytest.mark.parametrize(
    ("model", "fields", "param"),
    [
        ("sim-eval", {"bogus": 1}, "bogus"),  # an unknown body field
        ("sim-eval", {"temprature": 0.5}, "temprature"),  # a mistyped --model-arg
        ("gpt-4o-mini", {"temperature": 3}, "temperature"),
        ("o4-mini", {"reasoning_effort": "none"}, "reasoning_effort"),  # item 3
    ],
)
def test_the_openai_routes_refuse_what_openai_refuses(
    server: SimulatedServer, model: str, fields: dict, param: str
) -> None:
    """Before, each of these was answered 200. Now: a 400 in OpenAI's error shape on the sync route,
    and a 400 line in the batch's error file."""
    client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], **fields}
    answer = http.post(
        f"{server.base_url}/chat/completions", json=body, headers={"Authorization": "Bearer k"}, timeout=120
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert error["param"] == param
    file = client.files.create(
        file=("in.jsonl", jsonl([request_line("c-1", PROMPT, model, **fields)])), purpose="batch"
    )
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    done = wait(client, batch.id)
    assert done.status == "completed" and done.error_file_id
    line = json.loads(client.files.content(done.error_file_id).read())
    assert line["response"]["status_code"] == 400 and line["response"]["body"]["error"]["param"] == param


def test_azures_documented_url_and_endpoint_are_accepted(server: SimulatedServer) -> None:
    """Azure OpenAI's batch how-to: lines with `"url": "/chat/completions"`, created with
    `endpoint="/chat/completions"`. Before, the simulated provider refused both."""
    client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    line = {**request_line("c-1", PROMPT, "my-deployment"), "url": "/chat/completions"}
    file = client.files.create(
        file=("in.jsonl", jsonl([line])), purpose="batch", expires_after={"anchor": "created_at", "seconds": 1_209_600}
    )
    batch = client.batches.create(
        input_file_id=file.id,
        endpoint="/chat/completions",  # type: ignore[arg-type]
        completion_window="24h",
        output_expires_after={"anchor": "created_at", "seconds": 1_209_600},
    )
    done = wait(client, batch.id)
    assert done.status == "completed" and done.output_file_id and not done.error_file_id


ANTHROPIC_HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"n": 1}, "params.n"),
        ({"max_completion_tokens": 64}, "params.max_completion_tokens"),
        ({"messages": [{"role": "system", "content": "你是律师"}, {"role": "user", "content": PROMPT}]}, "role"),
        ({"max_tokens": 200_000}, "max_tokens"),
        ({"temperature": 3}, "temperature"),
    ],
)
def test_the_anthropic_routes_refuse_what_messages_refuses(server: SimulatedServer, params: dict, needle: str) -> None:
    """Before, `n`, `max_completion_tokens`, a system-role message and max_tokens 200,000 were
    answered. Now the Messages call is a 400 in Anthropic's error shape, and the same request in a
    Message Batch is `errored` with `invalid_request_error`."""
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": PROMPT}],
        **params,
    }
    answer = http.post(f"{server.root_url}/v1/messages", json=body, headers=ANTHROPIC_HEADERS, timeout=120)
    assert answer.status_code == 400
    shape = answer.json()
    assert shape["type"] == "error" and shape["error"]["type"] == "invalid_request_error"
    assert needle in shape["error"]["message"]


def test_a_foreign_anthropic_custom_id_is_a_4xx_never_a_500(server: SimulatedServer) -> None:
    request = {
        "custom_id": "foo",
        "params": {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": PROMPT}]},
    }
    answer = http.post(
        f"{server.root_url}/v1/messages/batches", json={"requests": [request]}, headers=ANTHROPIC_HEADERS, timeout=120
    )
    assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error"
    assert "custom_id" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"max_tokens": 64}, "generationConfig.max_tokens"),
        ({"temperature": 5}, "generationConfig.temperature"),
        ({"thinkingConfig": {"thinkingBudget": 100_000}}, "thinkingBudget"),
    ],
)
def test_the_gemini_routes_refuse_what_generate_content_refuses(
    server: SimulatedServer, config: dict, needle: str
) -> None:
    """Before, unknown `generationConfig` fields, `temperature: 5` and `thinkingBudget: 100000`
    were answered. Now: a 400 in Google's error shape (`INVALID_ARGUMENT`)."""
    body = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}], "generationConfig": config}
    answer = http.post(
        f"{server.root_url}/v1beta/models/gemini-2.5-flash:generateContent",
        json=body,
        headers={"x-goog-api-key": "k"},
        timeout=120,
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 400 and needle in error["message"]


# --- a model the route cannot serve (item 8: "any model name") -------------------------------------


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        (" ", "no model name"),
    ],
)
def test_the_openai_routes_refuse_a_model_they_cannot_serve(server: SimulatedServer, model: str, needle: str) -> None:
    """Before, any name was answered 200. OpenAI answers a model it does not serve with 404
    `invalid_request_error`, code `model_not_found` ("The model `x` does not exist or you do not
    have access to it"; the `openai` SDK raises `NotFoundError`); in a batch the line lands in the
    error file with that status. The rule: `providers.served`."""
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}]}
    answer = http.post(
        f"{server.base_url}/chat/completions", json=body, headers={"Authorization": "Bearer k"}, timeout=120
    )
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "model_not_found" and error["type"] == "invalid_request_error"
    assert f"`{model}` does not exist" in error["message"] and needle in error["message"]
    client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    file = client.files.create(file=("in.jsonl", jsonl([request_line("c-1", PROMPT, model)])), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    done = wait(client, batch.id)
    assert done.status == "completed" and done.error_file_id and not done.output_file_id
    line = json.loads(client.files.content(done.error_file_id).read())
    assert line["response"]["status_code"] == 404 and line["response"]["body"]["error"]["code"] == "model_not_found"


def test_simulator_names_and_compatible_servers_models_are_served(server: SimulatedServer) -> None:
    """`*-sim` names, the models compatible platforms serve (DashScope's `qwen-plus` and
    `deepseek-r1`, SiliconFlow's `deepseek-ai/DeepSeek-V3`, Groq's and vLLM's `openai/gpt-oss-20b`:
    the `groq` SDK's model list), a version no SDK lists yet, and any name a compatible server may
    serve (`m1`, one letter from `o1`, or a near miss of an SDK's name: this route stands for every
    OpenAI-compatible endpoint; `prepare` refuses `openai/gpt-4o-mnii`, knowing it goes to OpenAI,
    `providers/bodies/test_contract.py`) are answered."""
    for model in (
        "gpt-sim", "claude-sim", "mistral-sim", "glm-sim", "sim-eval", "qwen-plus", "deepseek-r1",
        "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-20b", "claude-sonnet-4-7", "m1", "gpt-4o-mnii",
        "openai/gpt-4o", "google/gemma-3-27b-it",  # OpenRouter's, Together's and Vertex's own ids
    ):  # fmt: skip
        body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 1024}
        answer = http.post(
            f"{server.base_url}/chat/completions", json=body, headers={"Authorization": "Bearer k"}, timeout=120
        )
        assert answer.status_code == 200, (model, answer.text)


def _anthropic_request(i: int, params: dict) -> dict[str, Any]:
    from lexpilot_batch.providers.ids import custom_id, id_tag, request_check
    from lexpilot_batch.providers.lines import line_id

    tag = id_tag("conformance")
    cid = custom_id("0a1b2c3d", i, "lca.gen", 1, request_check(tag, b"{}"))
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [{"role": "user", "content": PROMPT}]}
    return {"custom_id": line_id(cid, "anthropic", tag), "params": {**body, **params}}


def _anthropic_results(server: SimulatedServer, requests: list[dict]) -> list[dict]:
    created = http.post(
        f"{server.root_url}/v1/messages/batches", json={"requests": requests}, headers=ANTHROPIC_HEADERS, timeout=120
    )
    assert created.status_code == 200, created.text
    batch = created.json()
    for _ in range(500):
        if batch["processing_status"] == "ended":
            break
        batch = http.get(
            f"{server.root_url}/v1/messages/batches/{batch['id']}", headers=ANTHROPIC_HEADERS, timeout=120
        ).json()
    assert batch["processing_status"] == "ended" and batch["results_url"]
    results = http.get(batch["results_url"], headers=ANTHROPIC_HEADERS, timeout=120).text.splitlines()
    by_id = {r["custom_id"]: r["result"] for r in map(json.loads, results)}
    return [by_id[r["custom_id"]] for r in requests]


ANTHROPIC_REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"n": 1}, "params.n"),
    ({"max_completion_tokens": 64}, "params.max_completion_tokens"),
    ({"messages": [{"role": "system", "content": "你是律师"}, {"role": "user", "content": PROMPT}]}, "role"),
    ({"max_tokens": 200_000}, "max_tokens"),
    ({"temperature": 3}, "temperature"),
]


def test_a_message_batch_line_the_messages_api_refuses_is_an_errored_result(server: SimulatedServer) -> None:
    """The batch-route half of the Anthropic test above. Anthropic's Message Batches docs: a batch
    is accepted whatever its requests' params hold; each request is validated when it runs, and one
    the Messages API refuses ends with result `{"type": "errored", "error": {"type": "error",
    "error": {"type": "invalid_request_error", "message"}}}`, the others succeeding beside it."""
    requests = [_anthropic_request(i, params) for i, (params, _) in enumerate(ANTHROPIC_REFUSED)]
    requests.append(_anthropic_request(len(requests), {}))  # a request the API takes
    *refused, fine = _anthropic_results(server, requests)
    assert fine["type"] == "succeeded"
    for result, (_, needle) in zip(refused, ANTHROPIC_REFUSED, strict=True):
        assert result["type"] == "errored", result
        error = result["error"]["error"]
        assert error["type"] == "invalid_request_error" and needle in error["message"]


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        ("claude-sonet-4-6", "did you mean claude-sonnet-4-6"),  # the SDK's `anthropic.types.Model` lists it
        ("gpt-sim", "Claude models only"),  # another lab's model on Anthropic's routes
        ("anthropic/claude-sonnet-4-5", "send claude-sonnet-4-5"),
    ],
)
def test_the_anthropic_routes_refuse_a_model_they_cannot_serve(
    server: SimulatedServer, model: str, needle: str
) -> None:
    """Anthropic answers a model it does not serve with 404 `not_found_error` ("model: NAME"); in a
    Message Batch that request's result is `errored` with the same error, the batch itself accepted."""
    body = {"model": model, "max_tokens": 1024, "messages": [{"role": "user", "content": PROMPT}]}
    answer = http.post(f"{server.root_url}/v1/messages", json=body, headers=ANTHROPIC_HEADERS, timeout=120)
    assert answer.status_code == 404
    shape = answer.json()
    assert shape["type"] == "error" and shape["error"]["type"] == "not_found_error"
    assert shape["error"]["message"].startswith(f"model: {model}") and needle in shape["error"]["message"]
    (result,) = _anthropic_results(server, [_anthropic_request(0, {"model": model})])
    assert result["type"] == "errored" and result["error"]["error"]["type"] == "not_found_error"
    assert needle in result["error"]["error"]["message"]


GEMINI_REFUSED = [
    ({"max_tokens": 64}, "generationConfig.max_tokens"),
    ({"temperature": 5}, "generationConfig.temperature"),
    ({"thinkingConfig": {"thinkingBudget": 100_000}}, "thinkingBudget"),
]


def _gemini_upload(server: SimulatedServer, data: bytes) -> str:
    """The File API's resumable upload (a start call, then the bytes with `upload, finalize`)."""
    start = http.post(
        f"{server.root_url}/upload/v1beta/files",
        headers={
            "x-goog-api-key": "k",
            "X-Goog-Upload-Protocol": "resumable",
            "X-Goog-Upload-Command": "start",
            "X-Goog-Upload-Header-Content-Length": str(len(data)),
        },
        json={"file": {"displayName": "in.jsonl"}},
        timeout=120,
    )
    done = http.post(
        start.headers["x-goog-upload-url"],
        content=data,
        headers={"X-Goog-Upload-Command": "upload, finalize", "X-Goog-Upload-Offset": "0"},
        timeout=120,
    )
    return str(done.json()["file"]["name"])


def test_a_gemini_batch_line_generate_content_refuses_is_an_error_line(server: SimulatedServer) -> None:
    """The batch-route half of the Gemini test above. Gemini Batch Mode (ai.google.dev/api/batch-mode,
    `GenerateContentBatchOutput.responsesFile`: one line per request, in the input's order; the
    google-genai SDK's `InlinedResponse` holds a `response` or an `error`): the batch succeeds, and
    each request generateContent refuses is a line `{"key", "error": {code, message, status}}` with
    `INVALID_ARGUMENT`, the others answered beside it. A model the API does not serve is in the
    create call's path: that create is refused with 404 `NOT_FOUND`, no batch made."""
    headers = {"x-goog-api-key": "k"}
    lines = [
        {
            "key": f"k{i}",
            "request": {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}], "generationConfig": c},
        }
        for i, (c, _) in enumerate([*GEMINI_REFUSED, ({"temperature": 0.5}, "")])
    ]
    name = _gemini_upload(server, jsonl(lines))
    batch = {"batch": {"displayName": "conformance", "inputConfig": {"fileName": name}}}
    refused = http.post(
        f"{server.root_url}/v1beta/models/gpt-4o:batchGenerateContent", json=batch, headers=headers, timeout=120
    )
    assert refused.status_code == 404
    error = refused.json()["error"]
    assert error["status"] == "NOT_FOUND" and "models/gpt-4o is not found" in error["message"]
    created = http.post(
        f"{server.root_url}/v1beta/models/gemini-2.5-flash:batchGenerateContent",
        json=batch,
        headers=headers,
        timeout=120,
    )
    assert created.status_code == 200, created.text
    operation = created.json()
    for _ in range(500):
        if operation["metadata"]["state"] not in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
            break
        operation = http.get(f"{server.root_url}/v1beta/{operation['name']}", headers=headers, timeout=120).json()
    assert operation["metadata"]["state"] == "BATCH_STATE_SUCCEEDED"
    responses = operation["metadata"]["output"]["responsesFile"]
    data = http.get(f"{server.root_url}/v1beta/{responses}:download?alt=media", headers=headers, timeout=120).text
    by_key = {line["key"]: line for line in map(json.loads, data.splitlines())}
    for i, (_, needle) in enumerate(GEMINI_REFUSED):
        error = by_key[f"k{i}"]["error"]
        assert error["status"] == "INVALID_ARGUMENT" and error["code"] == 3 and needle in error["message"]
    assert "response" in by_key[f"k{len(GEMINI_REFUSED)}"]


def test_the_gemini_and_mistral_routes_refuse_a_model_they_cannot_serve(server: SimulatedServer) -> None:
    """Gemini: 404 `NOT_FOUND` ("models/x is not found for API version v1beta, or is not supported
    for generateContent"). Mistral: 400 in its flat shape, `{"object": "error", "message": "Invalid
    model: x", "type": "invalid_model", "code": "1500"}` (as its API answers, e.g. mistralai/mistral-vibe
    issue 617), at the job's create."""
    body = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
    for model, needle in (("claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"), ("gpt-sim", "Gemini and Gemma")):
        answer = http.post(
            f"{server.root_url}/v1beta/models/{model}:generateContent",
            json=body,
            headers={"x-goog-api-key": "k"},
            timeout=120,
        )
        assert answer.status_code == 404
        error = answer.json()["error"]
        assert error["status"] == "NOT_FOUND" and error["code"] == 404 and needle in error["message"]
    assert http.post(
        f"{server.root_url}/v1beta/models/gemini-sim:generateContent", json=body, headers={"x-goog-api-key": "k"}
    ).is_success
    job = {"input_files": ["file-none"], "model": "gpt-4o", "endpoint": "/v1/chat/completions"}
    answer = http.post(f"{server.root_url}/v1/batch/jobs", json=job, headers={"Authorization": "Bearer k"}, timeout=120)
    assert answer.status_code == 400
    assert answer.json() == {
        "object": "error",
        "message": "Invalid model: gpt-4o (Mistral's API serves no OpenAI model; gpt-4o is OpenAI's: send it as openai/gpt-4o)",
        "type": "invalid_model",
        "param": None,
        "code": "1500",
    }


def test_a_mistral_batch_line_its_chat_completions_refuse_is_a_failed_request(server: SimulatedServer) -> None:
    """Mistral's batch jobs (docs.mistral.ai/capabilities/batch) run each line's `body` as a chat
    completion: one Mistral refuses (a field it does not know, 422 `extra_forbidden` on its sync
    route, such as OpenAI's `max_completion_tokens`) is a failed request in the job's error file, the
    others answered beside it. Before, the simulated jobs answered any body."""
    client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    lines = [
        {"custom_id": "bad", "body": {"messages": [{"role": "user", "content": PROMPT}], "max_completion_tokens": 64}},
        {"custom_id": "fine", "body": {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 64}},
    ]
    file = client.files.create(file=("in.jsonl", jsonl(lines)), purpose="batch")
    headers = {"Authorization": "Bearer k"}
    job = {"input_files": [file.id], "model": "mistral-sim", "endpoint": "/v1/chat/completions"}
    created = http.post(f"{server.root_url}/v1/batch/jobs", json=job, headers=headers, timeout=120).json()
    for _ in range(500):
        if created["status"] in ("SUCCESS", "FAILED", "TIMEOUT_EXCEEDED", "CANCELLED"):
            break
        created = http.get(f"{server.root_url}/v1/batch/jobs/{created['id']}", headers=headers, timeout=120).json()
    assert created["status"] == "SUCCESS" and created["succeeded_requests"] == 1 and created["failed_requests"] == 1
    (error,) = [json.loads(x) for x in client.files.content(created["error_file"]).text.splitlines()]
    assert error["custom_id"] == "bad" and error["response"]["status_code"] == 400
    assert "max_completion_tokens: not a field of Mistral's chat completions" in error["response"]["body"]["message"]
