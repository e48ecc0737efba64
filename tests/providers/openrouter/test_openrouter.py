"""OpenRouter's Batch API (issue 50): the `openrouter/` folder held to OpenRouter's own documented
shapes (`tests/providers/documented/openrouter.json`: each example with its source and the date taken), the simulated routes
driven by OpenRouter's official Python SDK (`openrouter`, whose pydantic types parse what the
routes answer), and the backend's own refusals. What every native API goes through (a lost create,
groups sent at once, faults) is `tests/scenarios/test_native_apis.py`'s, OpenRouter among them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine import answers
from lexpilot_batch.errors import ProviderError
from lexpilot_batch.providers.batch import TERMINAL, BatchSource
from lexpilot_batch.providers.openrouter import batch, errors, lines, results
from lexpilot_batch.providers.openrouter.spec import API, DIALECT, LIMITS
from lexpilot_batch.providers.routing.endpoints import Endpoint
from lexpilot_batch.providers.sync.call import http
from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.simulated.apis.openrouter import PRICE
from lexpilot_batch.simulated.faults import DAMAGES
from lexpilot_batch.simulated.sources import typed
from lexpilot_batch.study.model_list import ModelOptions
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.native import SIMULATED_APIS, quick, reported_costs, run_on_routes  # noqa: F401 - the autouse `quick`

DOC = json.loads((Path(__file__).parents[1] / "documented" / "openrouter.json").read_text(encoding="utf-8"))
EXAMPLES = {e["name"]: e for e in DOC["examples"]}
MODEL = "meta-llama/llama-3.3-70b-instruct"


def test_every_example_says_where_and_when_it_was_taken() -> None:
    assert DOC["sources"] and DOC["examples"]
    for example in DOC["examples"]:
        assert example["source"].startswith("https://openrouter.ai/docs/"), example["name"]
        assert len(example["taken"]) == 10 and example["taken"].startswith("20"), example["name"]


@pytest.mark.parametrize("name", [n for n, e in EXAMPLES.items() if e["kind"] == "batch"])
def test_documented_batches_read_as_the_engine_needs_them(name: str) -> None:
    example = EXAMPLES[name]
    found = batch.info(example["payload"])
    for key, value in example["expect"].items():
        if key == "terminal":
            assert (found.status in TERMINAL) is value
        else:
            assert getattr(found, key) == value, key


def test_a_failed_batch_says_why_and_an_unknown_status_is_still_running() -> None:
    failed = batch.info({"id": "b1", "status": "failed", "error": {"message": "invalid model"}, "created_at": 5})
    assert failed.status == "failed" and failed.errors == [{"code": "batch_failed", "message": "invalid model"}]
    assert failed.output_file_id is None  # nothing to download
    assert batch.info({"id": "b2", "status": "queued_somewhere"}).status == "in_progress"  # an open enum


def test_the_documented_error_shape_is_read_with_its_message() -> None:
    example = EXAMPLES["ErrorResponse shape"]
    request = http.Request("POST", "https://openrouter.ai/api/v1/batches")
    response = http.Response(example["expect"]["status"], json=example["payload"], request=request)
    exc = openai.APIStatusError("refused", response=response, body=example["payload"]["error"])
    failure = errors.failure_of(exc)
    assert failure is not None and failure.status == 402 and failure.message == example["expect"]["message"]
    assert errors.error_message(example["payload"], "fallback") == "Insufficient credits"


def test_a_request_line_is_the_documented_request_and_its_body_a_chat_completion() -> None:
    line = lines.empty(MODEL, "/v1/chat/completions", {"max_tokens": 8})
    assert set(line) == {"custom_id", "body"}  # the SDKs' `Request`: custom_id, body
    assert line["body"]["model"] == MODEL and line["body"]["messages"][0]["role"] == "user"
    submit = EXAMPLES["BatchSubmitBody example"]["payload"]
    assert {"endpoint", "model", "requests"} == set(submit)  # the create body's required fields
    head = batch._head("/v1/chat/completions", MODEL) + b"]}"
    assert json.loads(head) == {"endpoint": "/v1/chat/completions", "model": MODEL, "requests": []}


def test_result_lines_read_as_openai_lines_thinking_apart_and_errors_with_a_code() -> None:
    body = {
        "id": "gen-1",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes.", "reasoning": "Think."}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12, "cost": 0.00001},
    }
    ok = {
        "id": "r1",
        "custom_id": "c1",
        "response": {"status_code": 200, "request_id": "r1", "body": body},
        "error": None,
    }
    message = results.result(ok)["response"]["body"]["choices"][0]["message"]
    assert message["content"] == "Yes." and message["reasoning_content"] == "Think." and "reasoning" not in message
    bad = {"id": "r2", "custom_id": "c2", "response": None, "error": {"message": "no", "param": None, "type": "x"}}
    assert results.result(bad)["error"] == {"code": "x", "message": "no"}


def test_a_file_beyond_the_documented_5000_requests_is_refused_before_sending(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text('{"custom_id":"x","body":{}}\n' * (LIMITS.max_requests + 1), encoding="utf-8")
    endpoint = Endpoint("eval", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", api_key="sk-test")
    backend = batch.OpenRouterBatchBackend(endpoint, LIMITS)
    with pytest.raises(ProviderError, match=r"5,001 requests .* exceed an OpenRouter batch \(5,000"):
        backend.upload(path)


# --- the official SDK against the simulated routes --------------------------------------------


@pytest.fixture
def sdk(tmp_path: Path) -> Any:
    openrouter = pytest.importorskip("openrouter")
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        yield openrouter.OpenRouter(api_key="sk-simulated", server_url=server.native_url("openrouter"))


def _requests(n: int) -> list[dict[str, Any]]:
    return [
        {"custom_id": f"q{i}", "body": {"model": MODEL, "messages": [{"role": "user", "content": f"Is {i} odd?"}]}}
        for i in range(n)
    ]


def test_the_official_sdk_creates_polls_and_lists_on_the_simulated_routes(sdk: Any) -> None:
    made = sdk.batch.create_batches(endpoint="/v1/chat/completions", model=MODEL, requests=_requests(3))
    # The 202's BatchObject, parsed by the SDK (validating, or further on: the simulated batch may
    # already have run).
    assert made.status in {"validating", "in_progress", "finalizing", "completed"} and made.request_counts.total == 3
    seen = sdk.batch.get_batches(id=made.id)
    for _ in range(200):
        if seen.status in TERMINAL:
            break
        seen = sdk.batch.get_batches(id=made.id)
    assert seen.status == "completed" and len(seen.results) == 3
    assert {r.custom_id for r in seen.results} == {"q0", "q1", "q2"}
    assert all(r.response is not None and r.response.status_code == 200 for r in seen.results)
    listed = sdk.batch.list(limit=10)
    assert [b.id for b in listed.result.data] == [made.id] and listed.result.has_more is False


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"metadata": {"a": "b"}}, "unexpected field(s) metadata"),
        ({"endpoint": "/v1/completions"}, "endpoint"),
        ({"requests": _requests(1) * 2}, "not unique"),
        ({"requests": [{"custom_id": "q", "method": "POST", "body": {}}]}, "{custom_id, body}"),
        ({"requests": _requests(5_001)}, "at most 5000"),
        ({"requests": [{**_requests(1)[0], "body": {**_requests(1)[0]["body"], "provider": {}}}]}, "body.provider"),
        ({"requests": [{**_requests(1)[0], "body": {**_requests(1)[0]["body"], "n": 1}}]}, "body.n: is not a field"),
    ],
)
def test_what_the_documentation_does_not_take_is_refused_in_openrouter_s_error_shape(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    body = {"endpoint": "/v1/chat/completions", "model": MODEL, "requests": _requests(1), **change}
    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        answer = http.post(
            server.native_url("openrouter") + "/batches", json=body, headers={"Authorization": "Bearer sk-simulated"}
        )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == 400 and said in error["message"]  # `{"error": {"code", "message", "metadata"}}`


# --- damaged answers -------------------------------------------------------------------------


def test_an_answer_that_is_no_batch_object_is_an_answer_lost_on_the_way() -> None:
    for answer in ("<html>502 Bad Gateway</html>", None, {"object": "batch"}):
        with pytest.raises(errors.Unreadable):
            batch.info(answer)
    failure = errors.failure_of(errors.Unreadable("no batch object"))
    assert failure is not None and failure.status is None  # a create uncertain, a poll tried again
    cut = json.JSONDecodeError("Expecting value", '{"id": "b', 9)  # the SDK's client parsing a cut answer
    assert (errors.failure_of(cut) or failure).status is None


def _saved(path: Path) -> tuple[int, int]:
    """A saved download's result lines and the lines that are none (an error page, JSON cut short)."""
    good = bad = 0
    for line in path.read_bytes().splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            bad += 1
            continue
        good += isinstance(value, dict) and "custom_id" in value
    return good, bad


