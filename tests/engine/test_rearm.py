"""`engine/rearm.py` (`lexpilot-batch retry`): the selected failed threads active again, their
attempts counted anew after the last closed wave, in one transaction, each retry recorded.

Threads are failed here by hand (the way a compile fails them is `test_due.py`'s); that a retried
thread then resumes from its answers and ends as a fault-free run's is the week-long scenario's
(`scenarios/test_faults_week.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lexpilot_batch.engine.rearm import RetrySelection, retry_failed, retry_history
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.state.states import ThreadState
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import open_session, prepare_runs


@pytest.fixture
def ws(tmp_path: Any) -> Iterator[Workspace]:
    """Runs r1 and r2 of every task over two cases, wave 1 compiled; every LCA and Direct LJP
    thread failed, wave 1 closed."""
    with Workspace(tmp_path / "ws") as workspace:
        session = open_session(workspace)
        try:
            prepare_runs(workspace, session, stage="all", runs=("r1", "r2"), limit=2)
        finally:
            session.close()
        with workspace.store.transaction() as db:
            db.execute(
                "UPDATE threads SET status = ?, reason = 'lca.c.gen failed 3 times' WHERE task IN ('lca', 'ljp_direct')",
                (ThreadState.FAILED,),
            )
            db.execute("UPDATE threads SET status = ? WHERE task = 'dcg'", (ThreadState.DONE,))
            db.execute("UPDATE waves SET closed_at = 1.0 WHERE n = 1")
        yield workspace


def threads(ws: Workspace) -> dict[tuple[str, str, str, str], tuple[str, str | None, int | None]]:
    """(run, task, case number, variant) -> (status, reason, fresh_after)."""
    return {
        (r["run_id"], r["task"], r["case_number"], r["variant"]): (r["status"], r["reason"], r["fresh_after"])
        for r in ws.store.conn.execute(
            "SELECT runs.run_id, t.task, c.case_number, t.variant, t.status, t.reason, t.fresh_after FROM threads t"
            " JOIN runs ON runs.pk = t.run_pk JOIN cases c ON c.dataset = runs.dataset AND c.idx = t.case_idx"
        )
    }


def failed_count(ws: Workspace) -> int:
    return ws.store.conn.execute("SELECT COUNT(*) FROM threads WHERE status = ?", (ThreadState.FAILED,)).fetchone()[0]


def test_retry_with_no_filter_makes_every_failed_thread_active_with_fresh_attempts(ws: Workspace) -> None:
    before = threads(ws)
    failed = {k for k, v in before.items() if v[0] == ThreadState.FAILED}
    assert len(failed) == 2 * 2 * (2 + 1)  # two runs, two cases: LCA's two variants and Direct LJP

    result = retry_failed(ws, RetrySelection())
    assert (result.threads, result.after_wave, result.failed_left) == (len(failed), 1, 0)
    assert result.by_task == {"lca": 8, "ljp_direct": 4}  # in the benchmark's order
    after = threads(ws)
    assert all(after[k] == (ThreadState.ACTIVE, None, 1) for k in failed)
    assert {k: v for k, v in after.items() if k not in failed} == {k: v for k, v in before.items() if k not in failed}
    (recorded,) = retry_history(ws)
    assert recorded["selection"] == {} and recorded["threads"] == len(failed) and recorded["after_wave"] == 1


def test_filters_by_run_task_or_stage_and_case_number_and_count_what_they_left(ws: Workspace) -> None:
    cases = sorted({k[2] for k in threads(ws)})
    result = retry_failed(ws, RetrySelection(run_ids=("r2",), tasks=("ljp-direct",), cases=(cases[0],)))
    assert result.threads == 1 and result.by_task == {"ljp_direct": 1} and result.failed_left == 11
    active = [k for k, v in threads(ws).items() if v[0] == ThreadState.ACTIVE and k[1] == "ljp_direct"]
    assert active == [("r2", "ljp_direct", cases[0], "")]

    # A task name works as its stage does; `ljp` is every LJP task.
    assert retry_failed(ws, RetrySelection(tasks=("ljp",))).threads == 3
    assert retry_failed(ws, RetrySelection(models=("sim-eval",), run_ids=("r1",))).threads == 4
    assert failed_count(ws) == 4
    assert [h["selection"] for h in retry_history(ws)] == [
        {"run_ids": ["r2"], "tasks": ["ljp-direct"], "cases": [cases[0]]},
        {"tasks": ["ljp"]},
        {"run_ids": ["r1"], "models": ["sim-eval"]},
    ]


def test_a_selection_nothing_failed_matches_changes_nothing_and_records_no_retry(ws: Workspace) -> None:
    result = retry_failed(ws, RetrySelection(tasks=("dcg",)))
    assert (result.threads, result.failed_left, result.by_task) == (0, 12, {})
    assert failed_count(ws) == 12 and retry_history(ws) == []


@pytest.mark.parametrize(
    "selection, message",
    [
        (RetrySelection(run_ids=("r1", "r9")), "--run-id r9: no such run in this workspace; it has r1, r2"),
        (RetrySelection(models=("gpt-9",)), "--model gpt-9: no such run in this workspace; it has sim-eval"),
        (RetrySelection(tasks=("lcb",)), "--task must be one of"),
        (RetrySelection(cases=("no-such-case",)), "--case no-such-case: no case with that number in this workspace"),
    ],
)
def test_an_unknown_name_is_refused_and_nothing_changes(ws: Workspace, selection: RetrySelection, message: str) -> None:
    before = threads(ws)
    with pytest.raises(ConfigError) as refused:
        retry_failed(ws, selection)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert threads(ws) == before and retry_history(ws) == []


def test_after_wave_is_the_last_closed_wave(ws: Workspace) -> None:
    with ws.store.transaction() as db:
        db.execute("INSERT INTO waves (n, compiled_at, closed_at) VALUES (2, 2.0, 3.0), (3, 4.0, NULL)")
    assert retry_failed(ws, RetrySelection()).after_wave == 2
    assert {v for k, v in threads(ws).items() if k[1] in ("lca", "ljp_direct")} == {(ThreadState.ACTIVE, None, 2)}
