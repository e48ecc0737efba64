"""Every default a run gets from the CLI, where it ends up: the compiled request bodies of each role
and the run's manifest (issue 46: a default changed in `cli/options.py` went unnoticed, since only
`benchmark/settings.py`'s copy was tested). The expected values are the seed's, written out here,
not read from the package: changing a default anywhere fails this test."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from typer.testing import CliRunner

from lexpilot_batch.cli import app

# The seed README's settings: temperature 0.7 for the evaluated model and the User Model, 0.1 for
# the judge, 8,192 output tokens, one completion per request, a DeepSeek User Model and judge.
SEED = {
    "eval": {"model": "sim-eval", "temperature": 0.7, "max_tokens": 8192, "n": 1},
    "user": {"model": "DeepSeek-V4.1-Flash", "temperature": 0.7, "max_tokens": 8192, "n": 1},
    "judge": {"model": "DeepSeek-R1", "temperature": 0.1, "max_tokens": 8192, "n": 1},
}


def _bodies(root: Path) -> dict[str, list[dict]]:
    """Every compiled request body, by the role its file is named for."""
    out: dict[str, list[dict]] = {}
    for path in sorted((root / "requests").glob("w*/*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            out.setdefault(path.name.split("__")[0], []).extend(json.loads(line)["body"] for line in f if line.strip())
    return out


def test_a_run_prepared_without_options_sends_and_records_the_seeds_settings(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    args = ["run", "--stage", "all", "--provider", "simulated", "--run-id", "r1", "--model", "sim-eval"]
    result = CliRunner().invoke(app, [*args, "--limit", "1", "--root", str(root)])
    assert result.exit_code == 0, result.output

    bodies = _bodies(root)
    assert set(bodies) == set(SEED)  # every role compiled requests: DCG's User Model, every judge
    for role, expected in SEED.items():
        for body in bodies[role]:
            assert {k: body.get(k) for k in expected} == expected, (role, body)

    (manifest_path,) = (root / "runs").glob("r1-*/*/manifest.json")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    assert manifest["user_model"] == SEED["user"]["model"] and manifest["judge_model"] == SEED["judge"]["model"]
    assert manifest["settings"] == {
        "user_model": SEED["user"]["model"],
        "judge_model": SEED["judge"]["model"],
        "temperature": 0.7,
        "judge_temperature": 0.1,
        "max_tokens": 8192,
    }
