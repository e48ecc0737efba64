"""The providers' own documented examples, read by the product's readers (issue 45).

`tests/providers/documented/<provider>.json` holds, per provider, the example payloads its official
documentation and SDK sources publish (a batch object as create, retrieve, cancel and list answer
it, an output line, a chat completion with its usage, a file object, a job, the batch states),
each with where it was taken from (a URL, or a repository, path and commit) and when, copied as
published (a published trailing comma removed is said in its `note`), and what the product must
read in it (`expect`). What a provider does not publish is listed under `unpublished`. Where two
official sources disagree (Zhipu's integer `request_counts` beside OpenAI's nested object, its
guide's `/v4/...` and its SDK's `/v1/...`; Azure's reference and how-to), both are kept and both
must be read. Each example is parsed as the product receives it: through the official SDK's
response types where the product reads SDK objects, as raw JSON where it reads raw lines.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lexpilot_batch.engine.answers import judge_line
from lexpilot_batch.providers.batch import TERMINAL
from lexpilot_batch.providers.registry import PROVIDERS

FIXTURES = Path(__file__).parent / "documented"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


EXAMPLES = [
    pytest.param(doc["provider"], doc["api"], example, id=f"{doc['provider']}:{i}:{example['kind']}")
    for path in sorted(FIXTURES.glob("*.json"))
    for doc in [json.loads(path.read_text(encoding="utf-8"))]
    for i, example in enumerate(doc["examples"])
]


def test_every_fixture_file_names_its_sources_and_each_example_where_and_when() -> None:
    files = sorted(FIXTURES.glob("*.json"))
    # Every named platform has its file; a generic OpenAI-compatible service (`openai-api/...`) publishes nothing.
    assert {p.stem for p in files} >= {name for name, spec in PROVIDERS.items() if not spec.generic}
    for path in files:
        doc = json.loads(path.read_text(encoding="utf-8"))
        # A provider that publishes no example of a shape says so (`unpublished`), rather than invent one.
        assert doc["provider"] == path.stem and doc["sources"] and (doc["examples"] or doc["unpublished"]), path.name
        assert all(isinstance(v, str) and v for v in doc["sources"].values()), path.name
        for example in doc["examples"]:
            assert example["source"] and _DATE.fullmatch(example["taken"]), (path.name, example["name"])


def _openai_batch(payload: dict[str, Any]) -> Any:
    """A Batch object as the `openai` SDK hands it to the product (its response parsing: loose,
    a field of another shape kept as sent)."""
    from openai._models import construct_type
    from openai.types import Batch

    return construct_type(type_=Batch, value=payload)


def _check_info(info: Any, expect: dict[str, Any]) -> None:
    for key, value in expect.items():
        if key == "terminal":
            assert (info.status in TERMINAL) is value
        elif key == "request_counts":
            assert info.request_counts == value
        else:
            assert getattr(info, key) == value, key


def _check_line(line: dict[str, Any], expect: dict[str, Any]) -> None:
    """A result line as OpenAI's, judged as ingest judges it (`engine.answers.judge_line`)."""
    ok, text, _, error, kind, usage = judge_line(line, "text", 0)
    assert ok is expect["ok"], error
    if "text" in expect:
        assert text == expect["text"]
    if "kind" in expect:
        assert kind == expect["kind"]
    if "usage" in expect:
        assert list(usage[:4]) == expect["usage"]


