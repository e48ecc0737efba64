"""The simulated provider's faults: the spec parser, the shape each fault produces, and the
determinism that lets a retried request (new custom_id) draw again while a restart changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import OpenAI

from lexpilot_batch.benchmark import judges, prompts
from lexpilot_batch.data import Message
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.simulated import Faults, SimulatedServer, parse_faults
from lexpilot_batch.simulated.batches import sample_key
from lexpilot_batch.simulated.roles import identify_kind, respond
from tests.helpers.simulated import jsonl, read_lines, request_line, submit, wait

HISTORY = [
    Message(role="user", content="我2021年3月借给朋友5万元，他写了借条，约定一年后还，现在一直不还。"),
]
DETAILS = ["借条约定年利率6%", "2022年5月被告归还了1万元"]
CLAIMS = ["返还借款5万元", "支付利息", "承担诉讼费"]


@pytest.fixture(autouse=True)
def _no_env_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEXPILOT_SIM_FAULTS", raising=False)


def mixed_lines(n: int, prefix: str = "r") -> list[dict[str, Any]]:
    """n requests cycling through eval and judge prompts."""
    asked = [*HISTORY, Message(role="assistant", content="请问借条上有没有约定利息？")]
    cycle = [
        prompts.lexawn_prompt(HISTORY),
        prompts.lca_classify_prompt(HISTORY, "请问借条上写了利息吗？"),
        prompts.dcg_judge_prompt(HISTORY, "请问借条上有没有约定利息？", ["利息"], DETAILS),
        prompts.extract_verdicts_prompt(CLAIMS, "第一项请求：结论：支持。"),
        prompts.user_model_prompt(asked, ["利息"], DETAILS),
        prompts.force_judge_prompt(HISTORY),
    ]
    return [request_line(f"{prefix}{i}", cycle[i % len(cycle)] + f"\n（{i}）") for i in range(n)]


def run_batch(tmp_path: Path, spec: str, lines: list[dict[str, Any]], name: str = "sim") -> tuple[Any, list, list]:
    with SimulatedServer(tmp_path / name, faults=parse_faults(spec)) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        batch = wait(client, submit(client, jsonl(lines)))
        return batch, read_lines(client, batch.output_file_id), read_lines(client, batch.error_file_id)


# --- the spec -----------------------------------------------------------------------------------


def test_parse_the_full_spec() -> None:
    faults = parse_faults(
        "line_error=0.05,truncate=0.02,malformed_judge=0.1,expire_batch=0.1,fail_batch=0.05,"
        "http_429=0.05,http_500=0.05,latency=2,seed=7"
    )
    assert faults == Faults(
        line_error=0.05,
        truncate=0.02,
        malformed_judge=0.1,
        expire_batch=0.1,
        fail_batch=0.05,
        http_429=0.05,
        http_500=0.05,
        latency=2.0,
        seed=7,
    )
    assert parse_faults(faults.describe()) == faults
    assert parse_faults(" latency = 1 , ") == Faults(latency=1.0)
    assert parse_faults("") == parse_faults("none") == Faults()


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("line_eror=0.1", "line_eror"),
        ("truncate=1.5", "truncate"),
        ("http_429=-0.1", "http_429"),
        ("latency=soon", "latency"),
        ("latency=-1", "latency"),
        ("seed=1.5", "seed"),
        ("latency", "latency"),
        ("truncate=0.1,truncate=0.2", "truncate"),
    ],
)
def test_bad_specs_name_the_key(spec: str, named: str) -> None:
    with pytest.raises(ValueError, match=named) as err:
        parse_faults(spec)
    assert isinstance(err.value, LexpilotError)


def test_environment_supplies_the_spec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LEXPILOT_SIM_FAULTS", "fail_batch=1,seed=3")
    assert parse_faults(None) == Faults(fail_batch=1.0, seed=3)
    assert parse_faults("latency=0") == Faults()  # an explicit spec wins
    with SimulatedServer(tmp_path / "sim") as server:
        client = OpenAI(base_url=server.base_url, api_key="k")
        assert wait(client, submit(client, jsonl(mixed_lines(2)))).status == "failed"


# --- per-request faults -------------------------------------------------------------------------


def test_line_errors_land_in_the_error_file_in_both_shapes(tmp_path: Path) -> None:
    lines = mixed_lines(40)
    batch, output, errors = run_batch(tmp_path, "line_error=0.4,seed=1", lines)
    assert batch.status == "completed"
    assert 0 < len(errors) < 40 and len(output) + len(errors) == 40
    assert sorted(x["custom_id"] for x in output + errors) == sorted(x["custom_id"] for x in lines)
    assert batch.request_counts.model_dump() == {"total": 40, "completed": len(output), "failed": len(errors)}
    bare = [e for e in errors if e["response"] is None]
    with_status = [e for e in errors if e["response"] is not None]
    assert bare and with_status
    assert all(e["error"]["code"] == "server_error" and e["error"]["message"] for e in bare)
    for e in with_status:
        assert e["error"] is None and e["response"]["status_code"] == 500
        assert set(e["response"]["body"]["error"]) == {"message", "type", "param", "code"}


def test_every_request_failing_leaves_no_output_file(tmp_path: Path) -> None:
    batch, output, errors = run_batch(tmp_path, "line_error=1", mixed_lines(5))
    assert batch.status == "completed" and batch.output_file_id is None
    assert output == [] and len(errors) == 5


def test_truncation_has_finish_reason_length_and_cut_content(tmp_path: Path) -> None:
    lines = mixed_lines(6)
    _, output, _ = run_batch(tmp_path, "truncate=1", lines)
    prompt_of = {x["custom_id"]: x["body"]["messages"][0]["content"] for x in lines}
    for line in output:
        choice = line["response"]["body"]["choices"][0]
        full = respond(prompt_of[line["custom_id"]], seed=0, sample=sample_key(line["custom_id"])).content
        assert choice["finish_reason"] == "length"
        assert full.startswith(choice["message"]["content"]) and len(choice["message"]["content"]) < len(full)


def test_a_small_max_tokens_truncates_without_any_fault(tmp_path: Path) -> None:
    _, output, _ = run_batch(tmp_path, "none", [request_line("a", prompts.force_judge_prompt(HISTORY), max_tokens=5)])
    body = output[0]["response"]["body"]
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 5


PARSERS = {
    prompts.LCA_CLASSIFY: judges.parse_lca_label,
    prompts.DCG_JUDGE: judges.parse_dcg_decision,
    prompts.EXTRACT_VERDICTS: lambda text: judges.parse_verdicts(text, len(CLAIMS)),
}


def test_malformed_judge_output_fails_the_parsers_and_spares_other_roles(tmp_path: Path) -> None:
    lines = mixed_lines(36)
    _, output, _ = run_batch(tmp_path, "malformed_judge=1", lines)
    prompt_of = {x["custom_id"]: x["body"]["messages"][0]["content"] for x in lines}
    judged = 0
    for line in output:
        choice = line["response"]["body"]["choices"][0]
        kind = identify_kind(prompt_of[line["custom_id"]])
        assert choice["finish_reason"] == "stop"
        if kind in PARSERS:
            judged += 1
            with pytest.raises(judges.MalformedOutput):
                PARSERS[kind](choice["message"]["content"])
        else:
            assert (
                judges.parse_text(choice["message"]["content"])
                == respond(prompt_of[line["custom_id"]], 0, sample=sample_key(line["custom_id"])).content
            )
    assert judged == 18


# --- per-batch faults ---------------------------------------------------------------------------


def test_expired_batch_keeps_finished_requests(tmp_path: Path) -> None:
    lines = mixed_lines(20)
    batch, output, errors = run_batch(tmp_path, "expire_batch=1", lines)
    assert batch.status == "expired" and batch.expired_at and batch.completed_at is None
    assert 0 < len(output) < 20 and len(output) + len(errors) == 20
    assert {e["error"]["code"] for e in errors} == {"batch_expired"}
    assert all(e["response"] is None for e in errors)
    assert all(line["response"]["status_code"] == 200 for line in output)
    assert batch.request_counts.completed == len(output)


def test_failed_batch_reports_token_limit(tmp_path: Path) -> None:
    batch, output, errors = run_batch(tmp_path, "fail_batch=1", mixed_lines(3))
    assert batch.status == "failed" and batch.failed_at
    assert output == errors == [] and batch.output_file_id is None and batch.error_file_id is None
    assert [e.code for e in batch.errors.data] == ["token_limit_exceeded"]


# --- determinism --------------------------------------------------------------------------------


def essence(lines: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each line without its timestamps: custom_id and the answer or error."""
    out = []
    for line in lines:
        body = (line["response"] or {}).get("body") or {}
        choice = (body.get("choices") or [{}])[0]
        what = json.dumps([line["error"], body.get("error"), choice.get("message"), choice.get("finish_reason")])
        out.append((line["custom_id"], what))
    return out


