"""The metrics against scikit-learn, the paper's 1/3 anchor, and every undefined case."""

from __future__ import annotations

import math
import statistics
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, recall_score

from lexpilot_batch.benchmark import metrics

TRUTH = st.sampled_from(metrics.TRUTHS)
LABEL = st.sampled_from(metrics.LCA_LABELS)
LCA_PAIRS = st.lists(st.tuples(TRUTH, LABEL), max_size=40)
VERDICT = st.sampled_from(["支持", "部分支持", "驳回"])
LJP_PAIRS = st.lists(st.tuples(VERDICT, VERDICT), max_size=40)

# Predicted clarification means predicted underspecified.
AS_CLASS = {"clarification": "underspecified", "judgment": "complete"}
# The seed README's ordinal scale, spelled here and not taken from `metrics.verdict_index`: a
# comparison that borrowed the code's own map would pass with the map wrong (say 驳回=1).
ORDINAL = {"支持": 0, "部分支持": 1, "驳回": 2}


def same(ours: float | None, theirs: float) -> bool:
    """`ours` is None exactly where scikit-learn's value is NaN, and equal elsewhere."""
    if ours is None:
        return math.isnan(theirs)
    return not math.isnan(theirs) and math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=100, deadline=None)
@given(LCA_PAIRS.filter(bool))
def test_lca_matches_sklearn(pairs):
    truth = [t for t, _ in pairs]
    pred = [AS_CLASS[label] for _, label in pairs]
    result = metrics.lca_metrics(pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f1_u = f1_score(truth, pred, pos_label="underspecified", zero_division=np.nan)
        f1_c = f1_score(truth, pred, pos_label="complete", zero_division=np.nan)
        acc_u = recall_score(truth, pred, pos_label="underspecified", zero_division=np.nan)
        acc_c = recall_score(truth, pred, pos_label="complete", zero_division=np.nan)
    assert same(result["f1_u"], f1_u)
    assert same(result["f1_c"], f1_c)
    assert same(result["acc_u"], acc_u)
    assert same(result["acc_c"], acc_c)
    assert same(result["macro_f1"], (f1_u + f1_c) / 2)


@settings(max_examples=100, deadline=None)
@given(LJP_PAIRS.filter(bool))
def test_ljp_matches_sklearn(pairs):
    gold = [ORDINAL[g] for g, _ in pairs]
    pred = [ORDINAL[p] for _, p in pairs]
    result = metrics.ljp_metrics(pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kappa = cohen_kappa_score(gold, pred, weights="quadratic", labels=[0, 1, 2])
    assert same(result["qwk"], kappa)
    assert result["accuracy"] == pytest.approx(accuracy_score(gold, pred))


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=50))
def test_always_ask_and_always_answer_score_one_third_on_paired_data(n):
    truths = ["complete"] * n + ["underspecified"] * n
    ask = metrics.lca_metrics((t, "clarification") for t in truths)
    answer = metrics.lca_metrics((t, "judgment") for t in truths)
    assert ask["macro_f1"] == pytest.approx(1 / 3)
    assert answer["macro_f1"] == pytest.approx(1 / 3)
    assert (ask["f1_u"], ask["f1_c"], ask["acc_u"], ask["acc_c"]) == (pytest.approx(2 / 3), 0, 1, 0)
    assert (answer["f1_u"], answer["f1_c"], answer["acc_u"], answer["acc_c"]) == (0, pytest.approx(2 / 3), 0, 1)


def test_lca_counts_follow_underspecified_as_positive():
    counts = metrics.lca_counts(
        [
            ("underspecified", "clarification"),
            ("underspecified", "clarification"),
            ("underspecified", "judgment"),
            ("complete", "clarification"),
            ("complete", "judgment"),
            ("complete", "judgment"),
            ("complete", "judgment"),
        ]
    )
    assert counts == metrics.LcaCounts(tp=2, fp=1, fn=1, tn=3)
    assert counts.f1_u == pytest.approx(4 / 6)
    assert counts.f1_c == pytest.approx(6 / 8)
    assert counts.macro_f1 == pytest.approx((4 / 6 + 6 / 8) / 2)
    assert counts.acc_c == pytest.approx(3 / 4)
    assert counts.acc_u == pytest.approx(2 / 3)


