"""Intervals and model comparisons checked against independent computations
(`helpers.independent_uncertainty`: per-case means, leave-one-out recomputation, numpy and scipy)."""

from __future__ import annotations

import itertools
import math

import pytest
from scipy import special, stats

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import build_report
from lexpilot_batch.report.statistics.compare import DEFAULT_RESAMPLES
from lexpilot_batch.report.statistics.influence import UNSTABLE
from tests.helpers.independent_uncertainty import cases_of, clustered_residuals, clustered_se, jackknife, value
from tests.helpers.synthetic_runs import synthetic


def summaries(report: dict):
    """(group index, task, scope, metric) -> summary, scope None for overall."""
    for gi, group in enumerate(report["groups"]):
        for task_name, task in group["tasks"].items():
            for scope, by_metric in [(None, task["overall"]), *task["by_class"].items()]:
                for metric, summary in by_metric.items():
                    yield (gi, task_name, scope, metric), summary


def _clopper_pearson(x: float, n: float) -> tuple[float, float]:
    low = 0.0 if x <= 0 else float(stats.beta.ppf(0.025, x, n - x + 1))
    high = 1.0 if x >= n else float(stats.beta.ppf(0.975, x + 1, n - x))
    return low, high


def _kurtosis_df(values: list[float]) -> int:
    """docs/report.md's degrees of freedom: 2 / (2 / (n - 1) + G2 / n), G2 scipy's unbiased excess
    kurtosis (at least 0), rounded down, between 3 and n - 1."""
    n = len(values)
    if n < 4 or max(values) - min(values) <= 1e-12 * max(1.0, max(map(abs, values))):
        return n - 1
    excess = max(0.0, float(stats.kurtosis(values, fisher=True, bias=False)))
    return min(n - 1, max(3, math.floor(2 / (2 / (n - 1) + excess / n) + 1e-9)))


def _expected_interval(mean: float, se: float, metric: str, trials: int, n: int, df: int) -> tuple[float, float]:
    """docs/report.md's intervals, with scipy's distributions: Korn-Graubard for the per-case
    additive metrics (Clopper-Pearson at n_eff = p(1-p)/SE^2, at most the trials, times (z/t)^2;
    each case one trial at 0 or 1), the logit t interval for the others."""
    if metric in ("acc_c", "acc_u", "success_rate", "accuracy"):
        if mean in (0.0, 1.0):
            return _clopper_pearson(mean * n, n)
        n_eff = min(trials, mean * (1 - mean) / se**2) * (stats.norm.ppf(0.975) / stats.t.ppf(0.975, df)) ** 2
        return _clopper_pearson(mean * n_eff, n_eff)
    lo, hi = (-1.0, 1.0) if metric == "qwk" else (0.0, 1.0)
    u = (mean - lo) / (hi - lo)
    half = stats.t.ppf(0.975, df) * se / ((hi - lo) * u * (1 - u))
    centre = math.log(u / (1 - u))
    return lo + (hi - lo) * float(special.expit(centre - half)), lo + (hi - lo) * float(special.expit(centre + half))


def _trials(runs: list[dict], task: str, metric: str, cases: list[str]) -> int:
    """The histories, cases or claims a per-case additive metric counts, summed over the runs."""
    wanted = set(cases)
    total = 0
    for run in runs:
        for case, _, record in run["tasks"][task]:
            if case not in wanted:
                continue
            if task == "dcg":
                total += 1
            elif task == "lca":
                total += record["history_type"] == ("complete" if metric == "acc_c" else "underspecified")
            else:
                total += len(record["claims"])
    return total


def test_every_interval_rests_on_an_independent_clustered_or_jackknife_se():
    """Per-case additive metrics: the case-clustered SE (Miller 2024, Appendix A) and the
    Korn-Graubard interval; the others: the jackknife SE and the logit t interval; with the
    kurtosis degrees of freedom of the case values (docs/report.md), recomputed record by record
    with scipy."""
    runs, plain = synthetic(n_cases=12)
    report = build_report(runs, resamples=0)
    seen = {"korn-graubard": 0, "jackknife-logit-t": 0, "too few cases": 0}
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
            values = clustered_residuals(plain[gi], task, metric, cases)
        else:
            se, values = jackknife(plain[gi], task, metric, cases)  # kurtosis: the same as of the influence
            if se is None:  # undefined without one of its cases: no interval, and the reason
                assert summary["ci"] is None and summary["ci_reason"] == UNSTABLE
                seen[UNSTABLE] = 1
                continue
        assert summary["mean"] == pytest.approx(value(plain[gi], task, metric, cases), abs=1e-12)
        assert summary["se"] == pytest.approx(se, rel=1e-9, abs=1e-12), (gi, task, scope, metric)
        ci = summary["ci"]
        if ci is None:
            assert not additive and se == 0 and summary["ci_reason"] == "no variation between cases"
            continue
        trials = _trials(plain[gi], task, metric, cases) if additive else 0
        df = _kurtosis_df(values)
        assert ci["df"] == df, (gi, task, scope, metric)
        seen["fewer df"] = seen.get("fewer df", 0) + (df < len(cases) - 1)
        low, high = _expected_interval(summary["mean"], se, metric, trials, len(cases), df)
        assert ci["low"] == pytest.approx(low, abs=1e-9), (gi, task, scope, metric)
        assert ci["high"] == pytest.approx(high, abs=1e-9), (gi, task, scope, metric)
        assert ci["low"] <= summary["mean"] <= ci["high"]
        seen[ci["method"]] = seen.get(ci["method"], 0) + 1
    assert seen["korn-graubard"] and seen["jackknife-logit-t"] and seen["too few cases"] and seen["fewer df"], seen


