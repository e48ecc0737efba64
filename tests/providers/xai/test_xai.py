"""xAI's Batch API (issue 50): the `xai/` folder held to xAI's own documented shapes
(`tests/providers/documented/xai.json`, each example with its source and the date taken) and to the
official `xai-sdk`'s protobuf messages (1.21.0), the backend run on the simulated routes, and the
simulated batches driven by the official SDK itself, unmodified, over gRPC
(`tests/helpers/xai_grpc.py`: its generated `BatchMgmt` servicer over the same state as
the REST routes). What every native API goes through (a lost create, groups sent at once, faults)
is `tests/scenarios/test_native_apis.py`'s, xAI among them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from lexpilot_batch.engine import answers
from lexpilot_batch.errors import ProviderError
from lexpilot_batch.providers.batch import BatchSource, BatchStatus
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.xai import batch, lines, results
from lexpilot_batch.providers.xai.spec import API, LIMITS
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.simulated.faults import DAMAGES

MODEL = "grok-4-1-fast-reasoning"
KEY = "sk-simulated"


def _requests(n: int, model: str = MODEL) -> list[dict[str, Any]]:
    body = {"model": model, "max_tokens": 64}
    return [
        {"custom_id": f"r-{i}", "body": {**body, "messages": [{"role": "user", "content": f"question {i}"}]}}
        for i in range(n)
    ]


def _file(tmp_path: Path, n: int, name: str = "batch.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in _requests(n)), encoding="utf-8")
    return path


def _backend(server: SimulatedServer) -> batch.XaiBatchBackend:
    return batch.XaiBatchBackend(Endpoint("eval", server.native_url("xai"), "XAI_API_KEY", api_key=KEY), LIMITS)


def _until_ended(backend: batch.XaiBatchBackend, batch_id: str, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = backend.retrieve(batch_id)
        if found.terminal or time.monotonic() > deadline:
            return found


# --- the batch as xAI's `Batch` reads ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({"state": {}}, BatchStatus.VALIDATING),  # created, no request added yet
        ({"state": {"num_requests": 3, "num_pending": 2, "num_success": 1}}, BatchStatus.IN_PROGRESS),
        ({"state": {"num_requests": 3, "num_success": 2, "num_error": 1}}, BatchStatus.COMPLETED),
        ({"state": {"num_requests": 3, "num_pending": 1}, "cancel_time": "2026-12-06T10:00:00Z"}, BatchStatus.CANCELLING),
        ({"state": {"num_requests": 3, "num_success": 1, "num_cancelled": 2}, "cancel_time": "2026-12-06T10:00:00Z"}, BatchStatus.CANCELLED),
        (
            {"state": {"num_requests": 3, "num_success": 1, "num_cancelled": 2}, "cancel_time": "2026-12-06T10:00:00Z",
             "cancel_by_xai_message": "not processed in time"},
            BatchStatus.EXPIRED,
        ),
    ],
)  # fmt: skip
def test_a_batch_s_counts_and_cancel_time_read_as_our_states(fields: dict[str, Any], status: str) -> None:
    found = batch.info({"batch_id": "b-1", "name": "x", **fields})
    assert found.status == status
    assert (found.output_file_id == "b-1") is (
        status in (BatchStatus.COMPLETED, BatchStatus.CANCELLED, BatchStatus.EXPIRED)
    )


def test_a_batch_holding_no_request_carries_no_tag_so_no_file_adopts_it() -> None:
    tag = {"lexpilot_workspace": "w1", "lexpilot_file": "batches/a.jsonl", "lexpilot_sha256": "ab" * 16}
    empty = batch.info({"batch_id": "b-1", "name": batch.name_of(tag), "state": {}})
    filled = batch.info({"batch_id": "b-2", "name": batch.name_of(tag), "state": {"num_requests": 2, "num_pending": 2}})
    refused = batch.info(
        {"batch_id": "b-3", "name": batch.name_of(tag), "state": {}, "cancel_time": "2026-12-06T10:00:00Z"}
    )
    assert empty.metadata == {} and refused.metadata == {} and filled.metadata == tag


@pytest.mark.parametrize(
    ("stamp", "seconds"),
    [
        ("2026-12-06T10:00:00Z", 1796551200.0),
        ("2026-12-06T10:00:00.123456789Z", 1796551200.123456),  # protobuf's nanoseconds
        ("2026-12-06T11:00:00+01:00", 1796551200.0),
        ("not a time", None),
        (1796551200, None),
    ],
)
def test_protobuf_timestamps_read_as_seconds(stamp: Any, seconds: float | None) -> None:
    found = batch.seconds(stamp)
    assert found == (pytest.approx(seconds) if seconds is not None else None)


def test_an_answer_that_is_no_batch_is_an_answer_lost_on_the_way() -> None:
    from lexpilot_batch.providers.xai.errors import Unreadable, failure_of

    with pytest.raises(Unreadable) as raised:
        batch.info("<html>bad gateway</html>")
    failure = failure_of(raised.value)
    assert failure is not None and failure.status is None  # a create is uncertain, a poll tried again


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ({"batch_request_id": "r", "batch_result": {"error": {"code": 3, "message": "bad model"}}}, ("3", "bad model")),
        ({"batch_request_id": "r", "error": {"code": 13, "message": "internal"}}, ("13", "internal")),
        ({"batch_request_id": "r", "error_message": "failed"}, (None, "failed")),
    ],
)
def test_a_failed_request_reads_as_an_error_line_with_its_code(line: dict[str, Any], error: tuple) -> None:
    read = results.result(line)
    assert read["custom_id"] == "r" and read["response"] is None
    assert (read["error"]["code"], read["error"]["message"]) == error


def test_a_request_line_is_a_chat_completions_body_whose_fields_xai_s_sdk_names() -> None:
    chat_pb2 = pytest.importorskip("xai_sdk.proto.v6.chat_pb2")
    line = lines.empty(MODEL, "/v1/chat/completions", API.dialect.body(MODEL, 0.0, 256, None, None))
    fields = {f.name for f in chat_pb2.GetCompletionsRequest.DESCRIPTOR.fields}
    assert set(line) == {"custom_id", "body"} and set(line["body"]) <= fields, set(line["body"]) - fields


def test_a_file_beyond_one_add_call_is_refused_before_sending(tmp_path: Path) -> None:
    endpoint = Endpoint("eval", "http://127.0.0.1:9/v1", "XAI_API_KEY", api_key=KEY)
    backend = batch.XaiBatchBackend(endpoint, dataclasses.replace(LIMITS, max_requests=2))
    with pytest.raises(ProviderError, match="one add call"):
        backend.upload(_file(tmp_path, 3))


# --- the backend on the simulated routes, their answers xai-sdk's messages ------------------------


def test_the_add_call_s_wrapping_is_counted_against_its_documented_25_mb(tmp_path: Path) -> None:
    source = _file(tmp_path, 3)
    body = batch._requests(source)
    assert len(body) - source.stat().st_size <= 3 * batch.WRAP + len('{"batch_requests":[]}')
    endpoint = Endpoint("eval", "http://127.0.0.1:9/v1", "XAI_API_KEY", api_key=KEY)
    backend = batch.XaiBatchBackend(endpoint, LIMITS)
    many = tmp_path / "many.jsonl"  # within a file's lines and bytes, beyond one add call once wrapped
    request = _requests(1)[0]
    short = len(json.dumps(request).encode("utf-8")) + 1
    request["body"]["messages"][0]["content"] += "x" * (470 - short)  # 470 bytes a line
    many.write_bytes((json.dumps(request).encode("utf-8") + b"\n") * LIMITS.max_requests)
    size = many.stat().st_size
    assert size <= LIMITS.max_bytes and size + LIMITS.max_requests * batch.WRAP > batch.ADD_BYTES
    with pytest.raises(ProviderError, match="one add call"):
        backend.upload(many)


def test_the_backend_runs_a_batch_whose_every_answer_is_xai_sdk_s_batch_message(tmp_path: Path) -> None:
    json_format = pytest.importorskip("google.protobuf.json_format")
    batch_pb2 = pytest.importorskip("xai_sdk.proto.v6.batch_pb2")
    source = _file(tmp_path, 4)
    tag = {"lexpilot_workspace": "w1", "lexpilot_file": "batches/a.jsonl", "lexpilot_sha256": "ab" * 16}
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        backend = _backend(server)
        made = backend.create(backend.upload(source), tag, None, BatchSource(source, MODEL))
        assert made.metadata == tag and made.request_counts["total"] == 4
        ended = _until_ended(backend, made.id)
        assert ended.status == BatchStatus.COMPLETED and [b.id for b in backend.batches()] == [made.id]
        assert backend.find(tag) is not None
        backend.download(str(ended.output_file_id), tmp_path / "results.jsonl")
        headers = {"Authorization": f"Bearer {KEY}"}
        base = server.native_url("xai")
        # Strict: a field the SDK's message does not have, or a value of another type, fails the parse.
        got = httpx.get(f"{base}/batches/{made.id}", headers=headers).json()
        parsed = json_format.ParseDict(got, batch_pb2.Batch())
        assert parsed.state.num_success + parsed.state.num_error == 4 and parsed.name == batch.name_of(tag)
        json_format.ParseDict(httpx.get(f"{base}/batches", headers=headers).json(), batch_pb2.ListBatchesResponse())
    saved = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["batch_request_id"] for r in saved) == [f"r-{i}" for i in range(4)]
    assert all(results.result(r)["response"] or results.result(r)["error"] for r in saved)


def test_a_cancelled_batch_keeps_the_results_of_what_it_finished(tmp_path: Path) -> None:
    source = _file(tmp_path, 6)
    with SimulatedServer(tmp_path / "sim", parse_faults("latency=4")) as server:
        backend = _backend(server)
        made = backend.create(backend.upload(source), {"lexpilot_workspace": "w"}, None, BatchSource(source, MODEL))
        deadline = time.monotonic() + 20
        while sum(made.request_counts[k] for k in ("completed", "failed")) < 1 and time.monotonic() < deadline:
            made = backend.retrieve(made.id)
        backend.cancel(made.id)
        ended = _until_ended(backend, made.id)
        assert ended.status == BatchStatus.CANCELLED
        backend.download(str(ended.output_file_id), tmp_path / "results.jsonl")
    saved = (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert 0 < len(saved) == ended.request_counts["completed"] + ended.request_counts["failed"] < 6


def test_a_container_whose_requests_never_came_is_not_taken_for_the_file_s_batch(tmp_path: Path) -> None:
    """The command stopped between the create and the add: a listing shows the empty container
    untagged, so the lost create's search finds nothing and the file is created again."""
    source = _file(tmp_path, 2)
    tag = {"lexpilot_workspace": "w1", "lexpilot_file": "batches/a.jsonl", "lexpilot_sha256": "cd" * 16}
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        backend = _backend(server)
        empty = httpx.post(
            server.native_url("xai") + "/batches",
            json={"name": batch.name_of(tag)},
            headers={"Authorization": f"Bearer {KEY}"},
        ).json()
        assert backend.find(tag) is None
        made = backend.create(backend.upload(source), tag, None, BatchSource(source, MODEL))
        assert made.id != empty["batch_id"] and backend.find(tag) == backend.retrieve(made.id)


