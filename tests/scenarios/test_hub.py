"""A study on the benchmark's Hugging Face dataset (issue 49), every command a real process whose
`huggingface_hub` reads its variables as a user's does (`HF_ENDPOINT` at a stand-in for the Hub
serving a small repository in the Hub's layout, `helpers.hub`; `HF_HOME` a folder of the test's;
`HF_HUB_OFFLINE`; `HF_TOKEN`): the file is downloaded through the library, the study runs on it, and
each run's manifest records the commit its revision resolved to beside the file's SHA-256; another
revision is refused as a changed file is, naming both; a later command without `--dataset` reads
the recorded commit, offline too; a private dataset is read with the token, which nothing shows."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lexpilot_batch.state.workspace import slug
from tests.helpers.hub import FILE, FakeHub, hub_env, lexpilot_repo

REPO = "Medivvv/LexPilot"
URL = f"hf://datasets/{REPO}"
TOKEN = "hf_SENTINELtoken0123456789abcdef"
STUDY = ["--provider", "simulated", "--model", "sim-eval", "--limit", "3"]


def cli(args: list[str], root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lexpilot_batch", *args, "--root", str(root)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=300,
        check=False,
    )


def manifest(root: Path, run_id: str) -> dict:
    path = root / "runs" / slug(run_id) / slug("sim-eval") / "manifest.json"
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    stand_in = FakeHub({REPO: lexpilot_repo()[0]})
    with stand_in.serving():
        yield stand_in


@pytest.mark.slow  # a whole study on the Hub's dataset, then a second prepare: about 8 s
def test_a_study_on_the_hub_dataset_records_its_commit_and_another_revision_is_refused_naming_both(hub, tmp_path):
    repo, contents = hub.repos[REPO], lexpilot_repo()[1]
    env, root = hub_env(hub, tmp_path / "hf"), tmp_path / "ws"
    done = cli(["run", "--stage", "all", "--run-id", "r1", *STUDY, "--dataset", URL], root, env)
    assert done.returncode == 0, done.stderr
    assert ("HEAD", f"/datasets/{REPO}/resolve/main/{FILE}", None) in hub.requests
    assert ("GET", f"/datasets/{REPO}/resolve/main/{FILE}", None) in hub.requests
    first = manifest(root, "r1")
    assert first["dataset_sha256"] == hashlib.sha256(contents["main"]).hexdigest()
    assert first["dataset_commit"] == repo.refs["main"]
    assert first["dataset_path"] == f"{URL}/{FILE}"
    assert list(first).index("dataset_commit") == list(first).index("dataset_sha256") + 1  # beside it
    assert first["bundled_sample"] is False
    assert f"dataset_commit={repo.refs['main'][:12]}" in done.stdout  # the report's settings say it
    # the study ran on it: every thread of the three cases finished
    (run,) = json.loads(cli(["status", "--format", "json"], root, env).stdout)["runs"]
    assert {task: (t["done"], t["failed"]) for task, t in run["tasks"].items()} == {
        "lca": (6, 0),
        **{task: (3, 0) for task in ("dcg", "ljp_direct", "ljp_gold", "ljp_interaction")},
    }

    # Another revision of the same file, for the same run: refused, naming both revisions and commits.
    again = cli(["prepare", "--stage", "all", "--run-id", "r1", *STUDY, "--dataset", f"{URL}@v0.9"], root, env)
    assert again.returncode == 1
    message = again.stderr
    assert f"{URL}@v0.9/{FILE} (commit {repo.refs['v0.9'][:12]}) is not the dataset" in message
    assert f"{URL}/{FILE} (commit {repo.refs['main'][:12]})" in message
    assert "1 case edited" in message
    assert f"--dataset {URL}@{repo.refs['main']}/{FILE}" in message  # how to resume it
    assert "Traceback" not in message
    # ... as a new run it is another experiment, and is registered with its own commit
    new = cli(["prepare", "--stage", "lca", "--run-id", "old", *STUDY, "--dataset", f"{URL}@v0.9"], root, env)
    assert new.returncode == 0, new.stderr
    assert manifest(root, "old")["dataset_commit"] == repo.refs["v0.9"]

    # Offline, without --dataset: the workspace's latest dataset, at the commit its run recorded,
    # from the library's cache, asking the Hub nothing.
    asked = len(hub.requests)
    offline = hub_env(hub, tmp_path / "hf", HF_HUB_OFFLINE="1")
    later = cli(["prepare", "--stage", "lca", "--run-id", "r2", *STUDY], root, offline)
    assert later.returncode == 0, later.stderr
    assert f"using {URL}@{repo.refs['v0.9']}/{FILE}" in later.stdout + later.stderr
    assert manifest(root, "r2")["dataset_commit"] == repo.refs["v0.9"]
    assert len(hub.requests) == asked


def test_offline_a_revision_the_cache_lacks_is_refused_naming_the_cache_and_the_command_that_fills_it(hub, tmp_path):
    env, root = hub_env(hub, tmp_path / "hf", HF_HUB_OFFLINE="1"), tmp_path / "ws"
    done = cli(["prepare", "--stage", "lca", "--run-id", "r1", *STUDY, "--dataset", f"{URL}@v0.9"], root, env)
    assert done.returncode == 1 and not hub.requests
    cache = tmp_path / "hf" / "hub"
    assert f"is not in the Hugging Face cache {cache}, and HF_HUB_OFFLINE is set" in done.stderr
    fill = f"lexpilot-batch validate-data --dataset {URL}@v0.9/{FILE}"
    assert f"fill it with `{fill}`" in done.stderr
    assert "Traceback" not in done.stderr
    # ... and that command, run where the Hub can be reached, fills it
    filled = cli_without_root(["validate-data", "--dataset", f"{URL}@v0.9"], hub_env(hub, tmp_path / "hf"))
    assert filled.returncode == 0 and filled.stdout.rstrip().endswith("valid")
    done = cli(["prepare", "--stage", "lca", "--run-id", "r1", *STUDY, "--dataset", f"{URL}@v0.9"], root, env)
    assert done.returncode == 0, done.stderr


def cli_without_root(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lexpilot_batch", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=300,
        check=False,
    )


def test_a_private_dataset_is_read_with_hf_token_which_no_output_or_file_holds(hub, tmp_path):
    hub.repos[REPO].token = TOKEN
    root = tmp_path / "ws"
    anonymous = hub_env(hub, tmp_path / "hf")
    refused = cli(["prepare", "--stage", "lca", "--run-id", "r1", *STUDY, "--dataset", URL], root, anonymous)
    assert refused.returncode == 1 and "set HF_TOKEN" in refused.stderr
    env = hub_env(hub, tmp_path / "hf", HF_TOKEN=TOKEN)
    done = cli(["prepare", "--stage", "lca", "--run-id", "r1", *STUDY, "--dataset", URL], root, env)
    assert done.returncode == 0, done.stderr
    assert {auth for _, _, auth in hub.requests if auth} == {f"Bearer {TOKEN}"}  # the library sent it
    wrong = hub_env(hub, tmp_path / "hf", HF_TOKEN=TOKEN[::-1])
    refused = cli_without_root(["validate-data", "--dataset", f"{URL}@v0.9"], wrong)
    assert refused.returncode != 0
    for output in (done.stdout, done.stderr, refused.stdout, refused.stderr):
        assert TOKEN not in output and TOKEN[::-1] not in output
    for path in root.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