def failed_ids(errors: list[dict[str, Any]]) -> set[str]:
    return {e["custom_id"] for e in errors}


def test_faults_follow_custom_ids_and_content_not_attempts(tmp_path: Path) -> None:
    spec = "line_error=0.3,expire_batch=0.5,truncate=0.3,seed=5"
    lines = mixed_lines(30)
    first = run_batch(tmp_path, spec, lines, "a")
    # A fresh server (a killed client resubmitting the same file) sees the same world.
    second = run_batch(tmp_path, spec, lines, "b")
    assert first[0].status == second[0].status
    assert essence(first[1]) == essence(second[1]) and essence(first[2]) == essence(second[2])


def test_a_retry_under_a_new_custom_id_draws_again(tmp_path: Path) -> None:
    spec = "line_error=0.3,seed=5"
    _, _, errors = run_batch(tmp_path, spec, mixed_lines(30), "a")
    _, _, retried = run_batch(tmp_path, spec, mixed_lines(30, prefix="attempt2-"), "b")
    assert errors and retried
    assert {e["custom_id"].replace("attempt2-", "r") for e in retried} != failed_ids(errors)


# --- HTTP faults --------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["http_429", "http_500"])
def test_http_faults_are_retried_by_the_sdk(tmp_path: Path, fault: str) -> None:
    with SimulatedServer(tmp_path / "sim", faults=parse_faults(f"{fault}=0.4,seed=3,retry_after=0.01")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=30)
        batch = wait(client, submit(client, jsonl(mixed_lines(4))), interval=0.0)
        assert batch.status == "completed" and len(read_lines(client, batch.output_file_id)) == 4
        assert server.stats[fault] > 0 and server.stats["retried"] > 0
        assert server.stats["http_500" if fault == "http_429" else "http_429"] == 0


