"""The report's statistical behaviour, not only its arithmetic (issue 26): paired tests against
scipy and against a sign-flip worked out by hand, no interval or p-value from a degenerate
distribution, the warnings above the tables, and (`-m slow`) seeded simulations of type-I error
and coverage (`helpers.stat_sim`).

References: Miller 2024, *Adding Error Bars to Evals*, Appendix A (case-clustered SE, paired
differences, power); Efron 1987 (BCa); Fisher 1935 and Good 2005 ch. 3 (sign-flip); Holm 1979.
"""

from __future__ import annotations

import itertools
import math

import pytest
from scipy import stats

from lexpilot_batch.report import RunResults, TaskRecords, build_report, render
from lexpilot_batch.report.statistics.estimates import FEW_CASES, FLAT
from tests.helpers import stat_sim


def dcg_runs(model: str, rows: list[list[bool]], classes: list[str] | None = None) -> list[RunResults]:
    """One run per list of per-case successes, cases "1".."n" (one class, or `classes[i]`)."""
    runs = []
    for r, successes in enumerate(rows):
        cls = classes or ["合同纠纷"] * len(successes)
        records = [(cls[i], {"success": s, "decisions": ["否", "是" if s else "否"]}) for i, s in enumerate(successes)]
        tasks = {"dcg": TaskRecords(records=records, cases=[str(i + 1) for i in range(len(successes))])}
        runs.append(RunResults(f"run{r + 1}", model, "u", "j", f"g-{model}", comparison_key="same", tasks=tasks))
    return runs


def per_case_means(rows: list[list[bool]]) -> list[float]:
    return [sum(column) / len(column) for column in zip(*rows, strict=True)]


def test_the_paired_t_test_from_50_cases_is_scipys_ttest_rel_on_per_case_scores():
    """For DCG success (a mean of per-case values), the clustered SE of the paired difference is
    the SE of the per-case differences of the two models' mean scores; its t test is
    `scipy.stats.ttest_rel`, the correlation Pearson's, the MDD (t_.975 + t_.80) x SE."""
    import random

    rng = random.Random(5)
    n = 60
    skill = [rng.random() for _ in range(n)]
    rows_a = [[rng.random() < p + 0.1 for p in skill] for _ in range(3)]
    rows_b = [[rng.random() < p for p in skill] for _ in range(3)]
    report = build_report(dcg_runs("A", rows_a) + dcg_runs("B", rows_b), resamples=0)
    d = report["comparisons"][0]["tasks"]["dcg"]["success_rate"]
    a, b = per_case_means(rows_a), per_case_means(rows_b)
    theirs = stats.ttest_rel(a, b)
    assert d["test"] == "paired-t" and d["df"] == n - 1
    assert d["t"] == pytest.approx(theirs.statistic, rel=1e-9)
    assert d["p_value"] == pytest.approx(theirs.pvalue, rel=1e-9)
    se = stats.sem([x - y for x, y in zip(a, b, strict=True)])
    assert d["se"] == pytest.approx(se, rel=1e-9)
    assert d["correlation"] == pytest.approx(stats.pearsonr(a, b).statistic, rel=1e-9)
    assert d["mdd"] == pytest.approx((stats.t.ppf(0.975, n - 1) + stats.t.ppf(0.8, n - 1)) * se, rel=1e-9)
    low, high = d["difference"] + stats.t.ppf([0.025, 0.975], n - 1) * se
    assert (d["ci"]["low"], d["ci"]["high"]) == (pytest.approx(low), pytest.approx(high))


