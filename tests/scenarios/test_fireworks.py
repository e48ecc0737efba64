"""Fireworks AI's batch inference offline: a study whose every role is a `fireworks/` model, under
the names Fireworks gives its models (`accounts/fireworks/models/<id>`), compiled, uploaded as
datasets, run as batch inference jobs on the simulated Fireworks routes and downloaded from the
output datasets' signed URLs, ends with the records of the same study rehearsed in-process
(`--provider simulated`), also when creates lose their answers and downloads break off, with one
job per file; and the study run by the CLI ends in a report priced at Fireworks' batch prices.

Sources: https://docs.fireworks.ai/guides/batch-inference and the `fireworks-ai` SDK (1.2.30), as
`providers/fireworks/batch.py` cites them; the faults common to every native API are
`test_native_apis.py`'s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.state.compaction import read_saved
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.native import quick, rehearse, run_on_routes  # noqa: F401 - `quick` is an autouse fixture

EVAL = "fireworks/accounts/fireworks/models/qwen3-235b-a22b"
SETTINGS = Settings(
    user_model="fireworks/accounts/fireworks/models/deepseek-v4p1-flash",
    judge_model="fireworks/accounts/fireworks/models/glm-5p3",
)
SPEC = RunSpec(("r1",), (EVAL,), "dcg", SETTINGS, limit=1)  # `dcg`: every role


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return rehearse(tmp_path_factory.mktemp("rehearsed") / "ws", SPEC)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict:
    with pytest.MonkeyPatch.context() as env:
        from lexpilot_batch.util import clock

        env.setattr(clock, "pause", lambda seconds: None)
        env.delenv("FIREWORKS_ACCOUNT_ID", raising=False)
        return run_on_routes(tmp_path_factory.mktemp("clean") / "ws", env, SPEC)


def test_a_study_on_fireworks_gives_the_records_of_its_rehearsal(clean: dict, rehearsed: dict) -> None:
    assert set(clean["threads"]) == {"done"} and clean["records"] == rehearsed["records"]
    assert clean["requests"] == rehearsed["requests"]  # request for request, usage included
    assert clean["anomalies"] == 0 and clean["stopped"] == 0
    stats, files = clean["server"], clean["files"]
    assert {f["backend"] for f in files} == {"batch"} and len(files) >= 5
    # Each file: one dataset, one upload, one job; its results from the output dataset's signed URLs.
    for route in ("fireworks_create_dataset", "fireworks_upload", "fireworks_create"):
        assert stats[f"calls:{route}"] == len(files), route
    assert stats["calls:fireworks_signed_download"] == 2 * len(files)  # the results and the error file
    assert stats["calls:create_batch"] == 0 and stats["calls:chat_completion"] == 0
    assert len({f["batch_id"] for f in files}) == len(files) == clean["held"][None]


def test_its_lines_and_results_are_in_fireworks_documented_shape(clean: dict) -> None:
    for f in clean["files"]:
        sent = [json.loads(x) for x in read_saved(clean["root"] / f["path"]).decode("utf-8").splitlines()]
        # {custom_id, body}, the body without the model: the job names it
        assert all(list(x) == ["custom_id", "body"] and "model" not in x["body"] for x in sent)
        saved = read_saved(clean["root"] / f["output_path"]).decode("utf-8").splitlines()
        assert saved and all(sorted(json.loads(x)) == ["custom_id", "response"] for x in saved)


@pytest.mark.slow  # a study under faults with answers held back: about 10 s on a shared 2-core machine
def test_lost_creates_and_broken_downloads_end_with_the_fault_free_records_one_job_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean: dict
) -> None:
    """Creates committed after the client gave up (`late_create`), sent again once a short grace
    found nothing (the same tag names the same job: answered 409 and read back, or made once and
    the late one refused), and signed downloads broken off half-way: the records of the fault-free
    run, one job per file, no job set aside as a duplicate."""
    faults = "late_create=0.5,slow_seconds=0.45,cut_download=0.5,seed=3"
    out = run_on_routes(tmp_path / "ws", monkeypatch, SPEC, faults, retries=8, timeout=0.3, create_grace=0.1)
    assert set(out["threads"]) == {"done"} and out["records"] == clean["records"] and out["anomalies"] == 0
    stats = out["server"]
    assert stats["late_create:fireworks_create"] >= 1 and stats["cut_download:fireworks_signed_download"] >= 1
    assert stats["calls:fireworks_create"] > len(out["files"])  # creates were sent again
    assert len({f["batch_id"] for f in out["files"]}) == len(out["files"]) == out["held"][None]
    assert out["other_batches"] == []


def test_the_cli_runs_a_fireworks_study_to_a_report_at_its_batch_prices(in_process, tmp_path: Path) -> None:
    root = str(tmp_path / "ws")
    models = ["--model", EVAL, "--user-model", SETTINGS.user_model, "--judge-model", SETTINGS.judge_model]
    code, out = in_process(
        ["run", "--stage", "dcg", "--provider", "simulated", "--run-id", "r1", "--limit", "1", *models, "--root", root]
    )
    assert code == 0, out.decode("utf-8")
    code, out = in_process(["report", "--format", "json", "--root", root])
    text = out.decode("utf-8")
    assert code == 0, text
    (group,) = json.loads(text[text.index("{") :])["groups"]
    assert (group["model"], group["judge_model"]) == (EVAL, SETTINGS.judge_model)
    code, out = in_process(["status", "--format", "json", "--root", root])
    status = json.loads(out.decode("utf-8"))
    usage, models = status["usage"], status["summary"]["models"]
    # priced from the bundled table at half the serverless price (Fireworks' batch price)
    eval_cost = (usage["eval"]["prompt_tokens"] * 0.22 + usage["eval"]["completion_tokens"] * 0.88) / 1e6 * 0.5
    assert models[EVAL]["cost_usd"] == pytest.approx(eval_cost)
    assert all(models[m]["cost_usd"] > 0 for m in (EVAL, SETTINGS.user_model, SETTINGS.judge_model))