def _read_openai(kind: str, payload: Any, expect: dict[str, Any], provider: str = "openai") -> None:
    from lexpilot_batch.providers.openai.batch import info

    if kind == "batch":
        _check_info(info(_openai_batch(payload)), expect)
    elif kind == "batch_list":
        read = [info(_openai_batch(item)) for item in payload["data"]]
        assert [i.id for i in read] == expect["ids"] and [i.status for i in read] == expect["statuses"]
    elif kind == "file":
        from openai._models import construct_type
        from openai.types import FileObject

        file: Any = construct_type(type_=FileObject, value=payload)
        found = {"id": file.id, "name": file.filename, "bytes": file.bytes, "created_at": file.created_at}
        assert found == expect
    elif kind == "result_line":
        _check_line(payload, expect)
    elif kind == "input_lines":
        # A platform's documented input lines, held to the product's contract for that platform.
        from lexpilot_batch.providers.bodies.contract import line_problems

        for line in payload:
            assert not line_problems("openai", line, model=line["body"]["model"], prefix=provider), line
    elif kind == "chat_completion":
        from lexpilot_batch.providers.openai.chat import OpenAIChat
        from lexpilot_batch.providers.routing.endpoints import Endpoint
        from lexpilot_batch.providers.sync.call import Answer

        call = OpenAIChat(Endpoint("eval", "http://127.0.0.1:9/v1", "KEY", "sk-x"), 1.0, 0)
        raw = json.dumps(payload).encode("utf-8")
        _check_line(call.answer_line("request-1", Answer(200, raw), payload), expect)
    else:
        raise AssertionError(f"no reader for an OpenAI {kind}")


