"""`lexpilot-batch cancel` (issue 48, point 1): a submitted study stopped at its provider.

Against the in-process simulated provider: a wave held in flight (`--sim-faults latency=600`) is
cancelled; the threads become `cancelled` (not failed, not retried), the answers of the finished
wave stay, the cancelled batch's unfinished requests fail as never run, `report --partial` reports
what finished, and `retry --cancelled` brings the threads back to the end. A cancel interrupted at
either of its steps and run again ends as one that was not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import lexpilot_batch.engine.cancel as cancel_module
from lexpilot_batch.cli import app
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import records

runner = CliRunner()
SIM = ["--provider", "simulated"]
SLOW = ["--sim-faults", "latency=600"]  # a batch that stays in flight for the test's whole life
FAST = ["--sim-faults", "latency=0"]


def invoke(args: list[str], root: Path) -> Any:
    return runner.invoke(app, [*args, "--root", str(root)])


def ok(args: list[str], root: Path) -> str:
    result = invoke(args, root)
    assert result.exit_code == 0, result.output
    return result.output


def threads(root: Path) -> dict[str, int]:
    with Workspace(root, writable=False) as ws:
        return dict(ws.store.conn.execute("SELECT status, COUNT(*) FROM threads GROUP BY status").fetchall())


def in_flight_second_wave(root: Path, models: tuple[str, ...] = ("sim-eval",)) -> None:
    """Run r1's first wave to its end, then submit the second, which stays in flight."""
    model_args = [x for m in models for x in ("--model", m)]
    ok(["prepare", "--stage", "lca", "--run-id", "r1", *model_args, "--limit", "3", *SIM, *FAST], root)
    ok(["submit", *SIM, *FAST], root)
    ok(["poll-and-advance", "--poll-interval", "0", *SIM, *FAST], root)  # its first wave in, the next compiled
    assert "Submitted 1 file(s)." in ok(["submit", *SIM, *SLOW], root)


