"""Each official SDK drives the standalone simulated provider end to end, as its own users call it:
upload, create, poll, results, cancel, with the SDK's own ids (`request-1`, `req_001`, a batch's
key-less inline requests) and its defaults (Ark's and Zhipu's SDKs send unset fields as null), and
the product's readers take what comes back. Before, the simulated routes refused what the SDKs send
unless lexpilot-batch had made it: a custom_id it had not mapped, a Message Batch of two Claude
models, Gemini's and Mistral's inline batches, every Ark request (`service_tier: null`). Each test
is skipped without its SDK (the `test` extra installs them all). Together's SDK also drives its
routes with the product's own lines in `tests/providers/together/test_lines.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from lexpilot_batch.engine.answers import judge_line
from lexpilot_batch.simulated import SimulatedServer, parse_faults

PROMPT = "请问合同纠纷如何处理？"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedServer]:
    """Batches end at once: created, then polled to their end."""
    with SimulatedServer(tmp_path_factory.mktemp("sim"), parse_faults("")) as running:
        yield running


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedServer]:
    """Batches stay in progress for ten minutes: each is cancelled while it runs."""
    with SimulatedServer(tmp_path_factory.mktemp("slow"), parse_faults("latency=600")) as running:
        yield running


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")


def _openai_lines(model: str, url: str = "/v1/chat/completions") -> bytes:
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}]}
    return _jsonl([{"custom_id": f"request-{i}", "method": "POST", "url": url, "body": body} for i in (1, 2)])


def _answered(line: dict[str, Any]) -> bool:
    """The product's reading of a result line (`engine.answers.judge_line`): a usable answer."""
    return judge_line(line, "text", 0)[0]


def _until(get: Any, done: Any, tries: int = 200) -> Any:
    for _ in range(tries):
        found = get()
        if done(found):
            return found
    raise AssertionError(f"never ended: {found}")


def test_the_openai_sdk(server: SimulatedServer, slow: SimulatedServer) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-any", max_retries=0)
    file = client.files.create(file=("batchinput.jsonl", _openai_lines("gpt-4o-mini")), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    batch = _until(lambda: client.batches.retrieve(batch.id), lambda b: b.status == "completed")
    assert batch.request_counts is not None and batch.request_counts.completed == 2 and batch.output_file_id
    lines = [json.loads(x) for x in client.files.content(batch.output_file_id).text.splitlines()]
    assert sorted(x["custom_id"] for x in lines) == ["request-1", "request-2"] and all(map(_answered, lines))
    assert batch.id in [b.id for b in client.batches.list()]
    with pytest.raises(openai.BadRequestError):
        client.batches.cancel(batch.id)  # it has ended
    running = openai.OpenAI(base_url=slow.base_url, api_key="sk-any", max_retries=0)
    file = running.files.create(file=("batchinput.jsonl", _openai_lines("gpt-4o-mini")), purpose="batch")
    batch = running.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert running.batches.cancel(batch.id).status == "cancelling"


def test_the_anthropic_sdk(server: SimulatedServer, slow: SimulatedServer) -> None:
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=server.root_url, api_key="sk-ant-any", max_retries=0)

    def params(model: str) -> dict[str, Any]:
        return {"model": model, "max_tokens": 1024, "messages": [{"role": "user", "content": PROMPT}]}

    requests = [
        {"custom_id": "req_001", "params": params("claude-sonnet-4-5")},
        {"custom_id": "req_002", "params": params("claude-haiku-4-5")},  # another model in the same batch
        {"custom_id": "my-custom-id-1", "params": params("claude-sonet-4-5")},  # a slip: not_found_error
    ]
    batch = client.messages.batches.create(requests=requests)
    batch = _until(lambda: client.messages.batches.retrieve(batch.id), lambda b: b.processing_status == "ended")
    assert (batch.request_counts.succeeded, batch.request_counts.errored) == (2, 1)
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert {k: r.type for k, r in results.items()} == {
        "req_001": "succeeded",
        "req_002": "succeeded",
        "my-custom-id-1": "errored",
    }
    models = {k: r.message.model for k, r in results.items() if r.type == "succeeded"}
    assert models == {"req_001": "claude-sonnet-4-5", "req_002": "claude-haiku-4-5"}
    missing = results["my-custom-id-1"]
    assert missing.type == "errored" and missing.error.error.type == "not_found_error"
    assert "claude-sonet-4-5" in missing.error.error.message and "claude-sonnet-4-5" in missing.error.error.message
    running = anthropic.Anthropic(base_url=slow.root_url, api_key="sk-ant-any", max_retries=0)
    batch = running.messages.batches.create(requests=requests[:1])
    assert running.messages.batches.cancel(batch.id).processing_status == "canceling"