def test_below_50_cases_the_p_value_is_the_exact_sign_flip_worked_out_by_hand():
    """Six cases, one run each. A wins cases 1-4 and 6, B case 5 and 6 too: per-case differences
    +1, +1, +1, +1, -1, 0, sum 3. Of the 2^5 sign patterns of the five non-zero ones, those with
    |sum| >= 3 have at most one or at least four minus signs: 1 + 5 + 5 + 1 = 12; p = 12/32."""
    a = dcg_runs("A", [[True, True, True, True, False, True]])
    b = dcg_runs("B", [[False, False, False, False, True, True]])
    d = build_report(a + b, resamples=0)["comparisons"][0]["tasks"]["dcg"]["success_rate"]
    assert d["test"] == "sign-flip-exact" and d["p_value"] == pytest.approx(12 / 32) and not d["p_floor"]
    by_enumeration = [sum(s * x for s, x in zip(signs, [1, 1, 1, 1, -1], strict=True)) for signs in
                      itertools.product((1, -1), repeat=5)]  # fmt: skip
    assert sum(abs(t) >= 3 for t in by_enumeration) == 12
    # Eight cases all won by A: the smallest p an exact test of 8 cases has, 2/2^8; never "0.002".
    a = dcg_runs("A", [[True] * 8, [True] * 8])
    b = dcg_runs("B", [[False] * 8, [False] * 8])
    d = build_report(a + b, resamples=0)["comparisons"][0]["tasks"]["dcg"]["success_rate"]
    assert d["p_value"] == pytest.approx(2 / 256) and d["test"] == "sign-flip-exact"
    # Every case moves alike: SE 0, no interval of width 0 but the reason.
    assert d["ci"] is None and d["ci_reason"] == FLAT and d["mdd"] is None


def test_with_unequal_runs_the_jackknife_sign_flip_tells_a_large_difference_from_none():
    """Three runs of A, two of B, twelve cases: A labels every history right, B as the population
    does (about 62% right). The sign-flip of the jackknife flips the differences of the two models'
    pseudo-values (estimate plus influence); flipping the influence values alone, which sum to
    about 0 whatever the difference, gave p = 1 here."""
    rng = stat_sim.random.Random(4)
    world = stat_sim.case_world(12, None, rng)
    runs = [stat_sim.one_run(world, f"run{r + 1}", "model-a", rng, shift=1.0) for r in range(3)]
    runs += [stat_sim.one_run(world, f"run{r + 1}", "model-b", rng) for r in range(2)]
    lca = build_report(runs, resamples=2000, seed=1)["comparisons"][0]["tasks"]["lca"]
    for metric in ("macro_f1", "f1_u", "f1_c"):
        d = lca[metric]
        assert d["test"].startswith("sign-flip-jackknife-") and d["difference"] > 0.2, d
        assert d["p_value"] < 0.01, (metric, d["p_value"])


def test_a_partial_comparison_pairs_the_cases_both_models_scored():
    """B scored four of A's eight cases (`--partial`): the difference, its a and b, its interval
    and its test are of those four, never of cases B has nothing for."""
    a = dcg_runs("A", [[True, True, False, False, True, True, True, True]] * 2)
    b = dcg_runs("B", [[True, False, False, True]] * 2)
    d = build_report(a + b, resamples=0)["comparisons"][0]["tasks"]["dcg"]["success_rate"]
    assert d["cases"] == 4 and d["a"] == pytest.approx(0.5) and d["b"] == pytest.approx(0.5)
    # Per-case differences 0, +1, 0, -1: sum 0, the exact sign-flip p of two non-zero ones is 1.
    assert d["difference"] == pytest.approx(0.0) and d["p_value"] == pytest.approx(1.0)
    assert d["test"] == "sign-flip-exact"
    # B with no case finished: no difference, said as n/a (nothing in common), not as undefined.
    report = build_report(a + dcg_runs("B", [[]]), resamples=0)
    d = report["comparisons"][0]["tasks"]["dcg"]["success_rate"]
    assert d["cases"] == 0 and d["difference"] is None and d["p_reason"] == "n/a: no case both scored"
    assert "  DCG Success          n/a" in render(report, "table")


