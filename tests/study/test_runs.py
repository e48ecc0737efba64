"""`study/runs.py`: a run before it runs: its checks, its key, its manifest and how two manifests
differ, the code hash that tells two experiments apart.

The checks give one line saying what to pass instead; a run resumed with other settings is refused
naming each difference; a field that only informs (a path, a time) is no difference.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.errors import ConfigError, ManifestMismatch
from lexpilot_batch.study import runs
from lexpilot_batch.study.runs import RunSpec
from tests.helpers.engine import prepare_runs

# --- checks -------------------------------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["", "   ", "x" * 101, "r1\x1b[31m", "r\n1"])
def test_a_run_id_must_be_short_and_printable(run_id: str) -> None:
    with pytest.raises(ConfigError, match="^--run-id must be 1-100 printable characters$"):
        runs.check_run_id(run_id)


def test_a_run_id_is_kept_without_surrounding_space() -> None:
    assert runs.check_run_id("  第一次运行 ") == "第一次运行" and runs.check_run_id("x" * 100) == "x" * 100


def test_a_missing_model_says_which_option_or_variable_names_it() -> None:
    for missing in (None, "", "  "):
        with pytest.raises(ConfigError, match="^no evaluated model: pass --judge-model or set LEXPILOT_MODEL"):
            runs.check_model(missing, "--judge-model")
    with pytest.raises(ConfigError, match="^--model must be 1-200 printable characters$"):
        runs.check_model("gpt\x07")
    assert runs.check_model(" openai/gpt-4o-mini ") == "openai/gpt-4o-mini"


def test_a_limit_selects_the_first_cases_and_must_be_positive() -> None:
    assert runs.selected_cases(5, None) == [0, 1, 2, 3, 4]
    assert runs.selected_cases(5, 2) == [0, 1] and runs.selected_cases(2, 9) == [0, 1]
    for bad in (0, -1):
        with pytest.raises(ConfigError, match="^--limit must be at least 1$"):
            runs.selected_cases(5, bad)


def test_a_run_key_is_eight_hex_digits_of_run_and_model_and_a_collision_is_refused() -> None:
    key = runs.run_key("r1", "sim-eval")
    assert len(key) == 8 and int(key, 16) >= 0 and key == runs.run_key("r1", "sim-eval")
    assert (
        len({key, runs.run_key("r1", "sim-evaL"), runs.run_key("r1s", "im-eval"), runs.run_key("r2", "sim-eval")}) == 4
    )
    runs.check_key_free("r1", "m", None)
    runs.check_key_free("r1", "m", ("r1", "m"))  # the run itself
    with pytest.raises(ConfigError, match="^run 'r1' collides with run 'r7'; choose another --run-id$"):
        runs.check_key_free("r1", "m", ("r7", "m"))


# --- manifests ----------------------------------------------------------------------------------

MANIFEST: dict[str, Any] = {
    "run_id": "r1",
    "model": "sim-eval",
    "settings": {"temperature": 0.0, "judge_model": "sim-judge"},
    "case_ids": ["1", "2", "3"],
    "endpoints": {"eval": "http://127.0.0.1:4100/v1", "judge": "https://api.openai.com/v1"},
    "created_at": 1.0,
    "dataset_path": "/data/a.json",
}


def test_manifests_differ_by_each_field_and_setting_not_by_what_only_informs() -> None:
    same = {**MANIFEST, "created_at": 9.0, "dataset_path": "/elsewhere/a.json", "version": "9.9"}
    assert runs.manifest_differences(MANIFEST, same) == []
    other = {
        **MANIFEST,
        "settings": {"temperature": 0.3, "judge_model": "sim-judge", "seed": 1},
        "case_ids": ["1"],
        "stage": "lca",
    }
    assert runs.manifest_differences(MANIFEST, other) == [
        "case_ids: 3 cases selected before, 1 now",
        "settings.seed: None before, 1 now",
        "settings.temperature: 0.0 before, 0.3 now",
        "stage: None before, 'lca' now",
    ]


def test_an_endpoint_is_compared_by_identity_not_by_its_loopback_port() -> None:
    moved = {**MANIFEST, "endpoints": {**MANIFEST["endpoints"], "eval": "http://127.0.0.1:5300/v1"}}
    assert runs.manifest_differences(MANIFEST, moved) == []
    elsewhere = {**MANIFEST, "endpoints": {**MANIFEST["endpoints"], "judge": "https://api.deepseek.com/v1"}}
    (diff,) = runs.manifest_differences(MANIFEST, elsewhere)
    assert diff.startswith("endpoints.judge: ")


def test_a_run_resumed_with_other_settings_is_refused_naming_every_difference() -> None:
    runs.check_manifest(MANIFEST, dict(MANIFEST), "r1", "sim-eval")
    changed = {**MANIFEST, "settings": {"temperature": 1.0, "judge_model": "other"}}
    with pytest.raises(ManifestMismatch) as refused:
        runs.check_manifest(MANIFEST, changed, "r1", "sim-eval")
    assert str(refused.value).splitlines() == [
        "run 'r1' of model 'sim-eval' exists with different settings:",
        "  - settings.judge_model: 'sim-judge' before, 'other' now",
        "  - settings.temperature: 0.0 before, 1.0 now",
        "Use a new --run-id for a different experiment, or the original settings to resume.",
    ]


def test_a_run_registered_by_another_version_says_how_to_go_on_with_it() -> None:
    """A new release changes the code hash, which no option gives back: the refusal names the
    command that goes on with the run as registered instead of asking for the original settings."""
    upgraded = {**MANIFEST, "code_hash": "0" * 64}
    with pytest.raises(ManifestMismatch) as refused:
        runs.check_manifest(MANIFEST, upgraded, "r1", "sim-eval")
    lines = str(refused.value).splitlines()
    assert lines[1].startswith("  - code_hash:")
    assert "poll-and-advance --submit --wait" in lines[-1] and "original settings" not in lines[-1]


# --- the code hash ------------------------------------------------------------------------------


def test_the_code_hash_leaves_out_the_packages_own_imports_only() -> None:
    source = b"import json\nfrom lexpilot_batch.data import (\n    Case,\n)\nimport lexpilot_batch.util\nx = 1\n"
    assert runs._without_own_imports(source) == b"import json\nx = 1\n"
    relative = b"from . import base\nx = 1\n"
    assert runs._without_own_imports(relative) == relative  # a relative import is no path of the package's
    digest = runs.code_hash()
    assert len(digest) == 64 and digest == runs.code_hash()


# --- moved from engine/test_loop.py and report/test_results.py ---------------------------------


def test_changed_settings_are_refused_naming_the_difference(ws, session):
    prepare_runs(ws, session, stage="lca")
    with pytest.raises(ManifestMismatch) as err:
        prepare_runs(ws, session, stage="lca", settings=replace(Settings(), temperature=0.3))
    assert "settings.temperature" in str(err.value) and "new --run-id" in str(err.value)
    with pytest.raises(ManifestMismatch) as err:
        prepare_runs(ws, session, stage="lca", limit=3)
    assert "case_ids" in str(err.value)


def test_manifest_file_written_without_keys(ws, session, monkeypatch):
    prepare_runs(ws, session, stage="lca")
    manifests = list(ws.runs_dir.rglob("manifest.json"))
    assert len(manifests) == 1
    manifest = json.loads(manifests[0].read_text(encoding="utf-8"))
    assert manifest["run_id"] == "r1" and manifest["endpoints"]["eval"] == "simulated"
    assert len(manifest["dataset_sha256"]) == 64 and manifest["case_ids"]


def test_a_run_spec_given_one_name_as_a_string_has_one_model_and_one_run():
    spec = RunSpec("r1", "sim-eval", "dcg")  # type: ignore[arg-type]  # strings on purpose
    assert spec.run_ids == ("r1",) and spec.models == ("sim-eval",)
