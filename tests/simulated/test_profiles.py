"""The OpenAI-compatible platforms' differences as the simulated provider speaks them, each on its own
path (`simulated.profiles`), driven by the `openai` SDK as `lexpilot-batch` drives them: what each
accepts and refuses (purposes, endpoints, completion windows, file limits), its new batch's status
word, its error bodies, and Ark's batch chat route. The values are the platforms' documented ones,
cited in `lexpilot_batch/simulated/profiles.py`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import OpenAI

from lexpilot_batch.providers.openai.batch import status_of
from lexpilot_batch.providers.openai.errors import failure_of
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.simulated.batches import validate_input
from lexpilot_batch.simulated.profiles import PROFILES
from tests.helpers.simulated import TERMINAL, jsonl, read_lines, request_line

# platform -> the batch endpoint (and line url) it runs
BATCH_PLATFORMS = {
    "groq": "/v1/chat/completions",
    "zhipu": "/v4/chat/completions",
    "qianfan": "/v2/chat/completions",
    "siliconflow": "/v1/chat/completions",
    "moonshot": "/v1/chat/completions",
}


@pytest.fixture(autouse=True)
def _no_env_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedServer]:
    with SimulatedServer(tmp_path_factory.mktemp("profiles") / "sim") as running:
        yield running


def client(server: SimulatedServer, platform: str | None = None) -> OpenAI:
    url = server.profile_url(platform) if platform else server.base_url
    return OpenAI(base_url=url, api_key="sk-simulated", max_retries=0)


def lines(url: str, n: int = 2, model: str = "sim-model") -> bytes:
    return jsonl([{**request_line(f"r{i}", f"问题{i}", model), "url": url} for i in range(n)])


def upload(api: OpenAI, data: bytes) -> str:
    return api.files.create(file=("input.jsonl", data), purpose="batch").id


def error_of(call: Any) -> tuple[int, dict[str, Any]]:
    """The HTTP status and the JSON body of the error answer `call()` raises."""
    with pytest.raises(openai.APIStatusError) as info:
        call()
    return info.value.status_code, info.value.response.json()


def finished(api: OpenAI, batch_id: str) -> Any:
    for _ in range(500):
        batch = api.batches.retrieve(batch_id)
        if batch.status in TERMINAL:
            return batch
        import time

        time.sleep(0.01)
    raise AssertionError(f"{batch_id} did not finish")


@pytest.mark.parametrize("platform", sorted(BATCH_PLATFORMS))
def test_each_platform_runs_a_batch_of_its_own_endpoint_on_its_own_routes(server, platform):
    api, url = client(server, platform), BATCH_PLATFORMS[platform]
    batch = api.batches.create(input_file_id=upload(api, lines(url)), endpoint=url, completion_window="24h")  # type: ignore[arg-type]
    # SiliconFlow's create answer says `in_queue` with null counts (its create-batch reference); the
    # others OpenAI's `validating`. The backend reads both as `validating`.
    assert batch.status == ("in_queue" if platform == "siliconflow" else "validating")
    assert (batch.request_counts is None) == (platform == "siliconflow")
    assert status_of(batch.status) == "validating"
    done = finished(api, batch.id)
    assert done.status == "completed" and done.request_counts and done.request_counts.completed == 2
    assert {line["custom_id"] for line in read_lines(api, done.output_file_id)} == {"r0", "r1"}
    # Each platform is an account of its own: its batch is not listed on OpenAI's routes nor on another's.
    assert batch.id in {b.id for b in api.batches.list()}
    other = "moonshot" if platform != "moonshot" else "groq"
    assert batch.id not in {b.id for b in client(server, other).batches.list()}
    assert batch.id not in {b.id for b in client(server).batches.list()}
    assert error_of(lambda: client(server, other).batches.retrieve(batch.id))[0] == 404


@pytest.mark.parametrize(
    ("platform", "accepted", "refused"),
    [
        ("groq", ["24h", "48h", "7d"], ["12h", "8d", "169h"]),
        ("zhipu", ["24h"], ["48h", "1d"]),
        ("qianfan", ["1h", "24h", "672h"], ["673h", "1d", "0h"]),
        ("siliconflow", ["24h", "336h"], ["23h", "337h", "2d"]),
        ("moonshot", ["12h", "1d", "3d", "7d"], ["11h", "8d", "169h"]),
    ],
)
def test_each_platform_accepts_its_documented_completion_windows_and_refuses_others_in_its_error_shape(
    server, platform, accepted, refused
):
    api, url = client(server, platform), BATCH_PLATFORMS[platform]
    file_id = upload(api, lines(url, 1))
    for window in accepted:
        batch = api.batches.create(input_file_id=file_id, endpoint=url, completion_window=window)  # type: ignore[arg-type]
        assert batch.completion_window == window
        hours = int(window[:-1]) * (24 if window.endswith("d") else 1)
        assert batch.expires_at is not None and batch.expires_at - batch.created_at == hours * 3600
    for window in refused:
        status, body = error_of(
            lambda w=window: api.batches.create(input_file_id=file_id, endpoint=url, completion_window=w)  # type: ignore[arg-type]
        )
        assert status == 400 and window in json.dumps(body), body
        assert_shape(platform, body, 400)


def assert_shape(platform: str, body: dict[str, Any], status: int) -> None:
    """The error body of the platform's documented shape (see `simulated.profiles`)."""
    if platform == "siliconflow":
        assert set(body) == {"code", "message", "data"} and body["data"] is None
        assert body["code"] == status
        return
    error = body["error"]
    expected = {
        "groq": {"message", "type", "param", "code"},
        "zhipu": {"code", "message"},
        "qianfan": {"code", "message", "type"},
        "moonshot": {"type", "message"},
        "ark": {"code", "message", "param", "type"},
    }[platform]
    assert set(error) == expected, body
    if platform == "zhipu":
        assert error["code"] == {400: "1210", 404: "1210", 429: "1302", 500: "500"}[status]
    if platform == "qianfan":
        assert "id" in body
        assert (error["code"], error["type"]) == {
            400: ("invalid_argument", "invalid_request_error"),
            404: ("invalid_argument", "invalid_request_error"),
            429: ("rpm_rate_limit_exceeded", "rate_limit_exceeded"),
            500: ("internal_error", "internal_error"),
        }[status]
    if platform == "moonshot":
        assert (
            error["type"]
            == {
                400: "invalid_request_error",
                404: "resource_not_found_error",
                429: "rate_limit_reached_error",
                500: "server_error",
            }[status]
        )
    if platform == "ark":
        assert (error["code"], error["type"]) == {
            400: ("InvalidParameter", "BadRequest"),
            404: ("InvalidEndpointOrModel.NotFound", "NotFound"),
            429: ("RateLimitExceeded.EndpointRPMExceeded", "TooManyRequests"),
            500: ("InternalServiceError", "InternalServiceError"),
        }[status]


