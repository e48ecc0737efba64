"""The report's statistical behaviour, not only its arithmetic (issues 26 and 46): paired tests against
scipy and against permutations worked out by hand, the deterministic cases the issue names, no
interval or p-value from a degenerate distribution, the warnings above the tables, Holm over the
report, and (`-m slow`) the calibration harness's hard worlds (`bench/calibration.py`).

References: Miller 2024, *Adding Error Bars to Evals* (case-clustered SE, paired differences,
power); Fisher 1935 and Good 2005 ch. 3 (permutation tests); Clopper & Pearson 1934; Korn &
Graubard 1998; Holm 1979.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from scipy import stats

from bench import calibration
from lexpilot_batch.report import RunResults, TaskRecords, build_report, render
from lexpilot_batch.report.statistics.estimates import FEW_CASES, FLAT


def dcg_runs(model: str, rows: list[list[bool]], classes: list[str] | None = None) -> list[RunResults]:
    """One run per list of per-case successes, cases "1".."n" (one class, or `classes[i]`)."""
    runs = []
    for r, successes in enumerate(rows):
        cls = classes or ["合同纠纷"] * len(successes)
        records = [(cls[i], {"success": s, "decisions": ["否", "是" if s else "否"]}) for i, s in enumerate(successes)]
        tasks = {"dcg": TaskRecords(records=records, cases=[str(i + 1) for i in range(len(successes))])}
        runs.append(RunResults(f"run{r + 1}", model, "u", "j", f"g-{model}", comparison_key="same", tasks=tasks))
    return runs


def lca_runs(model: str, wrong: list[set[int]], n: int) -> list[RunResults]:
    """One LCA run per set: both histories of every case of 1..n labelled right, but those in the set."""
    runs = []
    for r, missed in enumerate(wrong):
        records, cases = [], []
        for i in range(1, n + 1):
            for history in ("complete", "underspecified"):
                right = i not in missed
                label = "clarification" if right == (history == "underspecified") else "judgment"
                records.append(("合同纠纷", {"history_type": history, "label": label}))
                cases.append(str(i))
        tasks = {"lca": TaskRecords(records=records, cases=cases)}
        runs.append(RunResults(f"run{r + 1}", model, "u", "j", f"g-{model}", comparison_key="same", tasks=tasks))
    return runs


def per_case_means(rows: list[list[bool]]) -> list[float]:
    return [sum(column) / len(column) for column in zip(*rows, strict=True)]


def world_runs(world: str, n: int, runs_a: int, runs_b: int, seed: int, shift: float = 0.0) -> list[RunResults]:
    """Two models of the calibration harness's world on the same n cases (B's skill lower by `shift`)."""
    rng = random.Random(seed)
    cases = calibration.draw_cases(calibration.WORLDS[world], n, "sharp", rng)
    for case in cases:
        case.skill_b = max(0.0, case.skill_b - shift)
    runs = [calibration.one_run(cases, f"run{r + 1}", "model-a", False, rng) for r in range(runs_a)]
    return runs + [calibration.one_run(cases, f"run{r + 1}", "model-b", True, rng) for r in range(runs_b)]


def test_from_50_cases_the_se_t_and_r_are_scipys_and_the_p_value_the_exact_sign_flip():
    """DCG success (a mean of per-case values) at 60 cases: the clustered SE of the paired difference
    is the SE of the per-case differences of the two models' mean scores, t is `ttest_rel`'s, r
    Pearson's; the p-value is the sign-flip test's, exact (scipy's permutation test of the same
    statistic, by Monte Carlo, agrees); the interval holds 0 exactly when p is at least 5%."""
    rng = random.Random(5)
    n = 60
    skill = [rng.random() for _ in range(n)]
    rows_a = [[rng.random() < p + 0.1 for p in skill] for _ in range(3)]
    rows_b = [[rng.random() < p for p in skill] for _ in range(3)]
    report = build_report(dcg_runs("A", rows_a) + dcg_runs("B", rows_b), resamples=0)
    d = report["comparisons"][0]["tasks"]["dcg"]["success_rate"]
    a, b = per_case_means(rows_a), per_case_means(rows_b)
    theirs = stats.ttest_rel(a, b)
    assert d["test"] == "sign-flip-exact" and d["df"] == n - 1 and d["test_runs"] == 3
    assert d["t"] == pytest.approx(theirs.statistic, rel=1e-9)
    se = stats.sem([x - y for x, y in zip(a, b, strict=True)])
    assert d["se"] == pytest.approx(se, rel=1e-9)
    assert d["correlation"] == pytest.approx(stats.pearsonr(a, b).statistic, rel=1e-9)
    permuted = stats.permutation_test(
        (a, b), lambda x, y: sum(x) - sum(y), permutation_type="samples", n_resamples=20000, random_state=1
    )
    assert d["p_value"] == pytest.approx(permuted.pvalue, abs=0.01)
    assert (d["ci"]["low"] <= 0 <= d["ci"]["high"]) == (d["p_value"] >= 0.05)
    assert d["ci"]["method"] == "permutation" and d["mdd"] > d["ci"]["high"] - d["difference"]


def test_the_p_value_is_the_exact_sign_flip_worked_out_by_hand():
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
    # Five cases that differ can never reach p < 0.05 (2/2^5): no MDD and no interval, but why.
    assert d["mdd"] is None and d["ci"] is None
    assert d["mdd_reason"] == d["ci_reason"] == "not reachable: 5 cases differ; the test's smallest p is 0.0625"
    assert "[not reachable]" in render(build_report(a + b, resamples=0), "table")
    # Eight cases all won by A: the smallest p an exact test of 8 cases has, 2/2^8; never "0.002".
    a = dcg_runs("A", [[True] * 8, [True] * 8])
    b = dcg_runs("B", [[False] * 8, [False] * 8])
    d = build_report(a + b, resamples=0)["comparisons"][0]["tasks"]["dcg"]["success_rate"]
    assert d["p_value"] == pytest.approx(2 / 256) and d["test"] == "sign-flip-exact"
    # Every case moves alike: the interval is what the test does not reject (|sum| up to 6 of 8),
    # continuity-corrected halfway to the first sum it rejects (8): 1 - 7/8; no MDD, since no
    # spread between cases is there to have power against.
    assert (d["ci"]["low"], d["ci"]["high"]) == (pytest.approx(0.125), 1.0)
    assert d["mdd"] is None and d["mdd_reason"] == FLAT


def test_two_deterministic_models_that_differ_on_2_of_60_cases_are_not_told_apart():
    """Issue 46: A perfect on LCA, B wrong on the same 2 of 60 cases in every run. The paired BCa
    bootstrap said Macro-F1 p = 0.040, CI [0, 0.057]; two cases that differ are as likely either
    way under the null: the swap test's p is 0.5 (2 of its 4 patterns as far from 0), with 5 runs of
    each or 1 against 5; and 2 cases allow no p below 0.5: no interval, no MDD."""
    for runs_b in (5, 1):
        a = lca_runs("A", [set()] * 5, 60)
        b = lca_runs("B", [{7, 31}] * runs_b, 60)
        lca = build_report(a + b)["comparisons"][0]["tasks"]["lca"]
        for metric in ("macro_f1", "f1_u", "f1_c", "acc_c", "acc_u"):
            d = lca[metric]
            assert d["p_value"] >= 0.25, (runs_b, metric, d)
            assert d["p_value"] == pytest.approx(0.5) and d["test"].endswith("-exact")
            assert d["ci"] is None and d["mdd"] is None and d["ci_reason"].startswith("not reachable: 2 cases")


def test_an_8_of_8_rate_has_its_exact_bound_not_no_interval():
    """Issue 46: 8 of 8 cases right (one run) had no interval ("no variation"): Clopper-Pearson
    gives [0.631, 1]. With five runs, all right, each case is one trial: the same bound."""
    for runs in (1, 5):
        group = build_report(dcg_runs("A", [[True] * 8] * runs))["groups"][0]
        s = group["tasks"]["dcg"]["overall"]["success_rate"]
        assert s["ci"]["method"] == "clopper-pearson" and s["ci_reason"] is None
        assert s["ci"]["high"] == 1.0 and s["ci"]["low"] == pytest.approx(0.6306, abs=1e-4)
        none = build_report(dcg_runs("A", [[False] * 8] * runs))["groups"][0]["tasks"]["dcg"]["overall"]
        assert (none["success_rate"]["ci"]["low"], none["success_rate"]["ci"]["high"]) == (
            0.0,
            pytest.approx(1 - 0.6306, abs=1e-4),
        )


def test_with_unequal_runs_the_test_pairs_as_many_runs_of_each_and_tells_a_large_difference():
    """Three runs of A, two of B, twelve cases, B's skill 0.6 below A's in every case. The swap test
    runs on two runs of each (run i of A with run i of B)."""
    runs = world_runs("central", 12, 3, 2, seed=4, shift=0.6)
    lca = build_report(runs, resamples=2000, seed=1)["comparisons"][0]["tasks"]["lca"]
    for metric in ("macro_f1", "f1_u", "f1_c"):
        d = lca[metric]
        assert d["test"].startswith("swap-") and d["test_runs"] == 2 and d["difference"] > 0.2, d
        assert d["p_value"] < 0.01, (metric, d["p_value"])


def test_the_swap_test_is_two_sided():
    """A worse than B on all of 8 cases: the swap test's p is 2/2^8, from both tails (a one-sided
    test gives 1 or 1/256); the same with the models' roles exchanged; and on mixed data it is the
    share of all swap patterns whose |difference| reaches the observed one, worked out by brute
    force over the records."""
    worse = lca_runs("A", [set(range(1, 9))] * 2, 8)
    better = lca_runs("B", [set()] * 2, 8)
    for runs in (worse + better, better + worse):
        d = build_report(runs, resamples=0)["comparisons"][0]["tasks"]["lca"]["macro_f1"]
        assert d["test"] == "swap-exact" and d["p_value"] == pytest.approx(2 / 256), d
    wrong_a = [{1, 2, 5, 9}, {2, 3, 5, 7, 10}]
    wrong_b = [{3}, {5, 8}]
    d = build_report(lca_runs("A", wrong_a, 10) + lca_runs("B", wrong_b, 10), resamples=0)["comparisons"][0]
    d = d["tasks"]["lca"]["f1_u"]

    def f1_u(wrong: list[set[int]]) -> float:
        values = []
        for missed in wrong:
            tp, fn, fp = 10 - len(missed), len(missed), len(missed)
            values.append(2 * tp / (2 * tp + fp + fn))
        return sum(values) / len(values)

    observed = f1_u(wrong_a) - f1_u(wrong_b)
    hits = total = 0
    for swapped in itertools.product((False, True), repeat=10):
        cases = [i + 1 for i, s in enumerate(swapped) if s]
        sa = [(wa - set(cases)) | (wb & set(cases)) for wa, wb in zip(wrong_a, wrong_b, strict=True)]
        sb = [(wb - set(cases)) | (wa & set(cases)) for wa, wb in zip(wrong_a, wrong_b, strict=True)]
        total += 1
        hits += abs(f1_u(sa) - f1_u(sb)) >= abs(observed) - 1e-9
    assert d["difference"] == pytest.approx(observed) and d["p_value"] == pytest.approx(hits / total)
    assert 0.0 < d["p_value"] < 1.0


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


def test_a_pairs_test_does_not_depend_on_the_other_models_in_the_report():
    """A and B scored 70 cases, C and D 55 of them: A − C is on the 55 both scored, with the same
    p-value and interval whether or not D is there (each pair draws its own random patterns)."""

    def comparisons(models: str) -> dict[tuple[str, str], dict]:
        rng = random.Random(3)
        cases = calibration.draw_cases(calibration.WORLDS["central"], 70, "sharp", rng)
        runs = []
        for m, w in (("A", cases), ("B", cases), ("C", cases[:55]), ("D", cases[:55])):
            if m in models:
                runs += [calibration.one_run(w, f"run{r + 1}", m, m == "A", rng) for r in range(2)]
        report = build_report(runs, resamples=200, seed=1, adjust="none")
        return {(c["a"]["model"], c["b"]["model"]): c["tasks"]["lca"]["macro_f1"] for c in report["comparisons"]}

    without_d, with_d = comparisons("ABC"), comparisons("ABCD")
    assert with_d[("C", "D")]["test"] == "swap-mc" and with_d[("C", "D")]["cases"] == 55
    assert without_d[("A", "C")]["cases"] == 55 and without_d[("A", "C")]["test"] == "swap-mc"
    assert without_d[("A", "C")] == with_d[("A", "C")]


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


def test_a_p_value_the_resamples_cannot_resolve_is_written_as_below_1_over_b_plus_1():
    """60 cases, A right on every LCA history, B on none: no random swap pattern reaches the
    observed difference, so the Monte Carlo p is only known to be below 1/(B+1): flagged, "<x"."""
    runs = lca_runs("A", [set()] * 2, 60) + lca_runs("B", [set(range(1, 61))] * 2, 60)
    report = build_report(runs, resamples=200, adjust="none")
    d = report["comparisons"][0]["tasks"]["lca"]["macro_f1"]
    assert d["test"] == "swap-mc" and d["p_floor"] and d["p_value"] == pytest.approx(1 / 201)
    assert "<0.005" in render(report, "table") and "&lt;0.005" in render(report, "markdown")
    assert d["ci"]["low"] > 0 and d["ci"]["high"] == 1.0


def test_holm_adjusts_over_the_reports_comparisons_in_two_families():
    """Three models, three pairs: the headline metrics of every pair are one family, every other
    metric another; each adjusted by Holm's step-down, the unadjusted p beside it; the default."""
    runs = []
    rng = random.Random(2)
    cases = calibration.draw_cases(calibration.WORLDS["central"], 30, "sharp", rng)
    for model, shift in (("A", 0.0), ("B", 0.1), ("C", 0.2)):
        for case in cases:
            case.skill_b = max(0.0, case.skill_a - shift)
        runs += [calibration.one_run(cases, f"run{r + 1}", model, True, rng) for r in range(2)]
    holm = build_report(runs, resamples=300)
    plain = build_report(runs, resamples=300, adjust="none")
    assert holm["bootstrap"]["adjust"] == "holm"
    tested = [(t, name, d) for c in holm["comparisons"] for t, ms in c["tasks"].items() for name, d in ms.items()]
    unadjusted = [d for c in plain["comparisons"] for ms in c["tasks"].values() for d in ms.values()]
    assert [d["p_value"] for _, _, d in tested] == [d["p_value"] for d in unadjusted]
    headline = {"lca": "macro_f1", "dcg": "success_rate", "ljp_direct": "qwk"}
    for family in (True, False):
        mine = [d for t, name, d in tested if (headline[t] == name) == family and d["p_value"] is not None]
        m, ordered = len(mine), sorted(d["p_value"] for d in mine)
        by_hand = [min(1.0, max((m - j) * ordered[j] for j in range(i + 1))) for i in range(m)]
        assert sorted(d["p_adjusted"] for d in mine) == pytest.approx(by_hand)
        assert m == (9 if family else 15)
    assert all(d["p_adjusted"] >= d["p_value"] for _, _, d in tested)
    assert "p (Holm)" in render(holm, "table") and "p (Holm)" not in render(plain, "table")
    assert all(d["p_adjusted"] is None for d in unadjusted)