def test_f1_u_is_undefined_on_all_complete_data_answered_directly():
    result = metrics.lca_metrics([("complete", "judgment")] * 4)
    assert result["f1_u"] is None
    assert result["acc_u"] is None
    assert result["macro_f1"] is None  # undefined when either half is
    assert result["f1_c"] == 1.0
    assert result["acc_c"] == 1.0


def test_f1_u_is_zero_not_undefined_when_complete_data_gets_questions():
    # FP > 0 makes the denominator non-zero: a real 0, not an undefined score.
    result = metrics.lca_metrics([("complete", "clarification"), ("complete", "judgment")])
    assert result["f1_u"] == 0.0
    assert result["macro_f1"] == pytest.approx((0 + 2 / 3) / 2)


def test_lca_of_nothing_is_undefined_everywhere():
    assert metrics.lca_metrics([]) == dict.fromkeys(metrics.LCA_METRICS)


@pytest.mark.parametrize("pair", [("complete", "ask"), ("partial", "judgment")])
def test_lca_rejects_unknown_values(pair):
    with pytest.raises(ValueError):
        metrics.lca_metrics([pair])


@pytest.mark.parametrize("label", ["支持", "部分支持", "驳回"])
def test_qwk_is_undefined_when_everything_is_one_label(label):
    result = metrics.ljp_metrics([(label, label)] * 5)
    assert result["qwk"] is None
    assert result["accuracy"] == 1.0


def test_qwk_is_defined_when_only_predictions_vary():
    # Gold all 支持 but predictions spread: expected disagreement is positive.
    result = metrics.ljp_metrics([("支持", "支持"), ("支持", "驳回")])
    assert result["qwk"] == pytest.approx(0.0)


def test_qwk_by_hand():
    # gold 0,1,2 predicted 0,2,2: observed sum (i-j)^2 = 1; marginals r=(1,1,1), c=(1,0,2);
    # expected sum = sum_ij (i-j)^2 r_i c_j = (0+0+4*2) + (1+0+1*2) + (4+0+0) = 15;
    # kappa = 1 - 3*1/15 = 0.8.
    assert metrics.quadratic_weighted_kappa([0, 1, 2], [0, 2, 2]) == pytest.approx(0.8)


def test_ljp_of_no_claims_is_undefined():
    assert metrics.ljp_metrics([]) == {"qwk": None, "accuracy": None}


def test_ljp_rejects_unknown_verdicts_and_length_mismatch():
    with pytest.raises(ValueError):
        metrics.ljp_metrics([("支持", "同意")])
    with pytest.raises(ValueError):
        metrics.quadratic_weighted_kappa([0, 1], [0])
    with pytest.raises(ValueError):
        metrics.quadratic_weighted_kappa([0, 3], [0, 1])


def test_dcg_denominator_is_every_case():
    assert metrics.dcg_success_rate([True, False, False, False]) == 0.25
    assert metrics.dcg_success_rate([False] * 3) == 0.0
    assert metrics.dcg_success_rate([]) is None
    with pytest.raises(ValueError):
        metrics.dcg_success_rate([True, "是"])  # type: ignore[list-item]  # a non-bool on purpose


def test_mean_sd_is_sample_sd_over_defined_runs():
    mean, sd = metrics.mean_sd([0.8, 0.6, 0.7])
    assert mean == pytest.approx(0.7)
    assert sd == pytest.approx(0.1)  # ddof=1; the population SD would be 0.0816
    assert sd == pytest.approx(statistics.stdev([0.8, 0.6, 0.7]))


def test_mean_sd_excludes_undefined_runs():
    assert metrics.mean_sd([0.8, None, 0.6]) == (pytest.approx(0.7), pytest.approx(0.1414213562))
    assert metrics.n_defined([0.8, None, 0.6]) == 2


def test_mean_sd_of_one_run_has_undefined_sd():
    assert metrics.mean_sd([0.5]) == (0.5, None)
    assert metrics.mean_sd([0.5, None]) == (0.5, None)


def test_mean_sd_of_nothing_is_undefined():
    assert metrics.mean_sd([]) == (None, None)
    assert metrics.mean_sd([None, None]) == (None, None)
    assert metrics.n_defined([None, None]) == 0