@pytest.mark.parametrize("platform", sorted(BATCH_PLATFORMS))
def test_each_platform_refuses_another_endpoint_another_purpose_and_an_unknown_batch_in_its_shape(server, platform):
    api, url = client(server, platform), BATCH_PLATFORMS[platform]
    wrong = "/v4/chat/completions" if url != "/v4/chat/completions" else "/v1/chat/completions"
    file_id = upload(api, lines(wrong, 1))
    status, body = error_of(
        lambda: api.batches.create(input_file_id=file_id, endpoint=wrong, completion_window="24h")  # type: ignore[arg-type]
    )
    assert status == 400 and wrong in json.dumps(body)
    assert_shape(platform, body, 400)
    status, body = error_of(lambda: api.files.create(file=("x.jsonl", b"{}\n"), purpose="fine-tune"))
    assert status == 400 and "fine-tune" in json.dumps(body)
    assert_shape(platform, body, 400)
    status, body = error_of(lambda: api.batches.retrieve("batch_nope"))
    assert status == 404
    assert_shape(platform, body, 404)
    # What the backend makes of it: the platform's own message, whatever its shape.
    with pytest.raises(openai.APIStatusError) as info:
        api.batches.retrieve("batch_nope")
    failure = failure_of(info.value)
    assert failure is not None and failure.status == 404 and "batch_nope" in failure.message