@pytest.mark.parametrize("kind", DAMAGES)
def test_a_damaged_page_of_results_is_saved_as_it_came_for_the_check_and_the_next_fetch_is_whole(
    tmp_path: Path, kind: str
) -> None:
    """The first page of every batch's results damaged once (`damaged_download` on the results
    route): the download keeps what came, which `engine.downloads` finds short or unreadable, and
    the fetch after it has every result."""
    source = tmp_path / "batch.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in _requests(3)), encoding="utf-8")
    faults = parse_faults(f"damaged_download=1,damaged_times=1,damage={kind}")
    with SimulatedServer(tmp_path / "sim", faults) as server:
        endpoint = Endpoint("eval", server.native_url("openrouter"), "OPENROUTER_API_KEY", api_key="sk-simulated")
        backend = batch.OpenRouterBatchBackend(endpoint, LIMITS)
        made = backend.create(backend.upload(source), {}, None, BatchSource(source, MODEL))
        for _ in range(200):
            made = backend.retrieve(made.id)
            if made.terminal:
                break
        assert made.status == "completed" and made.output_file_id
        backend.download(made.output_file_id, tmp_path / "first.jsonl")
        backend.download(made.output_file_id, tmp_path / "again.jsonl")
        assert server.stats[f"damaged_download:{kind}"] == 1  # the control: the page came damaged
    good, bad = _saved(tmp_path / "first.jsonl")
    assert good < 3 or bad > 0, (good, bad)  # never taken for all of them
    assert _saved(tmp_path / "again.jsonl") == (3, 0)