def test_the_variance_split_and_the_plan_say_whether_runs_or_cases_help():
    """A stable world (ICC 0.8): most of a case's variance is between cases, and more runs buy
    little; a world of runs that disagree (ICC 0.05): within, and more runs help. `--plan` gives the
    cases at 1, 3, 5 and 10 runs, fewer with more runs, and a smaller difference needs more."""
    calibration.WORLDS["noisy"] = calibration.World(0.6, 0.05)
    try:
        shares = {}
        for world in ("stable", "noisy"):
            report = build_report(world_runs(world, 200, 3, 3, seed=7), resamples=0, plan=0.05)
            v = report["groups"][0]["tasks"]["dcg"]["overall"]["success_rate"]["variance"]
            assert v["per_case"] == pytest.approx(v["between"] + v["within"] / 3)
            shares[world] = v["within"] / 3 / v["per_case"]
            (row,) = [r for r in report["plan"]["rows"] if r["metric"] == "success_rate"]
            cases = [row["cases"][k] for k in ("1", "3", "5", "10")]
            assert cases == sorted(cases, reverse=True) and cases[0] > cases[-1]
            wider = build_report(world_runs(world, 200, 3, 3, seed=7), resamples=0, plan=0.1)["plan"]["rows"]
            assert next(r for r in wider if r["metric"] == "success_rate")["cases"]["3"] < row["cases"]["3"]
            assert "Where the uncertainty comes from" in render(report, "table") and "Plan" in render(report, "table")
        assert shares["stable"] < 0.2 < 0.5 < shares["noisy"]
    finally:
        del calibration.WORLDS["noisy"]


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
    models (the same model, or B worse by `shift`), over 20 seeded draws."""
    zero_width = low_p = compared = 0
    for seed in range(20):
        runs = world_runs("central", 8, 3, 3, seed=seed, shift=shift)
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


# --- The calibration harness's hard worlds (seeded; `python bench/calibration.py` prints the full grid) ---


def _rates(cell: dict, kind: str) -> dict[str, tuple[int, int]]:
    out = {}
    for metric, counts in cell["counts"].items():
        found = [v for k, v in counts.items() if k != "classes" and (k == kind or k.startswith(kind + "_"))]
        if kind == "class":
            found = list(counts["classes"].values())
        if found:
            out[metric] = (sum(h for h, _ in found), sum(t for _, t in found))
    return out


# Bounds: each metric's rate over the cell's replications within its Monte-Carlo band of the nominal
# rate widened to about 3 standard errors (so that one seed's luck on one of eight metrics does not
# fail the test): with 300 replications, type-I at most 9%, coverage at least 91%. The methods this
# replaced fail them (docs/report.md: the t interval covered 84-92% at low rates in small classes;
# the paired bootstrap rejected two identical near-deterministic models 13-20% of the time).


@pytest.mark.slow
@pytest.mark.parametrize(
    "world, scenario, layout, cases",
    [
        ("deterministic", "sharp", "3v3", 60),
        ("stable", "weak", "1v5", 20),
        ("low", "sharp", "1v5", 8),
        ("low", "weak", "3v3", 50),
        ("central", "shift", "3v3", 50),  # the comparison's interval at a true difference that is not 0
    ],
)
def test_the_hard_worlds_hold_type_i_error_and_coverage(world: str, scenario: str, layout: str, cases: int):
    cell = calibration.run_cell(world, scenario, layout, cases, 300, 300)
    for kind, check in (
        ("reject", lambda r: r <= 0.09),
        ("difference", lambda r: r >= 0.91),
        ("overall", lambda r: r >= 0.91),
        ("class", lambda r: r >= 0.91),
    ):
        for metric, (hit, total) in _rates(cell, kind).items():
            if total >= 100:
                assert check(hit / total), (kind, metric, hit, total)


@pytest.mark.slow
def test_the_hard_worlds_tell_the_raw_t_interval_these_intervals_replaced(monkeypatch: pytest.MonkeyPatch):
    """The bounds above can fail: with every Korn-Graubard and logit interval replaced by the t
    interval on the raw scale (what the report printed before; the same SEs), the low world's
    classes of 3 to 18 cases at 50 cases fall below 91% coverage."""
    from lexpilot_batch.report.statistics import inference, proportions

    def raw_t(estimate: float, se: float, df: int, bounds: tuple[float, float], level: float = 0.95):
        half = inference.t_quantile(0.5 + level / 2.0, df) * se
        return max(bounds[0], estimate - half), min(bounds[1], estimate + half)

    monkeypatch.setattr(proportions, "logit_t", raw_t)
    monkeypatch.setattr(
        proportions,
        "korn_graubard",
        lambda p, se, trials, clusters, level=0.95, df=None: raw_t(p, se, clusters - 1, (0.0, 1.0), level),
    )
    monkeypatch.setattr(inference, "kurtosis_df", lambda values: len(values) - 1)
    cell = calibration.run_cell("low", "weak", "3v3", 50, 150, 300)
    coverage = {metric: hit / total for metric, (hit, total) in _rates(cell, "class").items()}
    assert min(coverage.values()) < 0.91, coverage
