"""`engine/budgets.py`: each model's enqueued-token budget, where it comes from, how it is lowered
after a refusal, and the tokens counted against it.

OpenAI documents the limit as "enqueued prompt tokens per model", and a batch that would go over
it fails as a whole with `token_limit_exceeded`
(https://platform.openai.com/docs/guides/batch#rate-limits). The submit side (a file waits while
its model has no room) is `engine/test_submit.py`'s; a refusal found by a poll, `test_poll.py`'s.
"""

from __future__ import annotations

from typing import Any

import pytest

from lexpilot_batch.engine import budgets
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.state.states import FileState, RequestState
from lexpilot_batch.state.waves import set_file
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import open_session, prepare_runs
from tests.helpers.fake_backend import file_rows

MODEL = "sim-eval"


def compiled(
    ws: Workspace, limit: int | None = 1, runs: tuple[str, ...] = ("r1",), **options: Any
) -> list[dict[str, Any]]:
    """A wave of the LCA stage compiled for `limit` cases of each run; its file rows."""
    session = open_session(ws, **options)
    try:
        prepare_runs(ws, session, runs=runs, limit=limit)
    finally:
        session.close()
    return file_rows(ws)


# --- --max-enqueued-tokens ----------------------------------------------------------------------


def test_flags_name_a_model_and_its_quota_with_or_without_separators() -> None:
    flags = ["openai/gpt-4o-mini=2,000,000", "sim-eval=90_000", "a=b=5"]
    assert budgets.parse_flags(flags) == {"openai/gpt-4o-mini": 2_000_000, "sim-eval": 90_000, "a=b": 5}


@pytest.mark.parametrize("flag", ["sim-eval", "=100", "sim-eval=", "sim-eval=0", "sim-eval=-5", "sim-eval=lots"])
def test_a_flag_that_is_not_model_equals_a_positive_count_is_refused_with_an_example(flag: str) -> None:
    with pytest.raises(ConfigError) as refused:
        budgets.parse_flags([flag])
    message = str(refused.value)
    assert message.startswith(f"--max-enqueued-tokens {flag!r}: write MODEL=N") and "\n" not in message
    assert "e.g. openai/gpt-4o-mini=2000000" in message


def test_a_flag_is_remembered_a_repeated_one_changes_nothing_a_new_one_replaces_the_learned(ws: Workspace) -> None:
    db = ws.store.conn
    assert budgets.remember_flags(ws, {}) == [] and budgets.budget(db, MODEL) is None
    assert budgets.remember_flags(ws, {MODEL: 1000, "other": 50}) == [MODEL, "other"]
    assert budgets.budget(db, MODEL) == 1000 and budgets.budget(db, "other") == 50
    assert budgets.remember_flags(ws, {MODEL: 1000}) == []  # the same quota again: nothing changes
    with ws.store.transaction() as tx:
        budgets.lower_after_refusal(tx, MODEL, "Enqueued token limit reached.", 400, 100, 1.0)
    assert budgets.budget(db, MODEL) == 450  # the learned budget is below the flag: it holds
    assert budgets.remember_flags(ws, {MODEL: 2000}) == [MODEL]  # the quota was raised (a new tier)
    assert budgets.budget(db, MODEL) == 2000 and budgets.stored(db)[MODEL]["learned"] is None


def test_the_budget_is_the_lower_of_flag_and_learned_else_the_profile_default(ws: Workspace) -> None:
    db = ws.store.conn
    assert budgets.budget(db, MODEL, default=700) == 700
    with ws.store.transaction() as tx:
        budgets.lower_after_refusal(tx, MODEL, "Enqueued token limit reached.", 900, 100, 1.0)
    assert budgets.budget(db, MODEL, default=700) == 900  # learned: 90% of 1000; the default is no floor
    budgets.remember_flags(ws, {MODEL: 500})
    assert budgets.budget(db, MODEL) == 500


# --- lowered after a refusal --------------------------------------------------------------------


def test_a_refusal_that_names_the_quota_lowers_the_budget_to_ninety_percent_of_it(ws: Workspace) -> None:
    message = (
        "Enqueued token limit reached for gpt-4o-mini in organization org-x. Limit: 2,000,000 enqueued tokens."
        " Please try again once some in_progress batches have been completed."
    )
    budgets.remember_flags(ws, {MODEL: 100})  # the provider's word wins over a (too low) flag's
    with ws.store.transaction() as tx:
        assert budgets.lower_after_refusal(tx, MODEL, message, 10, 10, 1.0) == 1_800_000
    entry = budgets.stored(ws.store.conn)[MODEL]
    assert entry["learned"] == 1_800_000 and entry["flag"] == 100 and entry["why"] == message[:300]


