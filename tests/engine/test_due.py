"""`engine/due.py`: which due steps one compile requests for a (run, case), when a step is out of
attempts (a budget for each kind of failure), and when a thread fails.

Pure: the protocols of `benchmark/protocols` over the case of `benchmark/test_protocols.py`, with
attempt histories written out by hand. The two runs at the end drive a whole workspace through
the simulated provider (moved unchanged from `engine/test_loop.py`).
"""

from __future__ import annotations

from typing import Any

import pytest

from lexpilot_batch.benchmark.protocols.base import Answer
from lexpilot_batch.engine.due import (
    INVALID_ATTEMPTS,
    UNEXECUTED_ATTEMPTS,
    due_for_case,
    exhausted,
)
from lexpilot_batch.state.states import INVALID, PERMANENT, REFUSAL, TRANSPORT, UNEXECUTED, RequestState
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import finish, open_session, prepare_runs, thread_counts
from tests.helpers.protocol_cases import context


def failed(kind: str, n: int = 1, wave: int = 1, error: str = "HTTP 500: boom") -> list[dict[str, Any]]:
    """`n` failed attempts of one kind, as `requests` rows."""
    return [
        {"status": RequestState.FAILED, "error_kind": kind, "error": f"{error} #{i + 1}", "wave": wave + i}
        for i in range(n)
    ]


# --- exhausted: a budget for each kind ----------------------------------------------------------


def test_a_step_never_tried_or_still_pending_or_answered_is_not_exhausted() -> None:
    assert exhausted([], 1) is None
    waiting = [
        {"status": s, "error_kind": None, "error": None, "wave": 1}
        for s in (RequestState.PENDING, RequestState.ANSWERED)
    ]
    assert exhausted(waiting * 5, 1) is None


def test_provider_failures_use_up_retries_and_the_reason_names_the_last() -> None:
    assert exhausted(failed(TRANSPORT, 1), 2) is None
    assert exhausted(failed(TRANSPORT, 2), 2) == "failed 2 times at the provider (--retries 2); last: HTTP 500: boom #2"


def test_unusable_output_and_refusals_get_three_attempts_whatever_retries_says() -> None:
    assert exhausted(failed(INVALID, INVALID_ATTEMPTS - 1), 1) is None
    assert (
        exhausted(failed(INVALID, INVALID_ATTEMPTS, error="malformed"), 1)
        == "unusable output 3 times; last: malformed #3"
    )
    mixed = failed(INVALID, 2) + failed(REFUSAL, 1, error="declined")
    assert exhausted(mixed, 10) == "refused by the model 3 times; last: declined #1"


def test_a_permanent_refusal_fails_at_once() -> None:
    why = exhausted(failed(PERMANENT, 1, error="HTTP 400: context_length_exceeded"), 8)
    assert why == "refused by the provider, which no retry can change: HTTP 400: context_length_exceeded #1"


def test_requests_nobody_ran_use_no_retries_only_their_own_bound() -> None:
    assert exhausted(failed(UNEXECUTED, UNEXECUTED_ATTEMPTS - 1), 1) is None
    why = exhausted(failed(UNEXECUTED, UNEXECUTED_ATTEMPTS, error="batch expired"), 1)
    assert why is not None and why.startswith(f"never run in {UNEXECUTED_ATTEMPTS} batches")


def test_each_kind_counts_against_its_own_budget_only() -> None:
    mixed = failed(TRANSPORT, 2) + failed(INVALID, 2) + failed(UNEXECUTED, 5)
    assert exhausted(mixed, 3) is None


# --- due_for_case -------------------------------------------------------------------------------

LCA_U = ("h-lca", "lca", "u")
INTERACTION = ("h-int", "ljp_interaction", "")


def test_a_step_two_threads_share_is_requested_once_for_both() -> None:
    due = due_for_case(context(), [LCA_U, INTERACTION], {}, {}, retries=3)
    assert [s.key for s in due.steps] == ["lca.u.gen"]  # Interaction LJP's round 1 is LCA's step
    assert due.active == [LCA_U, INTERACTION] and not due.failed and not due.finished


def test_a_thread_whose_every_due_step_is_out_of_attempts_fails_with_each_steps_reason() -> None:
    history = {"lca.u.gen": failed(TRANSPORT, 3)}
    due = due_for_case(context(), [LCA_U], {}, history, retries=3)
    assert not due.steps and not due.active
    assert due.failed == [(LCA_U, "lca.u.gen failed 3 times at the provider (--retries 3); last: HTTP 500: boom #3")]


def test_a_thread_with_another_due_step_waits_instead_of_failing() -> None:
    """Under speculation the label and the User Model's reply are due together: the reply out of
    attempts fails nothing while the label may still say it is not needed."""
    answers = {"lca.u.gen": Answer("请问借条上写明了还款日期吗？", None)}
    history = {"int.r1": failed(TRANSPORT, 2)}
    due = due_for_case(context(speculate=True), [INTERACTION], answers, history, retries=2)
    assert [s.key for s in due.steps] == ["lca.u.cls"] and due.active == [INTERACTION] and not due.failed


def test_a_retried_thread_counts_only_the_attempts_after_its_retry() -> None:
    history = {"lca.u.gen": failed(TRANSPORT, 3, wave=1)}  # waves 1, 2 and 3
    again = due_for_case(context(), [LCA_U], {}, history, retries=3, fresh_after={"h-lca": 3})
    assert [s.key for s in again.steps] == ["lca.u.gen"] and again.active == [LCA_U]
    partly = due_for_case(context(), [LCA_U], {}, history, retries=1, fresh_after={"h-lca": 2})
    assert partly.failed and partly.failed[0][1].startswith("lca.u.gen failed 1 time at")  # wave 3's counts


def test_a_thread_with_every_answer_finishes_with_its_record() -> None:
    answers = {"lca.u.gen": Answer("这是判决意见。", None), "lca.u.cls": Answer("judgment", "judgment")}
    due = due_for_case(context(), [LCA_U], answers, {}, retries=3)
    ((thread, record),) = due.finished
    assert thread == LCA_U and record["label"] == "judgment" and record["history_type"] == "underspecified"
    assert not due.steps and not due.active


# --- through a workspace (moved from engine/test_loop.py) ---------------------------------------


def test_exhausted_retries_fail_the_thread_with_the_reason(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, "line_error=1.0,seed=1", retries=2)
        try:
            prepare_runs(ws, session, stage="lca", limit=2)
            finish(ws, session)
        finally:
            session.close()
        assert thread_counts(ws) == {"failed": 4}
        reasons = [r[0] for r in ws.store.conn.execute("SELECT reason FROM threads")]
        assert all("lca." in r and "failed 2 times" in r for r in reasons)


@pytest.mark.slow  # ten waves of refused batches; the policy's unit test is above
def test_requests_a_batch_never_ran_do_not_use_up_retries(tmp_path):
    """Over the enqueued-token limit every time: retried past --retries, then stopped by its own bound."""
    from lexpilot_batch.engine.due import UNEXECUTED_ATTEMPTS

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws, "fail_batch=1.0,seed=1", retries=2)
        try:
            prepare_runs(ws, session, stage="lca", limit=1)
            finish(ws, session)
        finally:
            session.close()
        assert thread_counts(ws) == {"failed": 2}
        attempts = ws.store.conn.execute("SELECT MAX(attempt) FROM requests").fetchone()[0]
        assert attempts == UNEXECUTED_ATTEMPTS > 2
        reasons = {r[0] for r in ws.store.conn.execute("SELECT reason FROM threads")}
        assert all("never run in" in r and "token_limit_exceeded" in r for r in reasons)
