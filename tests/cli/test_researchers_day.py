"""A researcher's day, second pass (issue 48), scripted end to end against the simulated provider.

One workspace through the day: a first study on the user's own dataset, categories file and role
models; two slips refused before anything is sent (`--stage lca --stage dcg`, a misspelt model in
`--prices`); a second `prepare` with none of the first's files or role flags, which reuses the
recorded ones and says so, then its second stage into the same run; the new run submitted and
cancelled mid-wave; and the report of what finished. The pieces are tested on their own in
`test_cancel.py`, `test_day.py`, `test_repeats.py`; here they meet in one day's order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from lexpilot_batch.cli import app
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import resources

runner = CliRunner()
SIM = ["--provider", "simulated", "--sim-faults", "latency=0"]
SLOW = ["--provider", "simulated", "--sim-faults", "latency=600"]  # a wave that stays in flight


def invoke(args: list[str], root: Path) -> Any:
    return runner.invoke(app, [*args, "--root", str(root)])


def ok(args: list[str], root: Path) -> str:
    result = invoke(args, root)
    assert result.exit_code == 0, result.output
    return result.output


def refused(args: list[str], root: Path) -> str:
    result = invoke(args, root)
    assert result.exit_code != 0 and isinstance(result.exception, LexpilotError), result.output
    return str(result.exception)


def own_files(tmp_path: Path) -> tuple[Path, Path]:
    """A dataset using a cause only the user's categories file maps (the bundled one refuses it)."""
    cases = json.loads(resources.sample_dataset().read_text(encoding="utf-8"))
    cases[0]["cause_of_action"] = "自拟案由"
    dataset = tmp_path / "cases.json"
    dataset.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    categories = json.loads(resources.default_categories().read_text(encoding="utf-8"))
    first = next(k for k in categories if not k.startswith("$"))
    categories[first] = [*categories[first], "自拟案由"]
    mapping = tmp_path / "categories.json"
    mapping.write_text(json.dumps(categories, ensure_ascii=False), encoding="utf-8")
    return dataset, mapping


def test_a_researchers_day(tmp_path: Path) -> None:
    root = tmp_path / "study"
    dataset, categories = own_files(tmp_path)
    roles = ["--user-model", "sim-user", "--judge-model", "sim-judge"]
    given = ["--dataset", str(dataset), "--categories", str(categories), *roles]

    # Morning: a first study on the user's own files, run to its end.
    ok(["run", "--stage", "lca", "--run-id", "r0", "--model", "sim-eval", "--limit", "2", *given, *SIM], root)

    # Two slips, each refused naming what was given, before anything is registered or sent.
    r1 = ["prepare", "--run-id", "r1", "--model", "sim-eval", "--limit", "3", *SIM]
    assert "--stage lca and --stage dcg" in refused([*r1, "--stage", "lca", "--stage", "dcg"], root)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"sim-evl": {"input": 1, "output": 2}}), encoding="utf-8")
    message = refused([*r1, "--stage", "lca", "--prices", str(prices)], root)
    assert "'sim-evl' prices no model of this study (did you mean 'sim-eval'?)" in message

    # A second study with none of the first's files or role flags: the recorded ones, said so.
    said = ok([*r1, "--stage", "lca"], root)
    for note in (
        f"No --dataset given: using {dataset}",
        f"No --categories given: using {categories}",
        "No --user-model given: using sim-user",
        "No --judge-model given: using sim-judge",
    ):
        assert note in said
    # The docs' reading of --stage: one stage per prepare, each into the same run.
    ok([*r1, "--stage", "dcg"], root)
    with Workspace(root, writable=False) as ws:
        manifest = json.loads(ws.store.conn.execute("SELECT manifest FROM runs WHERE run_id = 'r1'").fetchone()[0])
        tasks = {
            r[0]
            for r in ws.store.conn.execute(
                "SELECT DISTINCT task FROM threads t JOIN runs ON runs.pk = t.run_pk WHERE run_id = 'r1'"
            )
        }
    assert (manifest["user_model"], manifest["judge_model"], manifest["categories_path"]) == (
        "sim-user",
        "sim-judge",
        str(categories),
    )
    assert tasks == {"lca", "dcg"}

    # Afternoon: a wrong setting noticed after submit. Cancel r1 mid-wave; r0 is untouched.
    ok(["submit", *SLOW], root)
    said = ok(["cancel", "--run-id", "r1", *SLOW], root)
    assert "cancelled at its provider" in said and "they are not retried" in said
    ok(["poll-and-advance", "--wait", "--poll-interval", "0", *SLOW], root)
    status = json.loads(ok(["status", "--format", "json"], root))
    by_run = {r["run_id"]: r["tasks"] for r in status["runs"]}
    assert all(t["done"] == t["total"] for t in by_run["r0"].values())
    assert sum(t.get("cancelled", 0) for t in by_run["r1"].values()) == sum(t["total"] for t in by_run["r1"].values())

    # Evening: the report of what finished; the complete report is refused while r1 is unfinished.
    assert refused(["report", "--bootstrap", "0"], root)
    report = json.loads(ok(["report", "--partial", "--format", "json", "--bootstrap", "0"], root))
    text = json.dumps(report, ensure_ascii=False)
    assert '"r0"' in text