def test_cancel_mid_wave_keeps_the_answers_reports_what_finished_and_retry_brings_the_threads_back(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    ok(["run", "--stage", "lca", "--run-id", "r0", "--model", "sim-eval", "--limit", "2", *SIM, *FAST], root)
    in_flight_second_wave(root)
    before = threads(root)

    said = ok(["cancel", "--run-id", "r1", *SIM, *SLOW], root)
    assert f"Cancelled {before['active']} threads (lca {before['active']}); they are not retried." in said
    assert "cancelled at its provider: requests/w0004/" in said
    kept = int(said.split("Kept: ")[1].split(" ")[0])
    assert kept > 0  # wave 1's answers of r1's cases
    assert "Spent so far on the selection:" in said and "Saved:" in said
    assert threads(root) == {"done": before["done"], "cancelled": before["active"]}

    # The cancelled batch lands; its unfinished requests fail as never run, nothing is retried.
    ok(["poll-and-advance", "--wait", "--poll-interval", "0", *SIM, *SLOW], root)
    with Workspace(root, writable=False) as ws:
        kinds = dict(
            ws.store.conn.execute(
                "SELECT COALESCE(error_kind, status), COUNT(*) FROM requests WHERE wave = 4 GROUP BY 1"
            ).fetchall()
        )
        waves = ws.store.conn.execute("SELECT COUNT(*) FROM waves").fetchone()[0]
        answered = ws.store.conn.execute(
            "SELECT COUNT(*) FROM requests q JOIN runs ON runs.pk = q.run_pk WHERE runs.run_id = 'r1'"
            " AND q.status = 'answered'"
        ).fetchone()[0]
    assert set(kinds) == {"unexecuted"} and waves == 4  # no wave 5: the cancelled threads ask nothing
    assert answered == kept
    status = ok(["status"], root)
    assert "cancelled by `cancel`" in status and "report --partial" in status

    # What finished is reported: r0 whole; r1 has no finished record and says so.
    refused = invoke(["report", "--bootstrap", "0"], root)
    assert refused.exit_code != 0
    partial = json.loads(ok(["report", "--partial", "--format", "json", "--bootstrap", "0"], root))
    assert "r0" in json.dumps(partial)

    # retry without --cancelled leaves them; with it, they run to the end from the answers they have.
    assert "cancelled thread(s) left as they are" in ok(["retry", *SIM, *FAST], root)
    assert f"Retrying {before['active']} cancelled thread(s)" in ok(["retry", "--cancelled", *SIM, *FAST], root)
    ok(["poll-and-advance", "--submit", "--wait", "--poll-interval", "0", *SIM, *FAST], root)
    assert threads(root) == {"done": before["done"] + before["active"]}


def test_cancel_by_model_leaves_the_other_models_batch_running(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    models = ["--model", "sim-eval", "--model", "sim-other"]
    ok(["prepare", "--stage", "lca", "--run-id", "r1", *models, "--limit", "2", *SIM, *FAST], root)
    ok(["submit", *SIM, *SLOW], root)  # one eval batch per model, both in flight
    said = ok(["cancel", "--model", "sim-other", *SIM, *SLOW], root)
    assert "cancelled at its provider: requests/w0001/eval__sim-other" in said
    with Workspace(root, writable=False) as ws:
        batches = {r[0]: r[1] for r in ws.store.conn.execute("SELECT model, batch_status FROM files")}
        by_model = dict(
            ws.store.conn.execute(
                "SELECT runs.model, GROUP_CONCAT(DISTINCT t.status) FROM threads t JOIN runs ON runs.pk = t.run_pk"
                " GROUP BY runs.model"
            ).fetchall()
        )
    assert batches["sim-other"] in ("cancelling", "cancelled")
    assert batches["sim-eval"] not in ("cancelling", "cancelled")
    assert by_model == {"sim-eval": "active", "sim-other": "cancelled"}


def test_a_judge_batch_shared_with_an_active_model_is_left_to_finish(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    in_flight_second_wave(root, ("sim-eval", "sim-other"))  # wave 2: one judge file for both models
    said = ok(["cancel", "--model", "sim-other", *SIM, *SLOW], root)
    assert "left running (it also carries requests of threads still active" in said
    assert "cancelled at its provider" not in said


def test_a_compiled_wave_never_sent_is_set_aside_and_nothing_is_submitted(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ok(["prepare", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", "--limit", "2", *SIM, *FAST], root)
    said = ok(["cancel", "--all", *SIM, *FAST], root)
    assert "never sent, set aside: requests/w0001/" in said
    assert "Nothing to submit." in ok(["submit", *SIM, *FAST], root)
    assert list((root / "requests" / "w0001").glob("*.jsonl.cancelled"))
    assert not list((root / "requests").rglob("*.jsonl"))


@pytest.mark.parametrize("where", ["before the provider", "after the provider"])
def test_an_interrupted_cancel_run_again_ends_as_one_that_was_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    ends = {}
    for name in ("whole", "interrupted"):
        root = tmp_path / name
        in_flight_second_wave(root)
        if name == "interrupted":
            with monkeypatch.context() as m:
                if where == "before the provider":  # the threads are cancelled, no batch yet

                    def stop(*args: object) -> None:
                        raise KeyboardInterrupt

                    m.setattr(cancel_module, "_files", stop)
                else:  # the provider cancelled the batch; its answer not recorded
                    m.setattr(cancel_module, "set_file", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
                assert invoke(["cancel", "--all", *SIM, *SLOW], root).exit_code == 130
            said = ok(["cancel", "--all", *SIM, *SLOW], root)
            assert "had been cancelled before" in said and "cancelled at its provider" in said
        else:
            ok(["cancel", "--all", *SIM, *SLOW], root)
        ok(["poll-and-advance", "--wait", "--poll-interval", "0", *SIM, *SLOW], root)
        with Workspace(root, writable=False) as ws:
            ends[name] = (
                records(ws),
                ws.store.conn.execute(
                    "SELECT status, error_kind, COUNT(*) FROM requests GROUP BY 1, 2 ORDER BY 1, 2"
                ).fetchall(),
                ws.store.conn.execute("SELECT status, batch_status FROM files ORDER BY pk").fetchall(),
            )
        assert threads(root).get("active", 0) == 0
    assert ends["whole"] == ends["interrupted"]


def test_cancel_needs_a_selection_and_names_the_runs_there_are(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    ok(["prepare", "--stage", "lca", "--run-id", "r1", "--model", "sim-eval", "--limit", "2", *SIM, *FAST], root)
    for args, words in (
        (["cancel"], "cancel needs a selection"),
        (["cancel", "--run-id", "nope"], "no such run in this workspace; it has r1"),
        (["cancel", "--all", "--model", "sim-eval"], "--all cancels every active thread"),
    ):
        result = invoke([*args, *SIM], root)
        assert result.exit_code != 0 and isinstance(result.exception, LexpilotError), result.output
        assert words in str(result.exception)