def _read_anthropic(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    anthropic = pytest.importorskip("anthropic")
    from lexpilot_batch.providers.anthropic import results
    from lexpilot_batch.providers.anthropic.batch import _info

    if kind == "batch":
        _check_info(_info(anthropic.types.messages.MessageBatch.model_validate(payload)), expect)
    elif kind == "result_line":
        _check_line(results.result(payload, "00000000"), expect)
    else:
        raise AssertionError(f"no reader for an Anthropic {kind}")


def _read_google(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    pytest.importorskip("google.genai")
    from lexpilot_batch.providers.google.batch import _state
    from lexpilot_batch.providers.google.contract import problems

    if kind == "state":
        # The REST state as google-genai hands it over (its own JobState name; an unknown one as sent).
        assert _state(SimpleNamespace(state=payload["sdk"])) == expect["status"]
    elif kind == "responses_line":
        from lexpilot_batch.providers.google import results

        _check_line(results.result(payload), expect)
    elif kind == "inline_responses":
        # The REST answer's inlined responses through google-genai's own converter and type, then
        # written out as a responses file (`google.batch.inlined_lines`) and read line by line.
        from google.genai import batches, types

        from lexpilot_batch.providers.google import results
        from lexpilot_batch.providers.google.batch import inlined_lines

        dest = types.BatchJobDestination._from_response(
            response=batches._BatchJobDestination_from_mldev(payload), kwargs={}
        )
        lines = inlined_lines(SimpleNamespace(dest=dest)).decode("utf-8").splitlines()
        assert len(lines) == expect["lines"]
        for line in lines:
            ok, *_ = judge_line(results.result(json.loads(line)), "text", 0)
            assert ok is expect["ok"]
    elif kind == "inline_requests":
        model = payload["model"].removeprefix("models/")
        assert all(not problems(request, model) for request in payload["src"])
    else:
        raise AssertionError(f"no reader for a Gemini {kind}")


def _read_mistral(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    from lexpilot_batch.providers.mistral import results
    from lexpilot_batch.providers.mistral.contract import problems

    if kind == "result_line":
        _check_line(results.result(payload), expect)
    elif kind in ("input_lines", "job_create"):
        lines = payload if kind == "input_lines" else payload["requests"]
        model = "mistral-small-latest" if kind == "input_lines" else payload["model"]
        assert all(not problems(model, {"model": model, **line["body"]}) for line in lines)
    else:
        raise AssertionError(f"no reader for a Mistral {kind}")


def _read_together(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    from lexpilot_batch.providers.together.batch import info

    assert kind == "batch", kind
    _check_info(info(payload), expect)


def _read_openrouter(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    import openai

    from lexpilot_batch.engine.answers import _usage
    from lexpilot_batch.providers.openrouter import batch, errors
    from lexpilot_batch.providers.sync.call import http

    if kind == "batch":
        _check_info(batch.info(payload), expect)
    elif kind == "submit":  # the create body as the backend writes it, up to its requests
        assert json.loads(batch._head(payload["endpoint"], payload["model"]) + b"]}") == payload
    elif kind == "list":
        assert [batch.info(b).id for b in payload["data"]] == expect.get("ids", [])
    elif kind == "usage":
        assert list(_usage(payload)) == expect["usage"]
    elif kind == "error":
        request = http.Request("POST", "https://openrouter.ai/api/v1/batches")
        response = http.Response(expect["status"], json=payload, request=request)
        failure = errors.failure_of(openai.APIStatusError("refused", response=response, body=payload["error"]))
        assert failure is not None and (failure.status, failure.message) == (expect["status"], expect["message"])
    else:
        raise AssertionError(f"no reader for an OpenRouter {kind}")


def _read_vertex(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    pytest.importorskip("google.genai")
    from lexpilot_batch.providers.vertex import batch, results
    from lexpilot_batch.providers.vertex.ids import LABEL

    if kind == "input_line":  # the line uploaded for the same request is the documented shape, our id in its labels
        ours = batch.vertex_lines(json.dumps({"key": "k-1", **payload}).encode("utf-8"))
        labelled = {"request": {**payload["request"], "labels": {LABEL: "k-1"}}}
        assert [json.loads(x) for x in ours.splitlines()] == [labelled]
    elif kind == "result_line":
        _check_line(results.result(payload), expect)
    elif kind == "states":
        assert {s: batch._state(SimpleNamespace(state=s)) for s in payload} == expect
    elif kind == "job":  # the REST answer through google-genai's own converter and type, as `batches.get` returns it
        from google.genai import batches, types

        job = types.BatchJob._from_response(response=batches._BatchJob_from_vertex(payload), kwargs={})
        _check_info(batch._info(job), expect)
    else:
        raise AssertionError(f"no reader for a Vertex {kind}")


def _read_vertex_anthropic(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    from lexpilot_batch.providers.vertex_anthropic import contract, lines

    if kind == "input_line":  # our line has its shape and version, and the contract takes the documented request
        ours = lines.empty(expect["model"], "", {"max_tokens": 50})
        assert (
            set(ours) == set(payload)
            and ours["request"]["anthropic_version"] == payload["request"]["anthropic_version"]
        )
        assert contract.problems(expect["model"], payload["request"]) == []
    elif kind == "model_ids":  # each Vertex AI id is read as the Anthropic model it names
        assert {m: contract.claude_name(m) for m in payload.values()} == expect["anthropic"]
    else:
        raise AssertionError(f"no reader for a Claude-on-Vertex {kind}")


def _read_fireworks(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    from lexpilot_batch.providers.bodies.contract import line_problems
    from lexpilot_batch.providers.fireworks.batch import STATES, info

    if kind == "batch":
        _check_info(info(payload), expect)
    elif kind == "states":  # every state the SDK can hand over has its own reading, none by default
        assert {state: STATES[state] for state in payload} == expect
    elif kind == "input_lines":
        for line in payload:
            assert not line_problems("fireworks", line, model=expect["model"], prefix="fireworks"), line
    else:
        raise AssertionError(f"no reader for a Fireworks {kind}")


def _read_bedrock(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    from lexpilot_batch.providers.bedrock import batch, contract, lines, results
    from lexpilot_batch.simulated.sources import service_model

    if kind == "input_line":  # our line has its shape, and its body is one the contract takes
        ours = lines.empty(expect["model"], "", {"max_tokens": 1024})
        assert (
            set(ours) == set(payload)
            and ours["modelInput"]["anthropic_version"] == payload["modelInput"]["anthropic_version"]
        )
        assert contract.problems(expect["model"], payload["modelInput"]) == []
    elif kind == "create":  # botocore's own model takes it, and our create sends the same members and more
        pytest.importorskip("botocore")
        assert service_model.input_problems("bedrock", "CreateModelInvocationJob", payload) == []
        assert batch.STATUSES and batch.job_name({"lexpilot_workspace": "w"}).startswith(batch.NAME_PREFIX)
    elif kind == "result_line":
        _check_line(results.result(payload, "00000000"), expect)
    elif kind == "statuses":
        assert set(batch.STATUSES) == set(payload)
        assert {s for s in payload if batch.STATUSES[s] in TERMINAL} == set(expect["terminal"])
    else:
        raise AssertionError(f"no reader for a Bedrock {kind}")


def _read_xai(kind: str, payload: Any, expect: dict[str, Any]) -> None:
    from lexpilot_batch.providers.xai import batch, results

    if kind == "create":  # the create body the backend sends: a name, the workspace's tag
        assert set(payload) == {"name"} and batch.name_of({"lexpilot_workspace": "w"}).startswith("lexpilot ")
    elif kind == "add":  # the documented requests as workspace lines, sent as the documented add body
        lines = [
            {"custom_id": r["batch_request_id"], "body": r["batch_request"]["chat_get_completion"]}
            for r in payload["batch_requests"]
        ]
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "requests.jsonl"
            path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
            assert json.loads(batch._requests(path)) == payload
    elif kind == "batch":
        _check_info(batch.info(payload), expect)
    elif kind == "chat_completion":  # an answer as a batch result carries it
        wrapped = {"batch_request_id": "r-1", "batch_result": {"response": {"chat_get_completion": payload}}}
        _check_line(results.result(wrapped), expect)
    else:
        raise AssertionError(f"no reader for an xAI {kind}")


def _read_limits(provider: str, payload: Any, expect: dict[str, Any]) -> None:
    from lexpilot_batch.providers.registry import resolve_limits

    spec = PROVIDERS[provider]
    limits = resolve_limits(spec.profile, spec.url_example or "https://x.openai.azure.com/openai/v1")
    assert (limits.max_requests, limits.max_bytes) == (expect["max_requests"], expect["max_bytes"])
    assert limits.endpoint in payload["endpoints"]


READERS = {
    "openai": _read_openai,
    "anthropic": _read_anthropic,
    "google": _read_google,
    "mistral": _read_mistral,
    "openrouter": _read_openrouter,
    "fireworks": _read_fireworks,
    "bedrock": _read_bedrock,
    "vertex": _read_vertex,
    "vertex_anthropic": _read_vertex_anthropic,
    "xai": _read_xai,
}


@pytest.mark.parametrize(("provider", "api", "example"), EXAMPLES)
def test_each_documented_example_is_read_as_published(provider: str, api: str, example: dict[str, Any]) -> None:
    kind, payload, expect = example["kind"], example["payload"], example.get("expect") or {}
    if kind == "limits":
        _read_limits(provider, payload, expect)
    elif api == "together":
        _read_together(kind, payload, expect)
    elif api == "openai":
        _read_openai(kind, payload, expect, provider)
    else:
        READERS[api](kind, payload, expect)


def test_zhipus_integer_request_counts_end_in_a_batch_state_not_a_crash() -> None:
    """BigModel's REST reference shows `request_counts: 123` with `total`, `completed`, `failed`
    beside it; the `zhipuai` SDK types OpenAI's nested object. Both are read, and the batch's state
    is its status whichever shape its counts take."""
    from lexpilot_batch.providers.openai.batch import info

    flat, nested = _load("zhipu")["examples"][1]["payload"], _load("openai")["examples"][2]["payload"]
    read = info(_openai_batch(flat))
    assert (
        read.status == "completed"
        and read.terminal
        and read.request_counts
        == {
            "total": 123,
            "completed": 123,
            "failed": 123,
        }
    )
    assert info(_openai_batch(nested)).request_counts == {"total": 100, "completed": 95, "failed": 5}