# --- the model's underlying provider, pinned by a model argument -------------------------------

PIN = {"only": ["deepinfra"]}


@pytest.mark.parametrize(
    ("pin", "said"),
    [
        (PIN, None),
        ({"only": ["deepinfra", "together"]}, None),
        ({"order": ["deepinfra"]}, 'only {"only": [provider slugs]}'),  # chat routing a batch does not take
        ({"only": ["deepinfra"], "allow_fallbacks": False}, 'only {"only": [provider slugs]}'),
        ({"only": []}, "non-empty list"),
        ({"only": "deepinfra"}, "non-empty list"),
        ("deepinfra", 'only {"only": [provider slugs]}'),
    ],
)
def test_a_pinned_provider_is_checked_against_what_a_batch_takes(pin: Any, said: str | None) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 8, "provider": pin}
    found = API.contract(MODEL, body, False, None)
    if said is None:
        assert found == []  # OpenAI's contract for a compatible endpoint takes the extension
    else:
        assert [p.field.split(".")[0] for p in found] == ["provider"] and said in str(found[0])


def _file(tmp_path: Path, pins: list[Any]) -> Path:
    path = tmp_path / "batch.jsonl"
    lines = []
    for request, pin in zip(_requests(len(pins)), pins, strict=True):
        if pin is not None:
            request["body"]["provider"] = pin
        lines.append(json.dumps(request, ensure_ascii=False) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_the_pin_is_sent_once_as_the_batch_s_and_taken_out_of_each_request(tmp_path: Path) -> None:
    joined, pin = batch._requests(_file(tmp_path, [PIN, PIN]))
    body = json.loads(batch._head("/v1/chat/completions", MODEL, pin) + joined + b"]}")
    assert body["provider"] == PIN and len(body["requests"]) == 2
    assert all("provider" not in r["body"] and r["body"]["messages"] for r in body["requests"])
    assert batch._requests(_file(tmp_path, [None, None]))[1] is None
    assert "provider" not in json.loads(batch._head("/v1/chat/completions", MODEL) + b"]}")
    with pytest.raises(ProviderError, match="pin different providers"):
        batch._requests(_file(tmp_path, [PIN, None]))


def test_a_study_s_model_argument_pins_the_provider_its_batches_run_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--model-arg 'openrouter/…:provider={"only": ["deepinfra"]}'` from `prepare` to the create
    call: every batch of the study is created pinned, and the simulated provider, which refuses a
    request body's own `provider`, says it ran there."""
    [api] = [a for a in SIMULATED_APIS if a.name == "openrouter"]
    settings = Settings(user_model=api.model, judge_model=api.model)
    options = {api.model: ModelOptions({"provider": PIN})}
    spec = RunSpec(("r1",), (api.model,), "dcg", settings, limit=2, model_options=options)
    seen: dict[str, Any] = {}
    create = batch.OpenRouterBatchBackend._create

    def spying(self: Any, *args: Any) -> Any:
        made = create(self, *args)
        seen[made.id] = self.client.get(f"{batch.BATCHES}/{made.id}", cast_to=object)["provider"]
        return made

    monkeypatch.setattr(batch.OpenRouterBatchBackend, "_create", spying)
    done = run_on_routes(tmp_path / "ws", monkeypatch, spec)
    assert set(done["threads"]) == {"done"} and done["anomalies"] == 0
    assert seen and set(seen.values()) == {"deepinfra"}, seen


# --- per-request usage and cost ----------------------------------------------------------------


def test_the_documented_usage_is_read_with_its_cost() -> None:
    example = EXAMPLES["Usage Accounting response format"]
    assert list(answers._usage(example["payload"])) == example["expect"]["usage"]
    for cost in (True, -1, float("nan"), float("inf"), "0.95", None):
        assert answers._usage({"usage": {"prompt_tokens": 1, "cost": cost}})[5] is None, cost
    assert answers._usage({"usage": {"cost": 0}})[5] == 0.0  # a free model's


def test_each_answer_s_reported_cost_is_kept_and_summed_for_the_cost_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From the simulated answers' `usage.cost` (at its own price, `PRICE`) to the report's query:
    every answered request keeps its cost, and the sum is what the report prices its work at."""
    rows, counted = reported_costs(tmp_path / "ws", monkeypatch, "openrouter")
    for prompt, completion, cost in rows:
        assert cost == pytest.approx((prompt * PRICE[0] + completion * PRICE[1]) / 1e6 * 0.5)
    assert sum(c["reported"] for c in counted) >= len(rows) and not any(c["unreported"] for c in counted)
    assert sum(c["reported_cost_usd"] for c in counted) == pytest.approx(sum(r[2] for r in rows))


def test_the_product_s_body_is_an_openrouter_chat_request_without_openai_s_n() -> None:
    """The official SDK's `ChatRequestTypedDict` (1.3.84) has no `n`: the simulated routes, which
    check each request's body against it, caught the `max_tokens` dialect's `n: 1`."""
    sdk = pytest.importorskip("openrouter.components")
    fields = DIALECT.body(MODEL, 0.7, 8192, None, None)
    assert fields == {"temperature": 0.7, "max_tokens": 8192}
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], **fields, "provider": {"only": ["a"]}}
    assert typed.problems(body, sdk.ChatRequestTypedDict) == []
    assert typed.problems({**body, "n": 1}, sdk.ChatRequestTypedDict) == [("n", "is not a field of this request")]