def test_a_partial_pairs_test_does_not_depend_on_the_other_models_in_the_report():
    """A and B scored 70 cases, C and D 55 of them: A − C is on the 55 both scored, by the jackknife's
    t whether or not D is there (with D, C's own bootstrap was drawn for C − D, over C's cases)."""

    def comparisons(models: str) -> dict[tuple[str, str], dict]:
        rng = stat_sim.random.Random(3)
        world = stat_sim.case_world(70, None, rng)
        runs = []
        for m, w in (("A", world), ("B", world), ("C", world[:55]), ("D", world[:55])):
            if m in models:
                runs += [stat_sim.one_run(w, f"run{r + 1}", m, rng, shift=0.3 if m == "A" else 0.0) for r in range(2)]
        report = build_report(runs, resamples=200, seed=1)
        return {(c["a"]["model"], c["b"]["model"]): c["tasks"]["lca"]["macro_f1"] for c in report["comparisons"]}

    without_d, with_d = comparisons("ABC"), comparisons("ABCD")
    assert with_d[("C", "D")]["test"] == "bootstrap-bca"  # a whole pair of 55 cases
    for d in (without_d[("A", "C")], with_d[("A", "C")]):
        assert d["cases"] == 55 and d["test"] == "jackknife-t" and d["ci"]["method"] == "jackknife-t"


def test_one_case_classes_and_a_limit_2_run_give_no_interval_but_the_reason_and_a_warning_above_the_tables():
    """The stratified bootstrap redrew a one-case class identically: [0.6667, 0.6667] beside an
    SD of 0.5774, and p = 0.002 for every comparison of a --limit 2 run, without a word."""
    classes = ["合同纠纷", "婚姻家庭", "婚姻家庭", "劳动争议", "劳动争议", "劳动争议"]
    a = dcg_runs("A", [[True, False, True, True, False, True], [False, True, True, True, True, False]], classes)
    b = dcg_runs("B", [[False, False, True, False, True, True], [True, False, False, True, False, False]], classes)
    report = build_report(a + b, resamples=200)
    group = report["groups"][0]
    for cls in ("合同纠纷", "婚姻家庭", "劳动争议"):
        s = group["tasks"]["dcg"]["by_class"][cls]["success_rate"]
        assert s["ci"] is None and s["se"] is None and s["ci_reason"] == FEW_CASES, cls
    assert group["tasks"]["dcg"]["overall"]["success_rate"]["ci"] is not None  # 6 cases: enough overall
    (warning,) = [w for w in group["warnings"] if "fewer than 5 cases" in w]
    assert "合同纠纷 (1)" in warning and "婚姻家庭 (2)" in warning and "劳动争议 (3)" in warning

    limit2 = build_report(dcg_runs("A", [[True, False], [True, True]]) + dcg_runs("B", [[False, False]] * 2))
    group = limit2["groups"][0]
    s = group["tasks"]["dcg"]["overall"]["success_rate"]
    assert s["sd"] > 0 and s["ci"] is None and s["ci_reason"] == FEW_CASES
    d = limit2["comparisons"][0]["tasks"]["dcg"]["success_rate"]
    assert d["ci"] is None and d["ci_reason"] == FEW_CASES and d["p_value"] == 0.5  # 2 cases: p >= 2/2^2
    assert any("2 cases, not the LexPilot benchmark's 432" in w for w in group["warnings"])
    assert any("only 2 cases" in w for w in group["warnings"])
    for fmt, first_table in (("table", "Main results"), ("markdown", "## Main results"), ("latex", r"\begin{table"),
                             ("html", "<table")):  # fmt: skip
        text = render(limit2, fmt)
        assert 0 <= text.find("only 2 cases") < text.index(first_table), fmt
        assert 0 <= text.find("not the LexPilot benchmark") < text.index(first_table), fmt
    assert "[few cases]" in render(limit2, "table")
    assert '"ci_reason": "too few cases"' in render(limit2, "json")