def test_the_google_genai_sdk_from_a_file_and_inline(server: SimulatedServer, slow: SimulatedServer, tmp_path) -> None:
    genai = pytest.importorskip("google.genai")
    from lexpilot_batch.providers.google import results as google_results
    from lexpilot_batch.providers.google.batch import inlined_lines

    client = genai.Client(api_key="any", http_options={"base_url": server.root_url, "api_version": "v1beta"})
    request = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
    path = tmp_path / "requests.jsonl"
    path.write_bytes(_jsonl([{"key": f"request-{i}", "request": request} for i in (1, 2)]))
    uploaded = client.files.upload(file=str(path), config={"mime_type": "application/jsonl"})
    job = client.batches.create(model="gemini-2.5-flash", src=uploaded.name, config={"display_name": "mine"})
    job = _until(lambda: client.batches.get(name=job.name), lambda j: j.done)
    assert job.state.name == "JOB_STATE_SUCCEEDED" and job.dest.file_name
    lines = [json.loads(x) for x in client.files.download(file=job.dest.file_name).decode("utf-8").splitlines()]
    assert sorted(x["key"] for x in lines) == ["request-1", "request-2"]
    assert all(_answered(google_results.result(x)) for x in lines)
    # The batch guide's inline requests (`src=[...]`), the second with the metadata a key is read from.
    inline = client.batches.create(
        model="gemini-2.5-flash",
        src=[request, {**request, "metadata": {"key": "second"}}],
        config={"display_name": "inlined-requests-job-1"},
    )
    inline = _until(lambda: client.batches.get(name=inline.name), lambda j: j.done)
    answers = inline.dest.inlined_responses
    assert [a.metadata for a in answers] == [None, {"key": "second"}] and all(a.response.text for a in answers)
    read = [json.loads(x) for x in inlined_lines(inline).decode("utf-8").splitlines()]
    assert [x["key"] for x in read] == [None, "second"] and all(_answered(google_results.result(x)) for x in read)
    running = genai.Client(api_key="any", http_options={"base_url": slow.root_url, "api_version": "v1beta"})
    job = running.batches.create(model="gemini-2.5-flash", src=[request])
    running.batches.cancel(name=job.name)  # (Batch Mode has no cancelling state: running until it ends)
    assert running.batches.get(name=job.name).state.name in ("JOB_STATE_RUNNING", "JOB_STATE_CANCELLED")


def test_gemini_refuses_a_system_role_in_contents_and_a_slip_of_a_model(server: SimulatedServer) -> None:
    genai = pytest.importorskip("google.genai")
    from google.genai import errors

    client = genai.Client(api_key="any", http_options={"base_url": server.root_url, "api_version": "v1beta"})
    contents = [{"role": "system", "parts": [{"text": "你是律师"}]}, {"role": "user", "parts": [{"text": PROMPT}]}]
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model="gemini-2.5-flash", contents=contents)
    assert refused.value.code == 400 and "role" in str(refused.value)
    with pytest.raises(errors.ClientError) as missing:
        client.models.generate_content(model="gemini-2.5-flsh", contents=PROMPT)
    assert missing.value.code == 404 and "did you mean gemini-2.5-flash" in str(missing.value)