def _class_cases(plain: list[list[dict]], cls: str) -> set[str]:
    return {case for runs in plain for run in runs for rows in run["tasks"].values() for case, c, _ in rows if c == cls}


def test_the_swap_test_of_every_jackknifed_metric_is_the_share_of_all_swap_patterns():
    """Macro-F1, F1 and QWK: p is the share of the 2^k ways to swap the two models' records of the
    k cases they differ on whose |difference| reaches the observed one (Good 2005, ch. 3), worked
    out here by swapping the plain records and rescoring them."""
    runs, plain = synthetic(n_cases=12, n_runs=1, seed=4)
    # Make the models agree on all but a few cases, so that every pattern can be enumerated.
    for task in ("lca", "ljp_gold"):
        rows_a, rows_b = plain[0][0]["tasks"][task], plain[1][0]["tasks"][task]
        for i, row_a in enumerate(rows_a):
            if int(row_a[0]) >= 5:
                rows_b[i] = row_a
                runs[1].tasks[task].records[i] = runs[0].tasks[task].records[i]
    report = build_report(runs, resamples=0)
    cases = cases_of(plain)
    checked = 0
    for task, metric in (("lca", "macro_f1"), ("lca", "f1_c"), ("ljp_gold", "qwk")):
        d = report["comparisons"][0]["tasks"][task][metric]
        a, b = plain[0][0]["tasks"][task], plain[1][0]["tasks"][task]
        moving = sorted({c for (c, _, ra), (_, _, rb) in zip(a, b, strict=True) if ra is not rb})
        value_a, value_b = value(plain[0], task, metric, cases), value(plain[1], task, metric, cases)
        assert value_a is not None and value_b is not None
        observed = value_a - value_b
        hits = total = 0
        for swapped in itertools.product((False, True), repeat=len(moving)):
            chosen = {c for c, s in zip(moving, swapped, strict=True) if s}
            sa = [rb if c in chosen else ra for (c, _, ra), (_, _, rb) in zip(a, b, strict=True)]
            sb = [ra if c in chosen else rb for (c, _, ra), (_, _, rb) in zip(a, b, strict=True)]
            va = value([{"tasks": {task: [(r[0], r[1], x) for r, x in zip(a, sa, strict=True)]}}], task, metric, cases)
            vb = value([{"tasks": {task: [(r[0], r[1], x) for r, x in zip(b, sb, strict=True)]}}], task, metric, cases)
            total += 1
            hits += va is None or vb is None or abs(va - vb) >= abs(observed) - 1e-9
        assert d["test"] == "swap-exact" and d["p_value"] == pytest.approx(hits / total), (task, metric)
        checked += 1
    assert checked == 3


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
    assert "korn-graubard" in report["bootstrap"]["method"] and "jackknife-logit-t" in report["bootstrap"]["method"]
    none = build_report(runs, resamples=0)
    # Intervals are t intervals: the same without resamples.
    assert [s["ci"] for _, s in summaries(none)] == [s["ci"] for _, s in summaries(report)]
    assert [s["mean"] for _, s in summaries(none)] == [s["mean"] for _, s in summaries(report)]
    with pytest.raises(LexpilotError, match="--bootstrap"):
        build_report(runs, resamples=-1)


def test_the_same_seed_gives_the_same_comparisons_and_another_seed_others():
    runs, _ = synthetic(n_cases=60, n_runs=2)

    def monte_carlo(seed: int) -> list:
        (c,) = build_report(runs, resamples=100, seed=seed)["comparisons"]
        return [(d["p_value"], d["ci"]) for t in c["tasks"].values() for d in t.values() if d["test"] == "swap-mc"]

    one = monte_carlo(1)
    assert one and one == monte_carlo(1)
    assert one != monte_carlo(2)


def test_records_without_case_numbers_are_refused():
    runs, _ = synthetic(models=("model-a",), n_runs=1)
    runs[0].tasks["dcg"].cases.pop()
    with pytest.raises(LexpilotError, match="case number"):
        build_report(runs)