def test_a_p_value_the_resamples_cannot_resolve_is_written_as_below_2_over_b_plus_1():
    """60 cases, A right on every LCA history, B on none: every resample puts A - B far from 0,
    so the bootstrap's p is only known to be below 2/(B+1); it is flagged and written "<x"."""
    from tests.helpers.synthetic_runs import synthetic

    runs, _ = synthetic(n_cases=60, n_runs=2)
    for r in runs:
        for _, record in r.tasks["lca"].records:
            right = r.model == "model-a"
            underspecified = record["history_type"] == "underspecified"
            record["label"] = "clarification" if right == underspecified else "judgment"
    report = build_report(runs, resamples=200)
    d = report["comparisons"][0]["tasks"]["lca"]["macro_f1"]
    assert d["test"] == "bootstrap-bca" and d["p_floor"] and d["p_value"] == pytest.approx(2 / 201)
    assert "<0.01" in render(report, "table") and "&lt;0.01" in render(report, "markdown")
    # Every resample alike (A perfect, B never right): no interval of width 0 either.
    assert d["ci"] is None and d["ci_reason"] == FLAT and "[+1.0000, +1.0000]" not in render(report, "table")


def test_holm_adjusts_over_each_comparisons_metrics():
    from tests.helpers.synthetic_runs import synthetic

    runs, _ = synthetic(n_cases=60, n_runs=2)
    plain = build_report(runs, resamples=100)
    holm = build_report(runs, resamples=100, adjust="holm")
    (c,) = holm["comparisons"]
    tested = [d for t in c["tasks"].values() for d in t.values() if d["p_value"] is not None]
    assert [d["p_value"] for d in tested] == [
        d["p_value"] for t in plain["comparisons"][0]["tasks"].values() for d in t.values() if d["p_value"] is not None
    ]
    m, ordered = len(tested), sorted(d["p_value"] for d in tested)
    by_hand = [min(1.0, max((m - j) * ordered[j] for j in range(i + 1))) for i in range(m)]
    assert sorted(d["p_adjusted"] for d in tested) == pytest.approx(by_hand)
    assert all(d["p_adjusted"] >= d["p_value"] for d in tested)
    assert "p (Holm)" in render(holm, "table") and "p (Holm)" not in render(plain, "table")
    assert all(d["p_adjusted"] is None for t in plain["comparisons"][0]["tasks"].values() for d in t.values())


def _per_case_scores(run: RunResults, task: str) -> dict[str, float]:
    """A case's share of right answers in one run: its LCA labels, its DCG success, its claims."""
    out: dict[str, list[int]] = {}
    for (_, record), case in zip(run.tasks[task].records, run.tasks[task].cases, strict=True):
        if task == "lca":
            right = [(record["history_type"] == "underspecified") == (record["label"] == "clarification")]
        elif task == "dcg":
            right = [record["success"]]
        else:
            right = [c["gold"] == c["predicted"] for c in record["claims"]]
        out.setdefault(case, []).extend(int(x) for x in right)
    return {case: sum(v) / len(v) for case, v in out.items()}


@pytest.mark.parametrize("shift", [0.0, 0.25])
def test_the_held_out_style_set_has_no_zero_width_interval_and_no_p_below_001_where_paired_t_says_above_01(shift):
    """The set the issue was found on: 8 cases in classes of 1, 1, 1, 1, 2 and 2, 3 runs of 2
    models (the same model, or B better by `shift`), over 20 seeded draws."""
    import random

    zero_width = low_p = compared = 0
    for seed in range(20):
        rng = random.Random(seed)
        world = stat_sim.case_world(8, [1, 1, 1, 1, 2, 2], rng)
        runs = [stat_sim.one_run(world, f"run{r + 1}", "model-a", rng) for r in range(3)]
        runs += [stat_sim.one_run(world, f"run{r + 1}", "model-b", rng, shift) for r in range(3)]
        report = build_report(runs, resamples=200, seed=seed)
        for group in report["groups"]:
            for task in group["tasks"].values():
                for summaries in [task["overall"], *task["by_class"].values()]:
                    for s in summaries.values():
                        if s["ci"] is not None and s["sd"]:
                            zero_width += s["ci"]["high"] - s["ci"]["low"] < 1e-9
        for task, metrics in report["comparisons"][0]["tasks"].items():
            a = [_per_case_scores(r, task) for r in runs[:3]]
            b = [_per_case_scores(r, task) for r in runs[3:]]
            cases = sorted(a[0])
            t_p = stats.ttest_rel([sum(x[c] for x in a) / 3 for c in cases], [sum(x[c] for x in b) / 3 for c in cases])
            for d in metrics.values():
                if d["p_value"] is None:
                    continue
                compared += 1
                low_p += d["p_value"] < 0.01 and not math.isnan(t_p.pvalue) and t_p.pvalue > 0.1
    assert compared > 100
    assert zero_width == 0 and low_p == 0


