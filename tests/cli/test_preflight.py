"""`lexpilot-batch preflight` (issue 45): each provider of a study asked, before its first wave, what
it lists and whether it answers one request per (role, model) with the study's own body, and with
`--batch` a one-request batch per endpoint. Tested offline against the simulated provider and
against a third-party OpenAI-compatible server, `llmock` (its own pytest plugin's server).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROLES = ["--user-model", "openai/gpt-4o-mini", "--judge-model", "anthropic/claude-sonnet-4-5"]


def _rows(text: str) -> dict[tuple[str, str], list[str]]:
    """The table's rows by (role, model): endpoint, catalogue, call, batch, cost."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("role ") and "catalogue" in line)
    out = {}
    for line in lines[head + 1 :]:
        cells = line.split()
        if len(cells) < 7 or cells[0] not in ("eval", "user", "judge"):
            break
        out[(cells[0], cells[1])] = cells[2:]
    return out


def test_preflight_against_the_simulated_provider_lists_calls_and_batches_keeping_nothing(
    in_process, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    models = ["--model", "sim-eval", "--model", "anthropic/claude-sonnet-4-5", "--model", "google/gemini-2.5-flash"]
    models += ["--model", "deepseek/deepseek-chat"]  # no Batch API: its requests go one by one
    code, out = in_process(["preflight", "--provider", "simulated", *models, "--batch"])
    text = out.decode("utf-8")
    assert code == 0, text
    assert text.startswith("Preflight: 6 request(s), one short question per role and model, and 3 one-request")
    assert "cents at most" in text.splitlines()[0]
    rows = _rows(text)
    assert rows[("eval", "sim-eval")][:4] == ["simulated", "listed", "ok", "completed"]
    assert rows[("eval", "anthropic/claude-sonnet-4-5")][:4] == ["simulated/anthropic", "listed", "ok", "completed"]
    assert rows[("eval", "google/gemini-2.5-flash")][:4] == ["simulated/google", "listed", "ok", "completed"]
    # The seed's defaults, rehearsed: answered on the OpenAI routes, which list only OpenAI's names.
    assert rows[("user", "DeepSeek-V4.1-Flash")][1:3] == ["NOT", "LISTED"]
    assert " ok no batch API " in " ".join(rows[("eval", "deepseek/deepseek-chat")])
    assert "6 request(s) sent; spent $" in text
    assert list(tmp_path.iterdir()) == []  # no workspace, no simulated state left behind


def test_a_request_the_provider_refuses_fails_the_preflight(in_process, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    faults = ["--sim-faults", "http_500=1,http_routes=chat_completion,retry_after=0.001"]
    code, out = in_process(["preflight", "--provider", "simulated", "--model", "sim-eval", *faults])
    text = out.decode("utf-8")
    assert code == 1, text
    assert "HTTP 500" in text and "A request was refused or failed" in text


def test_a_missing_key_is_named_before_anything_is_sent(in_process, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = in_process(["preflight", "--model", "openai/gpt-4o-mini", *ROLES])
    text = out.decode("utf-8")
    assert code == 1 and "OPENAI_API_KEY" in text and "ANTHROPIC_API_KEY" in text and "Nothing was sent" in text
    assert "Preflight:" not in text


def test_what_prepare_refuses_preflight_refuses_before_sending(in_process, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out = in_process(["preflight", "--provider", "simulated", "--model", "anthropic/claude-sonet-4-5"])
    text = out.decode("utf-8")
    assert code == 1 and "did you mean claude-sonnet-4-5" in text and "--allow-model" in text
    assert "Preflight:" not in text


def test_preflight_against_llmock_a_third_party_openai_compatible_server(
    in_process, tmp_path: Path, monkeypatch, request: pytest.FixtureRequest
) -> None:
    """llmock serves OpenAI's `/v1/models` (its own list), chat completions, files and batches;
    a model it does not list is answered all the same (said, not refused), and an error it is told
    to give is a refused request, with its message."""
    pytest.importorskip("llmock", reason="llmock is not installed (test extra)")
    mock = request.getfixturevalue("llmock")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLMOCK_BASE_URL", mock.base_url("openai"))
    monkeypatch.setenv("LLMOCK_API_KEY", "llmock-secret-key-123")
    models = ["--model", "openai-api/llmock/gpt-4o-mini", "--user-model", "openai-api/llmock/gpt-4o-mini"]
    judge = ["--judge-model", "openai-api/llmock/my-judge"]
    code, out = in_process(["preflight", *models, *judge, "--batch", "--batch-wait", "60"])
    text = out.decode("utf-8")
    assert code == 0, text
    rows = _rows(text)
    assert rows[("eval", "openai-api/llmock/gpt-4o-mini")][1:4] == ["listed", "ok", "completed"]
    assert rows[("judge", "openai-api/llmock/my-judge")][1:4] == ["NOT", "LISTED", "ok"]
    assert "llmock-secret-key-123" not in text
    mock.fail(400, message="this model is not available", model="my-judge", times=None)
    code, out = in_process(["preflight", *models, *judge])
    text = out.decode("utf-8")
    assert code == 1, text
    assert "this model is not available" in text
    assert _rows(text)[("eval", "openai-api/llmock/gpt-4o-mini")][2] == "ok"
    assert list(tmp_path.iterdir()) == []


def test_preflight_has_a_row_for_an_openrouter_model_with_its_one_request_batch(
    in_process, tmp_path: Path, monkeypatch
) -> None:
    """OpenRouter (issue 50): its call and its one-request batch on the simulated provider's OpenRouter
    routes; its price from the bundled table. The simulated routes serve no model listing."""
    monkeypatch.chdir(tmp_path)
    model = "openrouter/meta-llama/llama-3.3-70b-instruct"
    code, out = in_process(["preflight", "--provider", "simulated", "--model", model, "--batch"])
    text = out.decode("utf-8")
    assert code == 0, text
    row = _rows(text)[("eval", model)]
    assert row[0] == "simulated/openrouter" and row[-3:-1] == ["ok", "completed"] and row[-1] != "-"
    assert list(tmp_path.iterdir()) == []


def test_preflight_has_a_row_for_a_fireworks_model_with_its_one_request_batch(
    in_process, tmp_path: Path, monkeypatch
) -> None:
    """Fireworks (issue 50): its call (the model named by the call, its line names none) and its
    one-request job (a dataset uploaded, a job, its results file) on the simulated provider's
    Fireworks routes; its price from the bundled table."""
    monkeypatch.chdir(tmp_path)
    model = "fireworks/accounts/fireworks/models/qwen3-235b-a22b"
    code, out = in_process(["preflight", "--provider", "simulated", "--model", model, "--batch"])
    text = out.decode("utf-8")
    assert code == 0, text
    row = _rows(text)[("eval", model)]
    assert row[0] == "simulated/fireworks" and row[-3:-1] == ["ok", "completed"] and row[-1] != "-"


def test_preflight_has_a_row_for_an_xai_model_with_its_one_request_batch(
    in_process, tmp_path: Path, monkeypatch
) -> None:
    """xAI (issue 50): its call and its one-request batch (created, its request added, its results
    paged) on the simulated provider's xAI routes; its price from the bundled table."""
    monkeypatch.chdir(tmp_path)
    model = "xai/grok-4-1-fast-reasoning"
    code, out = in_process(["preflight", "--provider", "simulated", "--model", model, "--batch"])
    text = out.decode("utf-8")
    assert code == 0, text
    row = _rows(text)[("eval", model)]
    assert row[0] == "simulated/xai" and row[-3:-1] == ["ok", "completed"] and row[-1] != "-"


def test_preflight_has_a_row_for_a_bedrock_model_whose_job_minimum_it_cannot_meet(
    in_process, tmp_path: Path, monkeypatch
) -> None:
    """AWS Bedrock (issue 50): its call is InvokeModel on the simulated Bedrock routes, through boto3;
    a job takes 100 records at least, so no one-request job is tried, and that is no failure."""
    pytest.importorskip("boto3")
    monkeypatch.chdir(tmp_path)
    model = "bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"
    code, out = in_process(["preflight", "--provider", "simulated", "--model", model, "--batch"])
    text = out.decode("utf-8")
    assert code == 0, text
    line = next(x for x in text.splitlines() if x.startswith("eval ") and model in x)
    assert line.split()[2:5] == ["simulated/bedrock", "no", "listing"] and " ok " in line
    assert "not tried: one takes 100+ requests" in line and not line.rstrip().endswith(" -")
    assert list(tmp_path.iterdir()) == []


def test_preflight_has_a_row_for_a_vertex_model_with_its_one_request_batch(
    in_process, tmp_path: Path, monkeypatch
) -> None:
    """Vertex AI (issue 50): its publisher model listed, its generateContent call and its one-request
    batch prediction job (through the simulated Cloud Storage) on the simulated provider's Vertex
    routes; its price from the bundled table's `vertex/` row."""
    pytest.importorskip("google.genai")
    monkeypatch.chdir(tmp_path)
    model = "vertex/gemini-2.5-flash"
    code, out = in_process(["preflight", "--provider", "simulated", "--model", model, "--batch"])
    text = out.decode("utf-8")
    assert code == 0, text
    row = _rows(text)[("eval", model)]
    assert row[:4] == ["simulated/vertex", "listed", "ok", "completed"] and row[-1] != "-", row
    assert list(tmp_path.iterdir()) == []


def test_preflight_has_a_row_for_a_claude_on_vertex_model_with_its_one_request_batch(
    in_process, tmp_path: Path, monkeypatch
) -> None:
    """Claude on Vertex AI (issue 50): its rawPredict call through the `anthropic` SDK's
    AnthropicVertex and its one-request batch prediction job (google-genai, the simulated Cloud
    Storage) on the simulated Vertex routes; no listing (Vertex lists no Anthropic models to a
    project); its price from the bundled table's `vertex-anthropic/` row."""
    pytest.importorskip("google.genai")
    pytest.importorskip("anthropic")
    monkeypatch.chdir(tmp_path)
    model = "vertex-anthropic/claude-haiku-4-5@20251001"
    code, out = in_process(["preflight", "--provider", "simulated", "--model", model, "--batch"])
    text = out.decode("utf-8")
    assert code == 0, text
    line = next(x for x in text.splitlines() if x.startswith("eval ") and model in x)
    assert line.split()[2] == "simulated/vertex_anthropic" and "no listing" in line
    assert line.split()[-3:-1] == ["ok", "completed"] and not line.rstrip().endswith(" -"), line
    assert list(tmp_path.iterdir()) == []