def test_429_carries_retry_after(tmp_path: Path) -> None:
    with SimulatedServer(tmp_path / "sim", faults=parse_faults("http_429=1")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(openai.RateLimitError) as err:
            client.batches.list()
    headers = err.value.response.headers
    assert headers["retry-after"] in ("0", "1") and int(headers["retry-after-ms"]) == 50
    assert err.value.response.headers["content-type"] == "application/json"
    assert json.loads(err.value.response.text)["error"]["code"] == "rate_limit_exceeded"


# --- faults added for the engine's fault suite (tests/scenarios/test_faults.py) ---------------------------


def test_parse_the_added_keys_and_route_filter() -> None:
    faults = parse_faults(
        "empty_content=0.1,line_400=0.2,stall_batch=0.3,http_slow=0.4,slow_seconds=1.5,"
        "http_429=0.1,http_routes=create_batch+file_content"
    )
    assert faults == Faults(
        empty_content=0.1,
        line_400=0.2,
        stall_batch=0.3,
        http_slow=0.4,
        slow_seconds=1.5,
        http_429=0.1,
        http_routes="create_batch+file_content",
    )
    assert parse_faults(faults.describe()) == faults
    assert faults.applies_to("create_batch") and not faults.applies_to("retrieve_batch")
    assert Faults().applies_to("retrieve_batch")  # no filter: every route
    with pytest.raises(ValueError, match="http_routes.*known routes") as err:
        parse_faults("http_routes=create_batch+batches.create")
    assert isinstance(err.value, LexpilotError)
    with pytest.raises(ValueError, match="slow_seconds"):
        parse_faults("slow_seconds=-1")


def test_the_route_names_are_the_registered_routes_with_their_public_spellings() -> None:
    from lexpilot_batch.simulated.apis import APIS, ROUTES
    from lexpilot_batch.simulated.faults import route_names

    # Users and tests name these in `http_routes=`: their spellings never change.
    public = {"create_batch", "file_content", "chat_completion", "anthropic_message", "gemini_generate"}
    creates = {
        "create_batch",
        "anthropic_create",
        "bedrock_create",
        "gemini_create",
        "mistral_create",
        "openrouter_create",
        "together_create",
        "fireworks_create",
        "vertex_create",
        "xai_create",
    }
    assert public | creates <= set(route_names())
    assert {route.name for _, route in ROUTES if route.creates} == creates
    assert route_names()[0] == "upload_file" and len(route_names()) == len(set(route_names()))
    # A native API's routes are named after it (`gemini_create`), as its faults are aimed.
    for api in APIS:
        if api.name != "openai":
            assert all(r.name.startswith(api.name + "_") or r.name == "chat_completion" for r in api.routes), api.name


def test_empty_content_answers_200_with_empty_or_null_content(tmp_path: Path) -> None:
    batch, output, errors = run_batch(tmp_path, "empty_content=1", mixed_lines(12))
    assert batch.status == "completed" and errors == [] and len(output) == 12
    contents = [line["response"]["body"]["choices"][0]["message"]["content"] for line in output]
    assert all(line["response"]["body"]["choices"][0]["finish_reason"] == "stop" for line in output)
    assert set(contents) == {"", None}
    assert not any("reasoning_content" in line["response"]["body"]["choices"][0]["message"] for line in output)


def test_line_400_lands_in_the_error_file_with_its_body(tmp_path: Path) -> None:
    batch, output, errors = run_batch(tmp_path, "line_400=0.5,seed=2", mixed_lines(20))
    assert batch.status == "completed" and 0 < len(errors) < 20 and len(output) + len(errors) == 20
    for e in errors:
        assert e["error"] is None and e["response"]["status_code"] == 400
        assert e["response"]["body"]["error"]["type"] == "invalid_request_error"
    # Drawn per custom_id on its own dice: it does not move the other faults' draws.
    _, _, with_other = run_batch(tmp_path, "line_400=0.5,line_error=0.2,seed=2", mixed_lines(20), "b")
    assert {e["custom_id"] for e in errors} <= {e["custom_id"] for e in with_other}


def test_a_stalled_batch_stays_in_progress_and_a_cancel_keeps_what_it_finished(tmp_path: Path) -> None:
    with SimulatedServer(tmp_path / "sim", faults=parse_faults("stall_batch=1")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        batch_id = submit(client, jsonl(mixed_lines(10)))
        stalled = client.batches.retrieve(batch_id)
        assert stalled.request_counts is not None
        assert stalled.status == "in_progress" and 3 <= stalled.request_counts.completed <= 7
        assert client.batches.retrieve(batch_id).request_counts == stalled.request_counts  # no progress
        assert client.batches.cancel(batch_id).status == "cancelling"
        batch = wait(client, batch_id)
        output, errors = read_lines(client, batch.output_file_id), read_lines(client, batch.error_file_id)
    assert batch.status == "cancelled"
    assert len(output) == stalled.request_counts.completed and len(output) + len(errors) == 10
    assert {e["error"]["code"] for e in errors} == {"batch_cancelled"}


def test_http_faults_can_be_confined_to_routes_and_are_counted_per_route(tmp_path: Path) -> None:
    spec = "http_429=0.3,http_500=0.3,retry_after=0.01,http_routes=file_content+retrieve_batch,seed=4"
    with SimulatedServer(tmp_path / "sim", faults=parse_faults(spec)) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=30)
        for _ in range(3):
            batch = wait(client, submit(client, jsonl(mixed_lines(3))), interval=0.0)
            assert len(read_lines(client, batch.output_file_id)) == 3
        stats = server.stats
    assert stats["calls:upload_file"] == stats["calls:create_batch"] == 3  # never faulted
    faulted = {key.split(":")[1] for key in stats if key.startswith(("http_429:", "http_500:"))}
    assert faulted == {"file_content", "retrieve_batch"}
    assert stats["http_429"] + stats["http_500"] == sum(
        stats[f"{f}:{r}"] for f in ("http_429", "http_500") for r in ("file_content", "retrieve_batch")
    )
    assert stats["retried"] == stats["retried:file_content"] + stats["retried:retrieve_batch"] > 0


def test_a_slow_answer_times_the_client_out_after_the_route_ran(tmp_path: Path) -> None:
    spec = "http_slow=1,slow_seconds=0.5,http_routes=create_batch"
    with SimulatedServer(tmp_path / "sim", faults=parse_faults(spec)) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=0.2)
        file = client.files.create(file=("input.jsonl", jsonl(mixed_lines(2))), purpose="batch")  # not slowed
        with pytest.raises(openai.APITimeoutError):
            client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
        # The provider did the work although the client gave up: the batch exists.
        assert len(client.batches.list().data) == 1
        assert server.stats["http_slow:create_batch"] == 1 and server.stats["http_slow"] == 1


