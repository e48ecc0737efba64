"""A key echoed into a batch's result files is replaced before they are saved (issue 44, item 4):
raw provider files are scanned for the configured secrets and key-shaped tokens on their way to
disk, the bytes otherwise untouched, and the replacement is recorded (`files.redacted`) and reported
(`doctor`: `secrets_replaced`).

A "gateway" in front of the simulated provider (its `_send`, patched) puts a field into every line
of every file's content it serves, and into every result of a page of them in JSON (OpenRouter's): a configured key of no known shape (`DEEPSEEK_API_KEY`, which
the run does not use: only knowing it finds it) and an `sk-` key nobody configured (only its shape
finds it). Downloads are read 7 bytes at a time (`file_batch.DOWNLOAD_CHUNK`), so each key
straddles a chunk boundary somewhere.

| scenario | guarantee checked |
| --- | --- |
| OpenAI's shape (`file_batch.save_streamed`) | records equal to the fault-free run; nothing asked twice, no anomaly; no fragment of 8 characters of either key in any file (`responses/` included), row or output; `files.redacted` counts every key echoed; `doctor` reports `secrets_replaced`; every saved line still the JSON it was, the echo read `[redacted …]` |
| each native API (Anthropic's streamed results, Gemini's SDK download through its scrubbing sink, Mistral's, OpenRouter's pages of results, Together's) | the same, against the in-process rehearsal |

Each fails on the code before `redaction.Scrubber`: the keys were saved whole under `responses/`.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.providers import file_batch
from lexpilot_batch.providers.registry import missing_sdk
from lexpilot_batch.simulated import server
from lexpilot_batch.state.compaction import read_saved, saved_files
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status import detail
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.faults import assert_same_as, retried, run_benchmark
from tests.helpers.native import (  # noqa: F401 - the autouse `quick` is a fixture
    SIMULATED_APIS,
    SimulatedApi,
    quick,
    rehearse,
    run_on_routes,
)

pytestmark = pytest.mark.usefixtures("no_fsync", "clean_env")

CONFIGURED = "Vq7ZxP9pLm2NwR4tY8bK3sD6fH1j"  # DEEPSEEK_API_KEY: no key's shape
SHAPED = "sk-proj-Cw8TqL2vN6xR9zK4mB7yP3dF"  # never configured: an `sk-` key's shape
KEYS = (CONFIGURED, SHAPED)
FRAGMENT = 8
ECHO = "gateway"


def fragments_in(data: bytes | str) -> list[str]:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return sorted({k[i : i + FRAGMENT] for k in KEYS for i in range(len(k) - FRAGMENT + 1)} & _windows(text))


def _windows(text: str) -> set[str]:
    return {text[i : i + FRAGMENT] for i in range(len(text) - FRAGMENT + 1)}


def leaking_files(root: Path) -> dict[str, list[str]]:
    """Every file under `root` (the database and its WAL too) holding a fragment of either key."""
    return {
        p.relative_to(root).as_posix(): hits
        for p in root.rglob("*")
        if p.is_file() and (hits := fragments_in(p.read_bytes()))
    }


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every file's content the simulated provider serves, each line with an `ECHO` field holding
    both keys, as a gateway echoing headers into a body would; counts the keys echoed."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", CONFIGURED)
    monkeypatch.setattr(file_batch, "DOWNLOAD_CHUNK", 7)
    echoed: Counter = Counter()
    send = server._Handler._send

    def echoing(self: Any, status: int, data: bytes, content_type: str, *args: Any, **kwargs: Any) -> None:
        if status == 200 and content_type == "application/octet-stream" and data:
            lines = []
            for raw in data.splitlines():
                line = {ECHO: f"upstream saw x-api-key: {CONFIGURED}; forwarded {SHAPED}", **json.loads(raw)}
                lines.append(json.dumps(line, ensure_ascii=False) + "\n")
                echoed["keys"] += len(KEYS)
            data = "".join(lines).encode("utf-8")
        elif status == 200 and content_type == "application/json" and (results := _results(data)[1]):
            page = json.loads(data)
            page[_results(data)[0]] = [
                {ECHO: f"upstream saw x-api-key: {CONFIGURED}; forwarded {SHAPED}", **r} for r in results
            ]
            echoed["keys"] += len(KEYS) * len(results)
            data = json.dumps(page, ensure_ascii=False).encode("utf-8")
        send(self, status, data, content_type, *args, **kwargs)

    monkeypatch.setattr(server._Handler, "_send", echoing)
    return echoed


def _results(data: bytes) -> tuple[str, list[dict[str, Any]]]:
    """The member holding a page of results in JSON and its results (OpenRouter's `{"data":
    [BatchResult, ...]}`, xAI's `{"results": [...]}`), else none."""
    page = json.loads(data) if data else None
    for key, id_key in (("data", "custom_id"), ("results", "batch_request_id")):
        found = page.get(key) if isinstance(page, dict) else None
        if isinstance(found, list) and found and all(isinstance(r, dict) and id_key in r for r in found):
            return key, found
    return "", []


def saved_lines(root: Path) -> list[dict[str, Any]]:
    folder = root / "responses"
    return [
        json.loads(line)
        for path in saved_files(folder, "*.jsonl")
        if not path.name.startswith("ingested-")
        for line in read_saved(path).splitlines()
        if line.strip()
    ]


def check_replaced(root: Path, files: list[dict[str, Any]], echoed: Counter, outputs: list[str]) -> None:
    assert echoed["keys"] > 0  # the control: the gateway echoed them
    assert sum(f["redacted"] for f in files) == echoed["keys"], [(f["path"], f["redacted"]) for f in files]
    assert leaking_files(root) == {}
    for out in outputs:
        assert fragments_in(out) == [], out
    echoes = {line[ECHO] for line in saved_lines(root)}
    assert echoes == {"upstream saw x-api-key: [redacted DEEPSEEK_API_KEY]; forwarded [redacted]"}, echoes


def what_it_says(root: Path) -> tuple[list[doctor.Finding], list[str]]:
    with Workspace(root, writable=False) as ws:
        findings = doctor.diagnose(ws)
        shown = detail.render(detail.collect(ws))
    return findings, [shown, *(f"{f.detail} {f.fix}" for f in findings)]


def test_keys_a_gateway_echoes_into_result_files_are_replaced_before_they_are_saved(tmp_path, baseline, gateway):
    root = tmp_path / "ws"
    outcome = run_benchmark(root)
    assert_same_as(baseline, outcome)
    assert not retried(outcome) and not outcome.failed_requests() and not outcome.anomalies
    findings, outputs = what_it_says(root)
    [replaced] = [f for f in findings if f.kind == doctor.SECRETS_REPLACED]
    assert f"{gateway['keys']} key(s)" in replaced.detail and replaced.severity == "info"
    check_replaced(root, outcome.files, gateway, outputs)


@pytest.fixture(params=SIMULATED_APIS, ids=str)
def api(request: pytest.FixtureRequest) -> SimulatedApi:
    native: SimulatedApi = request.param
    problem = missing_sdk(native.name)
    if problem:
        pytest.skip(problem)
    return native


def test_each_native_api_saves_its_results_with_echoed_keys_replaced(tmp_path, monkeypatch, api, request):
    settings = Settings(user_model=api.model, judge_model=api.model)
    spec = RunSpec(("r1",), (api.model,), "dcg", settings, limit=2)
    fault_free = rehearse(tmp_path / "rehearsed", spec)  # before the gateway: the answers as they are
    echoed: Counter = request.getfixturevalue("gateway")
    echoing = run_on_routes(tmp_path / "ws", monkeypatch, spec)
    assert set(echoing["threads"]) == {"done"}
    assert echoing["records"] == fault_free["records"] and echoing["anomalies"] == 0
    assert {v[2] for v in echoing["requests"].values()} == {1}  # attempt 1 only: nothing asked twice
    findings, outputs = what_it_says(echoing["root"])
    assert doctor.SECRETS_REPLACED in {f.kind for f in findings}
    check_replaced(echoing["root"], echoing["files"], echoed, [echoing["status"], *outputs])