def test_zhipu_needs_no_completion_window_as_its_reference_shows(server):
    api = client(server, "zhipu")
    file_id = upload(api, lines("/v4/chat/completions", 1))
    batch = api.post(
        "/batches",
        body={"input_file_id": file_id, "endpoint": "/v4/chat/completions"},
        cast_to=openai.types.Batch,
    )
    assert batch.completion_window == "24h"
    status, body = error_of(
        lambda: client(server, "groq").post(
            "/batches", body={"input_file_id": file_id, "endpoint": "/v1/chat/completions"}, cast_to=openai.types.Batch
        )
    )
    assert status == 400 and "completion_window" in body["error"]["message"]


@pytest.mark.parametrize("platform", ["qianfan", "siliconflow"])
def test_a_file_over_the_platforms_request_limit_fails_validation_as_openai_fails_one(server, platform):
    """Qianfan and SiliconFlow take at most 5,000 requests per file; neither says whether the create is
    refused or the batch fails, so the batch fails validation (`too_many_requests`), as OpenAI's does."""
    api, url = client(server, platform), BATCH_PLATFORMS[platform]
    batch = api.batches.create(input_file_id=upload(api, lines(url, 5_001)), endpoint=url, completion_window="24h")  # type: ignore[arg-type]
    done = finished(api, batch.id)
    assert done.status == "failed" and done.errors and done.errors.data
    error = done.errors.data[0]
    assert error.code == "too_many_requests" and "5001" in str(error.message) and "5000" in str(error.message)
    # The limit itself is a valid file: 5,000 lines, each valid.
    valid, _, errors = validate_input(lines(url, 5_000), url, max_requests=PROFILES[platform].max_requests)
    assert valid == 5_000 and not errors


def test_ark_answers_its_batch_chat_route_only_and_refuses_streaming_in_its_shape(server):
    api = client(server, "ark")
    answer = api.chat.completions.create(model="ep-bi-sim", messages=[{"role": "user", "content": "你好"}])
    assert answer.choices[0].message.content
    assert server.stats["calls:ark:chat_completion"] >= 1
    status, body = error_of(
        lambda: api.chat.completions.create(
            model="ep-bi-sim", messages=[{"role": "user", "content": "你好"}], stream=True
        )
    )
    assert status == 400 and "stream" in body["error"]["message"]
    assert_shape("ark", body, 400)
    # No Files + Batches on Ark: its batch inference jobs are not this API.
    status, body = error_of(lambda: api.files.create(file=("x.jsonl", b"{}\n"), purpose="batch"))
    assert status == 404
    assert_shape("ark", body, 404)


@pytest.mark.parametrize(("fault", "status"), [("http_429=1", 429), ("http_500=1", 500)])
def test_injected_http_faults_answer_in_each_platforms_shape(tmp_path: Path, fault, status):
    with SimulatedServer(tmp_path / "sim", parse_faults(f"{fault},retry_after=0")) as faulty:
        for platform in ("ark", *sorted(BATCH_PLATFORMS)):
            api = client(faulty, platform)
            if platform == "ark":
                got, body = error_of(
                    lambda api=api: api.chat.completions.create(
                        model="ep-bi-sim", messages=[{"role": "user", "content": "x"}]
                    )
                )
            else:
                got, body = error_of(lambda api=api: api.batches.list())
            assert got == status
            assert_shape(platform, body, status)
        assert faulty.stats[f"http_{status}"] == 1 + len(BATCH_PLATFORMS)


def test_openai_routes_keep_openai_behaviour(server):
    """Without a platform's path, nothing changed: `/v1` takes only OpenAI's 24h and its shape."""
    api = client(server)
    file_id = upload(api, lines("/v1/chat/completions", 1))
    status, body = error_of(
        lambda: api.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="48h")  # type: ignore[arg-type]
    )
    assert status == 400 and set(body["error"]) == {"message", "type", "param", "code"}
    batch = api.batches.create(input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h")
    assert batch.status == "validating"