def flex_refusals(tmp_path: Path, seed: int, calls: int = 24) -> list[bool]:
    """Which of `calls` serial flex calls the server refused (`flex_429=0.5`)."""
    refused = []
    with SimulatedServer(tmp_path / f"sim{seed}", faults=parse_faults(f"flex_429=0.5,seed={seed}")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        for i in range(calls):
            try:
                client.chat.completions.create(
                    model="sim-eval",
                    messages=[{"role": "user", "content": prompts.lexawn_prompt(HISTORY) + f"（{i}）"}],
                    service_tier="flex",
                )
                refused.append(False)
            except openai.RateLimitError:
                refused.append(True)
    return refused


def test_per_call_faults_follow_the_seed_and_leave_the_random_module_alone(tmp_path: Path) -> None:
    # Hypothesis (and any seeded caller in the same process) owns the `random` module's state: a
    # server thread drawing from it would change what a test generates. Its draws are its own.
    import random

    random.seed(12345)
    state = random.getstate()
    first = flex_refusals(tmp_path / "a", seed=7)
    with SimulatedServer(tmp_path / "b", faults=parse_faults("seed=7")) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        wait(client, submit(client, jsonl(mixed_lines(3))), interval=0.0)
    assert random.getstate() == state
    assert first == flex_refusals(tmp_path / "c", seed=7)  # a seed's refusals, call for call
    assert True in first and False in first
    assert flex_refusals(tmp_path / "d", seed=8) != first


# --- damaged downloads (issue 44: a download is checked before it is believed) --------------------------


def test_parse_damaged_downloads() -> None:
    from lexpilot_batch.simulated.faults import DAMAGES

    faults = parse_faults("damaged_download=0.5,damage=html+missing_line,damaged_times=2")
    assert faults == Faults(damaged_download=0.5, damage="html+missing_line", damaged_times=2)
    assert parse_faults(faults.describe()) == faults
    assert DAMAGES == ("empty", "html", "text", "truncated", "missing_line")
    with pytest.raises(ValueError, match="damage='gzip'.*known kinds: empty, html"):
        parse_faults("damage=gzip")
    with pytest.raises(ValueError, match="damaged_times"):
        parse_faults("damaged_times=-1")


@pytest.mark.parametrize("kind", ["empty", "html", "text", "truncated", "missing_line"])
def test_a_damaged_download_answers_200_with_a_body_whole_as_far_as_http_can_tell(tmp_path: Path, kind: str) -> None:
    spec = f"damaged_download=1,damage={kind},damaged_times=1"
    with SimulatedServer(tmp_path / "sim", faults=parse_faults(spec)) as server:
        client = OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        batch = wait(client, submit(client, jsonl(mixed_lines(6))), interval=0.0)
        damaged = client.files.content(batch.output_file_id)  # 200: no error, no broken connection
        whole = client.files.content(batch.output_file_id)  # damaged once (`damaged_times=1`)
        stats = server.stats
    assert damaged.response.status_code == whole.response.status_code == 200
    body, good = damaged.read(), whole.read()
    lines = good.splitlines(keepends=True)
    assert len(lines) == 6 and body != good
    expected = {
        "empty": lambda: body == b"",
        "html": lambda: body.startswith(b"<!DOCTYPE html>") and "text/html" in damaged.response.headers["content-type"],
        "text": lambda: not body.startswith(b"{") and b"\n" not in body,
        "truncated": lambda: good.startswith(body) and not body.endswith(b"\n") and body.count(b"\n") == 5,
        "missing_line": lambda: body == b"".join(lines[:3] + lines[4:]),
    }
    assert expected[kind](), body[-200:]
    assert stats["damaged_download"] == stats[f"damaged_download:{kind}:file_content"] == 1