def test_a_refusal_without_a_number_lowers_to_ninety_percent_of_what_was_enqueued_scaled(ws: Workspace) -> None:
    with ws.store.transaction() as tx:
        # (enqueued 600 + refused 400) estimated tokens, times the model's factor 1.5, times 0.9.
        assert budgets.lower_after_refusal(tx, MODEL, "Enqueued token limit reached.", 600, 400, 1.5) == 1350
        # Never raised by a later refusal that saw more enqueued.
        assert budgets.lower_after_refusal(tx, MODEL, "Enqueued token limit reached.", 5000, 400, 1.5) == 1350
        assert budgets.lower_after_refusal(tx, MODEL, "limit", 0, 0, 1.0) == 1  # never to nothing


# --- files cut to the budget, tokens counted against it -----------------------------------------


def test_a_file_holds_half_the_budget_in_estimated_tokens() -> None:
    assert budgets.file_cap(None, 1.0) is None and budgets.file_cap(0, 1.0) is None
    assert budgets.file_cap(10_000, 1.0) == 5000
    assert budgets.file_cap(10_000, 2.0) == 2500  # the model reports twice the estimate
    assert budgets.file_cap(1, 3.0) == 1
    assert budgets.request_tokens(0) == budgets.FRAMING and budgets.request_tokens(90) == 90 + budgets.FRAMING


def test_enqueued_counts_the_batch_files_a_provider_may_still_hold(ws: Workspace) -> None:
    rows = compiled(ws, limit=3, max_requests=1)
    assert len(rows) >= 5
    creating, running, ended, queued, other = rows[:5]
    db = ws.store.conn
    assert budgets.enqueued(db, MODEL) == 0  # compiled files are not at the provider yet
    set_file(ws, creating["pk"], status=FileState.CREATING)
    set_file(ws, running["pk"], status=FileState.SUBMITTED, batch_status="in_progress")
    set_file(ws, ended["pk"], status=FileState.SUBMITTED, batch_status="completed")
    set_file(ws, queued["pk"], status=FileState.UPLOADED)
    set_file(ws, other["pk"], status=FileState.SUBMITTED, batch_status="validating", model="another-model")
    held = creating["tokens"] + running["tokens"]
    assert budgets.enqueued(db, MODEL) == held
    assert budgets.enqueued(db, MODEL, but=running["pk"]) == creating["tokens"]
    assert budgets.enqueued(db, "another-model") == other["tokens"]
    set_file(ws, running["pk"], backend="sync")  # chat completions: nothing waits at the provider
    assert budgets.enqueued(db, MODEL) == creating["tokens"]


def test_usage_by_model_splits_queued_from_submitted_and_names_the_budgets_source(ws: Workspace) -> None:
    first, second = compiled(ws, limit=1, max_requests=1)[:2]
    set_file(ws, first["pk"], status=FileState.SUBMITTED, batch_status="in_progress")
    budgets.remember_flags(ws, {MODEL: 10**6})
    usage = budgets.usage_by_model(ws.store.conn)[MODEL]
    assert usage == {
        "queued_tokens": second["tokens"],
        "submitted_tokens": first["tokens"],
        "budget": 10**6,
        "budget_source": "flag",
    }
    with ws.store.transaction() as tx:
        budgets.lower_after_refusal(tx, MODEL, "Enqueued token limit reached.", 100, 0, 1.0)
    usage = budgets.usage_by_model(ws.store.conn)[MODEL]
    assert usage["budget"] == 90 and usage["budget_source"] == "learned"


# --- the estimate corrected by what the provider reported ---------------------------------------


def answered(ws: Workspace, n: int, tokens_per_estimated: float) -> None:
    """The first `n` requests answered, each reporting `tokens_per_estimated` times its estimate,
    and every file ingested."""
    with ws.store.transaction() as db:
        db.execute("UPDATE files SET status = ?", (FileState.INGESTED,))
        pks = [r[0] for r in db.execute("SELECT pk FROM requests ORDER BY pk LIMIT ?", (n,))]
        for pk in pks:
            db.execute(
                "UPDATE requests SET status = ?, prompt_tokens = CAST((prompt_chars + ?) * ? AS INTEGER) WHERE pk = ?",
                (RequestState.ANSWERED, budgets.FRAMING, tokens_per_estimated, pk),
            )


def test_the_factor_is_one_until_enough_answers_reported_then_their_ratio_with_a_margin(ws: Workspace) -> None:
    rows = compiled(ws, limit=None, runs=("r1", "r2"))  # two LCA requests a case of the sample, twice
    assert sum(r["n_requests"] for r in rows) >= budgets.MIN_MEASURED
    answered(ws, budgets.MIN_MEASURED - 1, 2.0)
    assert budgets.factor(ws.store.conn, MODEL) == 1.0  # too few to trust
    answered(ws, budgets.MIN_MEASURED, 2.0)
    assert budgets.factor(ws.store.conn, MODEL) == pytest.approx(2.0 * budgets.MARGIN, rel=1e-3)
    answered(ws, budgets.MIN_MEASURED, 10.0)
    assert budgets.factor(ws.store.conn, MODEL) == 3.0  # bounded: one odd report cannot starve a wave
    assert budgets.factor(ws.store.conn, "another-model") == 1.0