def test_the_mistral_sdk_from_files_and_inline(server: SimulatedServer, slow: SimulatedServer) -> None:
    mistral = pytest.importorskip("mistralai.client")
    client = mistral.Mistral(api_key="any", server_url=server.root_url)
    requests = [{"custom_id": "0", "body": {"max_tokens": 128, "messages": [{"role": "user", "content": PROMPT}]}}]
    uploaded = client.files.upload(file={"file_name": "batch.jsonl", "content": _jsonl(requests)}, purpose="batch")
    job = client.batch.jobs.create(
        input_files=[uploaded.id], model="mistral-small-latest", endpoint="/v1/chat/completions"
    )
    assert job.input_files == [uploaded.id]  # as created: before, every job came back with []
    job = _until(lambda: client.batch.jobs.get(job_id=job.id), lambda j: j.status == "SUCCESS")
    (line,) = [json.loads(x) for x in client.files.download(file_id=job.output_file).read().splitlines()]
    assert line["custom_id"] == "0" and _answered(line)
    # The batch guide's inline batch: its requests in the create, no input file.
    inline = client.batch.jobs.create(
        requests=requests, model="mistral-small-latest", endpoint="/v1/chat/completions", metadata={"job_type": "x"}
    )
    inline = _until(lambda: client.batch.jobs.get(job_id=inline.id), lambda j: j.status == "SUCCESS")
    assert inline.input_files == [] and inline.succeeded_requests == 1
    with pytest.raises(Exception, match="Invalid model: mistral-medum-latest .*did you mean mistral-medium-latest"):
        client.batch.jobs.create(requests=requests, model="mistral-medum-latest", endpoint="/v1/chat/completions")
    running = mistral.Mistral(api_key="any", server_url=slow.root_url)
    job = running.batch.jobs.create(requests=requests, model="mistral-small-latest", endpoint="/v1/chat/completions")
    assert running.batch.jobs.cancel(job_id=job.id).status in ("CANCELLATION_REQUESTED", "CANCELLED")


def test_the_groq_sdk(server: SimulatedServer, slow: SimulatedServer) -> None:
    groq = pytest.importorskip("groq")
    client = groq.Groq(base_url=server.root_url + "/groq", api_key="gsk-any", max_retries=0)
    file = client.files.create(file=("batch.jsonl", _openai_lines("llama-3.3-70b-versatile")), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    batch = _until(lambda: client.batches.retrieve(batch.id), lambda b: b.status == "completed")
    lines = [json.loads(x) for x in client.files.content(batch.output_file_id).text().splitlines()]
    assert sorted(x["custom_id"] for x in lines) == ["request-1", "request-2"] and all(map(_answered, lines))
    assert {file.id, batch.output_file_id} <= {f.id for f in client.files.list().data}  # the platform's path lists them
    running = groq.Groq(base_url=slow.root_url + "/groq", api_key="gsk-any", max_retries=0)
    file = running.files.create(file=("batch.jsonl", _openai_lines("llama-3.3-70b-versatile")), purpose="batch")
    batch = running.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert running.batches.cancel(batch.id).status == "cancelling"


@pytest.mark.parametrize("endpoint", ["/v4/chat/completions", "/v1/chat/completions"])
def test_the_zhipuai_sdk_with_its_defaults(server: SimulatedServer, slow: SimulatedServer, tmp_path, endpoint) -> None:
    """BigModel's batch guide names `/v4/chat/completions`, its SDK's `BatchCreateParams.endpoint`
    `/v1/chat/completions`: both are taken. Its `batches.create` sends `completion_window` null and
    `auto_delete_input_file` (the SDK's defaults). A model its pages do not list is refused in its
    error lines, in Zhipu's error shape."""
    zhipuai = pytest.importorskip("zhipuai")
    client = zhipuai.ZhipuAI(api_key="id.secret", base_url=server.profile_url("zhipu"))

    def run(model: str) -> Any:
        path = tmp_path / f"{model}.jsonl"
        path.write_bytes(_openai_lines(model, endpoint))
        with path.open("rb") as data:
            file = client.files.create(file=data, purpose="batch")
        batch = client.batches.create(input_file_id=file.id, endpoint=endpoint, auto_delete_input_file=True)
        return _until(lambda: client.batches.retrieve(batch.id), lambda b: b.status == "completed")

    batch = run("glm-4-plus")
    lines = [json.loads(x) for x in client.files.content(batch.output_file_id).content.splitlines()]
    assert sorted(x["custom_id"] for x in lines) == ["request-1", "request-2"] and all(map(_answered, lines))
    slip = run("glm-4-pluss")
    errors = [json.loads(x) for x in client.files.content(slip.error_file_id).content.splitlines()]
    assert sorted(x["custom_id"] for x in errors) == ["request-1", "request-2"]
    assert all(x["response"]["status_code"] == 404 and "did you mean glm-4-plus" in json.dumps(x) for x in errors)
    running = zhipuai.ZhipuAI(api_key="id.secret", base_url=slow.profile_url("zhipu"))
    with (tmp_path / "glm-4-plus.jsonl").open("rb") as data:
        file = running.files.create(file=data, purpose="batch")
    batch = running.batches.create(input_file_id=file.id, endpoint=endpoint)
    assert running.batches.cancel(batch.id).status == "cancelling"


def test_the_ark_sdk_sends_its_nulls_and_is_answered(server: SimulatedServer) -> None:
    """Ark's batch chat route (no files or batches: the simulated provider serves its chat route
    only, as lexpilot-batch uses it). The SDK sends every optional field, null when not given."""
    pytest.importorskip("volcenginesdkarkruntime")
    from volcenginesdkarkruntime import Ark

    client = Ark(base_url=server.profile_url("ark"), api_key="any")
    answer = client.batch_chat.completions.create(
        model="ep-bi-20250101000000-abcde", messages=[{"role": "user", "content": PROMPT}]
    )
    assert answer.choices[0].message.content and answer.usage is not None and answer.usage.completion_tokens > 0


@pytest.mark.parametrize("joined", ["gpt-4o-mini,gpt-4.1-mini", "gpt-4o-mini gpt-4.1-mini", "sim-eval,gpt-sim"])
def test_several_names_given_as_one_are_nobodys_model_on_every_route(server: SimulatedServer, joined: str) -> None:
    """`--model a,b` and a quoted `"a b"` (a PowerShell variable) compiled as one model, and the
    simulated provider answered it: every route now answers it as its API answers a model it does
    not serve (`prepare` refuses it first: `tests/study/test_runs.py`). A name holding a space
    whose parts are nobody's listed model is a compatible server's own, and answered."""
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.base_url, api_key="sk-any", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="several names were given as one"):
        client.chat.completions.create(model=joined, messages=[{"role": "user", "content": PROMPT}])
    answered = client.chat.completions.create(model="my served model", messages=[{"role": "user", "content": PROMPT}])
    assert answered.choices[0].message.content
    anthropic = pytest.importorskip("anthropic")
    claude = anthropic.Anthropic(base_url=server.root_url, api_key="sk-ant-any", max_retries=0)
    with pytest.raises(anthropic.NotFoundError, match="several names were given as one"):
        claude.messages.create(
            model="claude-sonnet-4-5,claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": PROMPT}]
        )