def test_what_xai_does_not_take_is_refused_in_its_error_shape(tmp_path: Path) -> None:
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        base, headers = server.native_url("xai"), {"Authorization": f"Bearer {KEY}"}
        made = httpx.post(f"{base}/batches", json={"name": "n"}, headers=headers).json()
        body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 8}
        item = {"batch_request_id": "a", "batch_request": {"chat_get_completion": body}}
        refused = httpx.post(
            f"{base}/batches/{made['batch_id']}/requests", json={"batch_requests": [item]}, headers=headers
        )
        httpx.post(f"{base}/batches/{made['batch_id']}:cancel", headers=headers)
        late = httpx.post(
            f"{base}/batches/{made['batch_id']}/requests", json={"batch_requests": [item]}, headers=headers
        )
    pytest.importorskip("xai_sdk")  # the fields are xai-sdk's GetCompletionsRequest's
    assert refused.status_code == 400 and set(refused.json()) == {"code", "error"}
    assert "max_completion_tokens" in refused.json()["error"]
    assert late.status_code == 400 and "cancelled" in late.json()["error"]


@pytest.mark.parametrize("kind", DAMAGES)
def test_a_damaged_page_of_results_is_saved_as_it_came_and_the_next_fetch_is_whole(tmp_path: Path, kind: str) -> None:
    source = _file(tmp_path, 3)
    faults = parse_faults(f"damaged_download=1,damaged_times=1,damage={kind}")
    with SimulatedServer(tmp_path / "sim", faults) as server:
        backend = _backend(server)
        made = backend.create(backend.upload(source), {}, None, BatchSource(source, MODEL))
        ended = _until_ended(backend, made.id)
        backend.download(str(ended.output_file_id), tmp_path / "first.jsonl")
        backend.download(str(ended.output_file_id), tmp_path / "again.jsonl")
        assert server.stats[f"damaged_download:{kind}"] == 1  # the control: the page came damaged
    first = (tmp_path / "first.jsonl").read_text(encoding="utf-8", errors="replace").splitlines()
    whole = [json.loads(x) for x in (tmp_path / "again.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(whole) == 3 and first != [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in whole]


# --- the official SDK, unmodified, on the simulated batches ---------------------------------------


def test_the_official_sdk_creates_adds_polls_lists_reads_and_cancels_the_batches_the_backend_sees(
    tmp_path: Path,
) -> None:
    """xai-sdk's `Client` (its documented `api_host` and `use_insecure_channel`, nothing patched)
    on a `BatchMgmt` gRPC server over the simulated batches' state: the guide's workflow, with
    chats built as the guide builds them; the product's backend then reads the same batches over REST."""
    pytest.importorskip("xai_sdk")
    from xai_sdk import Client
    from xai_sdk.chat import system, user

    from lexpilot_batch.simulated.apis.xai import XaiApi
    from tests.helpers.xai_grpc import serve

    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        api = server.handlers["xai"]
        assert isinstance(api, XaiApi)
        grpc_server, port = serve(api)
        try:
            client = Client(api_key=KEY, api_host=f"127.0.0.1:{port}", use_insecure_channel=True, timeout=30)
            made = client.batch.create(batch_name="customer_feedback_analysis")
            chats = []
            for n, text in enumerate(("The product exceeded my expectations!", "Shipping took way too long.")):
                chat = client.chat.create(model=MODEL, max_tokens=64, batch_request_id=f"feedback_00{n + 1}")
                chat.append(system("Classify the sentiment as positive, negative, or neutral."))
                chat.append(user(text))
                chats.append(chat)
            client.batch.add(batch_id=made.batch_id, batch_requests=chats)
            client.batch.add(batch_id=made.batch_id, batch_requests=chats)  # again: processed once
            deadline = time.monotonic() + 60
            while (got := client.batch.get(batch_id=made.batch_id)).state.num_pending and time.monotonic() < deadline:
                pass
            assert got.state.num_requests == 2 and got.state.num_pending == 0
            page = client.batch.list_batch_results(batch_id=made.batch_id, limit=1)
            rest = client.batch.list_batch_results(
                batch_id=made.batch_id, limit=1, pagination_token=page.pagination_token
            )
            found = [*page.results, *rest.results]
            assert sorted(r.batch_request_id for r in found) == ["feedback_001", "feedback_002"]
            assert all(r.response.content for r in page.succeeded + rest.succeeded) and rest.pagination_token is None
            assert [b.batch_id for b in client.batch.list(limit=10).batches] == [made.batch_id]
            other = client.batch.create(batch_name="to cancel")
            cancelled = client.batch.cancel(batch_id=other.batch_id)
            assert cancelled.HasField("cancel_time")

            backend = _backend(server)  # the product, over REST, sees the SDK's batches
            seen = backend.retrieve(made.batch_id)
            assert seen.status == BatchStatus.COMPLETED and seen.request_counts["total"] == 2
            assert backend.retrieve(other.batch_id).status == BatchStatus.CANCELLED
            backend.download(made.batch_id, tmp_path / "results.jsonl")
        finally:
            grpc_server.stop(None)
    saved = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    read = [results.result(r) for r in saved]
    assert sorted(r["custom_id"] for r in read) == ["feedback_001", "feedback_002"]


def test_each_answer_s_charged_cost_is_read_from_its_ticks_as_xai_s_sdk_reads_them() -> None:
    """xAI's cost-tracking page (https://docs.x.ai/developers/cost-tracking, taken 2026-12-06):
    every response's `usage.cost_in_usd_ticks` is what the request was charged, 10^10 ticks a
    dollar ("a response with "cost_in_usd_ticks": 37756000 cost $0.0038"). Read as the official
    SDK's `cost.cost_usd_from_usage` reads its `SamplingUsage`, and as protobuf's JSON writes that
    int64 (a string), through a batch result."""
    usage_pb2 = pytest.importorskip("xai_sdk.proto.v6.usage_pb2")
    cost = pytest.importorskip("xai_sdk.cost")
    json_format = pytest.importorskip("google.protobuf.json_format")
    sampled = usage_pb2.SamplingUsage(prompt_tokens=26, completion_tokens=168, cost_in_usd_ticks=37756000)
    as_json = json_format.MessageToDict(sampled, preserving_proto_field_name=True)
    assert as_json["cost_in_usd_ticks"] == "37756000"  # protobuf's JSON: an int64 is a string
    for usage in (as_json, {**as_json, "cost_in_usd_ticks": 37756000}):
        completion: dict[str, Any] = {"id": "c", "object": "chat.completion", "choices": [], "usage": usage}
        line = {"batch_request_id": "r", "batch_result": {"response": {"chat_get_completion": completion}}}
        body = results.result(line)["response"]["body"]
        assert answers._usage(body)[5] == pytest.approx(cost.cost_usd_from_usage(sampled)) == pytest.approx(0.0037756)
    for bad in ("-5", "1e3", True, None, 1.5):
        assert answers._usage({"usage": {"cost_in_usd_ticks": bad}})[5] is None, bad


def test_each_answer_s_charged_cost_is_kept_and_is_the_reports_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the simulated answers' `usage.cost_in_usd_ticks` (at its own price, `PRICE`) to the
    workspace: every answered request keeps what it was charged, and every role's work is priced
    at the sum (`providers.charges`), not at the bundled table's price."""
    from lexpilot_batch.simulated.apis.xai import PRICE
    from tests.helpers.native import reported_costs

    rows, counted = reported_costs(tmp_path / "ws", monkeypatch, "xai")
    for prompt, completion, cost in rows:
        assert cost == pytest.approx(round((prompt * PRICE[0] + completion * PRICE[1]) / 1e6 * 1e10) / 1e10)
    assert sum(c["reported"] for c in counted) == len(rows) and not any(c["unreported"] for c in counted)