# --- Simulations (seeded; `python tests/helpers/stat_sim.py` prints the same tables) --------------


def _rate(result: dict, metrics: list | None = None) -> tuple[float, dict]:
    rates = {k: hit / total for k, (hit, total) in result.items() if total}
    keys = metrics or list(rates)
    pooled = sum(result[k][0] for k in keys) / sum(result[k][1] for k in keys)
    print(f"pooled {pooled:.4f};", ", ".join(f"{t}.{m} {r:.3f}" for (t, m), r in rates.items()))  # -s shows it
    return pooled, rates


# Bounds: the issue's, on the rate pooled over the eight metrics (LCA's five, DCG's, Direct LJP's
# two; 3,200 comparisons or intervals); each metric alone within a band of about +-3 standard
# errors of 400 draws (1.1 points), so that a seed's luck on one metric does not fail the test.


@pytest.mark.slow
def test_two_identical_models_are_told_apart_at_most_at_the_nominal_rate():
    """Type-I error at alpha = 0.05: within [3%, 7%] at n = 432, at most 8% at n = 8 with four
    one-case classes (the permutation tests are exact, hence conservative)."""
    big = stat_sim.rejections(432, 3, 400, seed=11, resamples=300)
    pooled, rates = _rate(big)
    assert 0.03 <= pooled <= 0.07, (pooled, rates)
    assert all(0.015 <= r <= 0.09 for r in rates.values()), rates
    small = stat_sim.rejections(8, 3, 400, seed=12, classes=[1, 1, 1, 1, 2, 2], resamples=300)
    pooled, rates = _rate(small)
    assert pooled <= 0.08 and all(r <= 0.08 for r in rates.values()), (pooled, rates)


@pytest.mark.slow
def test_with_unequal_runs_identical_models_are_told_apart_at_most_at_the_nominal_rate_and_others_are():
    """Three runs of A, two of B, 20 cases: Macro-F1, F1_U, F1_C and QWK go by the sign-flip of the
    jackknife pseudo-values. Under the null it rejects at most at about the nominal rate (300
    pairs: 4.7-6.7% per metric, 5.6% pooled, measured on 4 December 2026, within two standard
    errors of 5%); with B's skill 0.25 lower in every case it finds the difference 90-98% of the
    time (50 pairs; flipping the influence values alone, as before, never did: 0 of 50)."""
    null = {k: v for k, v in stat_sim.rejections(20, 3, 300, seed=21, resamples=200, runs_b=2).items()
            if k[1] in ("macro_f1", "f1_u", "f1_c", "qwk")}  # fmt: skip
    pooled, rates = _rate(null)
    assert pooled <= 0.07 and all(r <= 0.09 for r in rates.values()), (pooled, rates)
    shifted = {k: v for k, v in stat_sim.rejections(20, 3, 50, seed=22, resamples=200, runs_b=2, shift=0.25).items()
               if k[1] in ("macro_f1", "f1_u", "f1_c", "qwk")}  # fmt: skip
    pooled, rates = _rate(shifted)
    assert pooled >= 0.6 and all(r >= 0.5 for r in rates.values()), (pooled, rates)


@pytest.mark.slow
def test_intervals_cover_the_truth_at_the_nominal_rate_at_432_cases():
    pooled, rates = _rate(stat_sim.coverage(432, 3, 400, seed=13))
    assert 0.92 <= pooled <= 0.97, (pooled, rates)
    assert all(0.90 <= r <= 0.985 for r in rates.values()), rates