def test_the_together_sdk_with_its_own_ids(server: SimulatedServer, slow: SimulatedServer, tmp_path) -> None:
    """Together's batch guide (docs.together.ai/docs/batch-inference): lines `{"custom_id":
    "request-1", "body": {...}}`, uploaded with purpose `batch-api`, a job created, polled, its output
    downloaded; a running job cancelled. `tests/providers/together/test_lines.py` drives the same
    routes with the product's own lines."""
    together = pytest.importorskip("together")
    body = {"model": "deepseek-ai/DeepSeek-V3", "max_tokens": 200, "messages": [{"role": "user", "content": PROMPT}]}
    path = tmp_path / "batch_input.jsonl"
    path.write_bytes(_jsonl([{"custom_id": f"request-{i}", "body": body} for i in (1, 2)]))
    client = together.Together(base_url=server.root_url + "/together", api_key="sk-any", max_retries=0)
    uploaded = client.files.upload(file=path, purpose="batch-api", check=False)
    job = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions").job
    assert job is not None
    job = _until(lambda: client.batches.retrieve(job.id), lambda j: j.status == "COMPLETED")
    lines = [json.loads(x) for x in client.files.content(job.output_file_id).read().decode("utf-8").splitlines()]
    assert sorted(x["custom_id"] for x in lines) == ["request-1", "request-2"] and all(map(_answered, lines))
    running = together.Together(base_url=slow.root_url + "/together", api_key="sk-any", max_retries=0)
    path.write_bytes(_jsonl([{"custom_id": "request-3", "body": body}]))
    uploaded = running.files.upload(file=path, purpose="batch-api", check=False)
    job = running.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions").job
    assert job is not None
    # together-python's status word while a cancel is under way (`simulated.apis.together`)
    assert running.batches.cancel(job.id).status in ("CANCELING", "CANCELLED")
