"""Intervals and model comparisons checked against independent computations
(`helpers.independent_uncertainty`: per-case means, leave-one-out recomputation, numpy and scipy)."""

from __future__ import annotations

import pytest

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import build_report
from lexpilot_batch.report.statistics.bootstrap import DEFAULT_RESAMPLES
from lexpilot_batch.report.statistics.influence import UNSTABLE
from tests.helpers.independent_uncertainty import (
    bca,
    cases_of,
    clustered_se,
    jackknife,
    paired_replicates,
    t_interval,
    value,
)
from tests.helpers.synthetic_runs import synthetic


def summaries(report: dict):
    """(group index, task, scope, metric) -> summary, scope None for overall."""
    for gi, group in enumerate(report["groups"]):
        for task_name, task in group["tasks"].items():
            for scope, by_metric in [(None, task["overall"]), *task["by_class"].items()]:
                for metric, summary in by_metric.items():
                    yield (gi, task_name, scope, metric), summary


def test_every_interval_is_the_mean_plus_minus_t_times_an_independent_clustered_or_jackknife_se():
    """Per-case additive metrics: the case-clustered SE (Miller 2024, Appendix A); the others: the
    jackknife SE; both with t(cases - 1) (docs/report.md), recomputed record by record."""
    runs, plain = synthetic(n_cases=12)
    report = build_report(runs, resamples=0)
    seen = {"clustered-t": 0, "jackknife-t": 0, "too few cases": 0}
    for (gi, task, scope, metric), summary in summaries(report):
        cases = [c for c in cases_of(plain) if scope is None or c in _class_cases(plain, scope)]
        if summary["mean"] is None:
            assert summary["ci"] is None and summary["ci_reason"] is None
            continue
        assert summary["cases"] == len(cases)
        if len(cases) < 5:
            assert summary["ci"] is None and summary["se"] is None and summary["ci_reason"] == "too few cases"
            seen["too few cases"] += 1
            continue
        additive = metric in ("acc_c", "acc_u", "success_rate", "accuracy")
        se: float | None
        if additive:
            se = clustered_se(plain[gi], task, metric, cases)
        else:
            se, _ = jackknife(plain[gi], task, metric, cases)
            if se is None:  # undefined without one of its cases: no interval, and the reason
                assert summary["ci"] is None and summary["ci_reason"] == UNSTABLE
                seen[UNSTABLE] = 1
                continue
        assert summary["mean"] == pytest.approx(value(plain[gi], task, metric, cases), abs=1e-12)
        assert summary["se"] == pytest.approx(se, rel=1e-9, abs=1e-12), (gi, task, scope, metric)
        ci = summary["ci"]
        assert ci["method"] == ("clustered-t" if additive else "jackknife-t") and ci["df"] == len(cases) - 1
        low, high = t_interval(summary["mean"], se, len(cases))
        bounds = (-1.0, 1.0) if metric == "qwk" else (0.0, 1.0)
        assert ci["low"] == pytest.approx(max(low, bounds[0]), abs=1e-9)
        assert ci["high"] == pytest.approx(min(high, bounds[1]), abs=1e-9)
        seen[ci["method"]] += 1
    assert seen["clustered-t"] and seen["jackknife-t"] and seen["too few cases"], seen


def _class_cases(plain: list[list[dict]], cls: str) -> set[str]:
    return {case for runs in plain for run in runs for rows in run["tasks"].values() for case, c, _ in rows if c == cls}


def test_comparisons_from_50_cases_equal_an_independent_paired_unstratified_bootstrap_with_bca():
    """Macro-F1, F1 and QWK from 50 cases: the paired unstratified bootstrap (the same draws for
    both models, over all cases, not within classes), its BCa interval (Efron 1987)."""
    runs, plain = synthetic(n_cases=60, n_runs=2)
    report = build_report(runs, resamples=200, seed=3)
    (comparison,) = report["comparisons"]
    cases = cases_of(plain)
    checked = 0
    for task, metric in (("lca", "macro_f1"), ("ljp_gold", "qwk")):
        d = comparison["tasks"][task][metric]
        assert d["test"] == "bootstrap-bca" and d["ci"]["method"] == "bootstrap-bca"
        reps = paired_replicates(plain[0], plain[1], task, metric, cases, 200, 3)
        assert d["ci"]["resamples"] == 200
        _, loo_a = jackknife(plain[0], task, metric, cases)
        _, loo_b = jackknife(plain[1], task, metric, cases)
        low, high = bca(reps, d["difference"], [x - y for x, y in zip(loo_a, loo_b, strict=True)])
        assert (d["ci"]["low"], d["ci"]["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high, abs=1e-9))
        checked += 1
    assert checked == 2


def test_a_baseline_compares_every_model_with_it_and_must_exist():
    runs, _ = synthetic(models=("model-a", "model-b", "model-c"))
    report = build_report(runs, resamples=50, baseline="model-b")
    assert [(c["a"]["model"], c["b"]["model"]) for c in report["comparisons"]] == [
        ("model-a", "model-b"),
        ("model-c", "model-b"),
    ]
    with pytest.raises(LexpilotError, match="--baseline gpt-9.*model-a, model-b, model-c"):
        build_report(runs, resamples=50, baseline="gpt-9")


def test_only_groups_that_differ_in_the_model_alone_are_compared():
    a, _ = synthetic(models=("model-a",), comparison_key="k1")
    b, _ = synthetic(models=("model-b",), comparison_key="k2")  # say, another judge or dataset
    report = build_report(a + b, resamples=20)
    assert report["comparisons"] == []
    assert [g["comparison_key"] for g in report["groups"]] == ["k1", "k2"]


def test_resamples_are_a_choice_and_intervals_do_not_need_them():
    runs, _ = synthetic(n_cases=8)  # exact swap tests: the default 1,000 resamples are not drawn
    report = build_report(runs)
    assert report["bootstrap"]["resamples"] == DEFAULT_RESAMPLES >= 1000
    assert report["bootstrap"]["level"] == 0.95
    assert "case-clustered SE" in report["bootstrap"]["method"] and "jackknife" in report["bootstrap"]["method"]
    none = build_report(runs, resamples=0)
    # Intervals are t intervals: the same without resamples.
    assert [s["ci"] for _, s in summaries(none)] == [s["ci"] for _, s in summaries(report)]
    assert [s["mean"] for _, s in summaries(none)] == [s["mean"] for _, s in summaries(report)]
    with pytest.raises(LexpilotError, match="--bootstrap"):
        build_report(runs, resamples=-1)


def test_the_same_seed_gives_the_same_comparisons_and_another_seed_others():
    runs, _ = synthetic(n_cases=60, n_runs=2)

    def bootstrapped(seed: int) -> list:
        (c,) = build_report(runs, resamples=100, seed=seed)["comparisons"]
        return [d["ci"] for t in c["tasks"].values() for d in t.values() if d["test"] == "bootstrap-bca"]

    one = bootstrapped(1)
    assert one and one == bootstrapped(1)
    assert one != bootstrapped(2)


def test_records_without_case_numbers_are_refused():
    runs, _ = synthetic(models=("model-a",), n_runs=1)
    runs[0].tasks["dcg"].cases.pop()
    with pytest.raises(LexpilotError, match="case number"):
        build_report(runs)
