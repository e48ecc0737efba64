"""The report: per-run metrics then mean and sample SD, grouping, the JSON shape, every renderer."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import pytest

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import FORMATS, TaskRecords, build_report, latex_escape, render
from lexpilot_batch.util.text import display_width
from tests.helpers.report_runs import CONTRACT, FAMILY, dcg, lca, ljp, run, two_runs, with_cases

SQRT2 = math.sqrt(2)


def only_group(report: dict) -> dict:
    assert len(report["groups"]) == 1
    return report["groups"][0]


def test_metrics_are_computed_per_run_then_averaged():
    group = only_group(build_report(two_runs()))
    assert group["runs"] == ["run1", "run2"]
    assert group["n_runs"] == 2
    macro = group["tasks"]["lca"]["overall"]["macro_f1"]
    assert macro["per_run"] == {"run1": pytest.approx(11 / 15), "run2": pytest.approx(1 / 3)}
    assert macro["mean"] == pytest.approx((11 / 15 + 1 / 3) / 2)
    assert macro["sd"] == pytest.approx((11 / 15 - 1 / 3) / SQRT2)  # ddof=1 of two values
    assert macro["n_defined"] == 2
    acc_c = group["tasks"]["lca"]["overall"]["acc_c"]
    assert (acc_c["mean"], acc_c["sd"]) == (pytest.approx(0.75), pytest.approx(0.5 / SQRT2))
    rate = group["tasks"]["dcg"]["overall"]["success_rate"]
    assert rate["per_run"] == {"run1": pytest.approx(1 / 3), "run2": pytest.approx(2 / 3)}
    assert (rate["mean"], rate["sd"]) == (pytest.approx(0.5), pytest.approx((1 / 3) / SQRT2))


def test_macro_f1_is_not_pooled_over_runs():
    # Pooling both runs' labels would give TP=2 FP=1 FN=2 TN=3: Macro = (4/7 + 6/9)/2 = 0.619,
    # not the 0.533 of averaging per-run scores.
    macro = only_group(build_report(two_runs()))["tasks"]["lca"]["overall"]["macro_f1"]
    assert macro["mean"] != pytest.approx((4 / 7 + 6 / 9) / 2)


def test_by_class_metrics_cover_only_represented_classes():
    tasks = only_group(build_report(two_runs()))["tasks"]
    assert list(tasks["lca"]["by_class"]) == [CONTRACT, FAMILY]
    assert list(tasks["ljp_direct"]["by_class"]) == [FAMILY]
    contract = tasks["lca"]["by_class"][CONTRACT]
    assert contract["macro_f1"]["per_run"] == {"run1": pytest.approx(1 / 3), "run2": 0.0 + 1 / 3}
    assert contract["f1_c"]["per_run"] == {"run1": 0.0, "run2": pytest.approx(2 / 3)}
    family = tasks["lca"]["by_class"][FAMILY]
    assert family["f1_u"]["per_run"] == {"run1": 1.0, "run2": 0.0}
    dcg_classes = tasks["dcg"]["by_class"]
    assert dcg_classes[CONTRACT]["success_rate"]["per_run"] == {"run1": 0.0, "run2": 1.0}


def test_undefined_runs_are_excluded_and_counted():
    qwk = only_group(build_report(two_runs()))["tasks"]["ljp_direct"]["overall"]["qwk"]
    assert qwk["per_run"] == {"run1": None, "run2": pytest.approx(0.0)}
    assert qwk["mean"] == pytest.approx(0.0)
    assert qwk["sd"] is None
    assert qwk["n_defined"] == 1


def test_n_counts_histories_cases_and_claims():
    tasks = only_group(build_report(two_runs()))["tasks"]
    assert tasks["lca"]["n"] == {"run1": 4, "run2": 4}
    assert tasks["dcg"]["n"] == {"run1": 3, "run2": 3}
    assert tasks["ljp_direct"]["n"] == {"run1": 2, "run2": 2}


def test_tasks_absent_from_every_run_are_omitted_and_partly_run_tasks_kept():
    tasks = only_group(build_report(two_runs()))["tasks"]
    assert list(tasks) == ["lca", "dcg", "ljp_direct", "ljp_gold"]
    gold = tasks["ljp_gold"]
    assert gold["n"] == {"run1": 2}
    # gold 0,2 predicted 2,2 again: QWK 0, accuracy 1/2; one run, so no SD.
    accuracy = gold["overall"]["accuracy"]
    assert {k: accuracy[k] for k in ("mean", "sd", "n_defined", "per_run", "n")} == {
        "mean": 0.5,
        "sd": None,
        "n_defined": 1,
        "per_run": {"run1": 0.5},
        "n": {"run1": 2},
    }
    report = build_report(two_runs())
    for fmt in ("table", "markdown", "latex"):
        assert "run in 1 of the group's 2 runs only (run1)" in render(report, fmt)


def test_runs_with_different_group_keys_are_never_pooled():
    runs = [
        run("run1", {"dcg": dcg((FAMILY, True))}, group_key="g1"),
        run("run2", {"dcg": dcg((FAMILY, False))}, group_key="g2"),
        run("run1", {"dcg": dcg((FAMILY, False))}, group_key="g1", model="model-0"),
    ]
    groups = build_report(runs)["groups"]
    assert [(g["model"], g["group_key"], g["runs"]) for g in groups] == [
        ("model-0", "g1", ["run1"]),
        ("model-a", "g1", ["run1"]),
        ("model-a", "g2", ["run2"]),
    ]
    for group in groups:
        rate = group["tasks"]["dcg"]["overall"]["success_rate"]
        assert rate["sd"] is None
        assert rate["mean"] == rate["per_run"][group["runs"][0]]


def test_runs_are_sorted_naturally_and_duplicates_refused():
    runs = [run(f"run{i}", {"dcg": dcg((FAMILY, True))}) for i in (10, 2, 1)]
    assert only_group(build_report(runs))["runs"] == ["run1", "run2", "run10"]
    with pytest.raises(LexpilotError, match="run2"):
        build_report([*runs, run("run2", {})])


def test_single_run_has_undefined_sd():
    group = only_group(build_report([two_runs()[1]]))
    for task in group["tasks"].values():
        for summary in task["overall"].values():
            assert summary["sd"] is None


def test_json_shape_is_exactly_as_documented():
    report = build_report(two_runs(), prices={"eval": {"input": 1, "output": 2}})
    assert set(report) == {"groups", "comparisons", "bootstrap", "plan"}
    assert report["plan"] is None  # without --plan
    assert set(report["bootstrap"]) == {"resamples", "seed", "level", "method", "test", "adjust", "thresholds"}
    group = only_group(report)
    assert set(group) == {
        "model",
        "user_model",
        "judge_model",
        "group_key",
        "comparison_key",
        "runs",
        "n_runs",
        "settings",
        "cases",
        "bundled_sample",
        "warnings",
        "tasks",
        "interaction",
        "usage",
    }
    assert group["cases"] == {"total": 5, "by_class": {CONTRACT: 3, FAMILY: 2}}
    assert set(group["interaction"]) == {"dcg"}
    assert set(group["interaction"]["dcg"]) == {"n", "success_by_round"}
    assert group["settings"] == {"temperature": 0.7, "max_tokens": 8192}
    assert group["bundled_sample"] is False
    for task in group["tasks"].values():
        assert set(task) == {"overall", "by_class", "n", "partial", "missing", "failed"}
        for summaries in [task["overall"], *task["by_class"].values()]:
            for summary in summaries.values():
                assert set(summary) == {
                    "mean",
                    "sd",
                    "n_defined",
                    "per_run",
                    "n",
                    "cases",
                    "se",
                    "ci",
                    "ci_reason",
                    "variance",
                }
                assert summary["variance"] is None or set(summary["variance"]) == {"per_case", "between", "within"}
                assert summary["ci"] is None or set(summary["ci"]) == {
                    "low",
                    "high",
                    "method",
                    "cases",
                    "df",
                    "resamples",
                }
    assert set(group["tasks"]["lca"]["overall"]) == {"macro_f1", "f1_u", "f1_c", "acc_c", "acc_u"}
    assert set(group["tasks"]["dcg"]["overall"]) == {"success_rate"}
    assert set(group["tasks"]["ljp_direct"]["overall"]) == {"qwk", "accuracy"}
    assert set(group["usage"]) == {"roles", "total", "batch_discount"}
    assert set(group["usage"]["total"]) == {
        "requests",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "cost_usd",
    }
    # It is plain JSON: a round trip changes nothing.
    assert json.loads(json.dumps(report)) == report


def test_partial_tasks_name_their_missing_and_failed_cases():
    runs = [
        run("run1", {"ljp_gold": ljp((FAMILY, [("支持", "支持")]), missing=["12", "3"], failed=["9"])}),
        run("run2", {"ljp_gold": ljp((FAMILY, [("支持", "驳回")]))}),
    ]
    group = only_group(build_report(runs))
    task = group["tasks"]["ljp_gold"]
    assert task["partial"] is True
    assert task["missing"] == {"run1": ["3", "12"], "run2": []}
    assert task["failed"] == {"run1": ["9"], "run2": []}
    complete = only_group(build_report(two_runs()))["tasks"]["lca"]
    assert complete["partial"] is False
    report = build_report(runs)
    for fmt in ("table", "markdown", "latex"):
        assert "partial: 2 cases missing, 1 case failed (run1: 3, 12, 9)" in render(report, fmt)
    assert {row["partial"] for row in csv.DictReader(io.StringIO(render(report, "csv")))} == {"true"}
    # An LCA case stands for two histories: counted as cases, its histories said beside.
    records = lca((FAMILY, "complete", "judgment"))
    records.missing.extend(["4 (c)", "4 (u)", "5 (u)"])
    histories = build_report([run("run1", {"lca": records})])
    assert "partial: 2 cases missing (3 histories) (run1: " in render(histories, "table")


def test_cost_uses_prices_per_million_tokens_and_the_batch_discount():
    prices = {"eval": {"input": 2.0, "output": 8.0}, "judge": {"input": 1.0, "output": 4.0}}
    usage = only_group(build_report(two_runs(), prices))["usage"]
    assert list(usage["roles"]) == ["eval", "judge"]
    eval_usage = usage["roles"]["eval"]
    assert (eval_usage["requests"], eval_usage["prompt_tokens"], eval_usage["completion_tokens"]) == (
        8,
        1_000_000,
        250_000,
    )
    # (1M * $2 + 0.25M * $8) / 1M = $4 list price, half with the batch discount.
    assert eval_usage["cost_usd"] == pytest.approx(2.0)
    # (10k * $1 + 1k * $4) / 1M = $0.014, half of it.
    assert usage["roles"]["judge"]["cost_usd"] == pytest.approx(0.007)
    assert usage["total"]["cost_usd"] == pytest.approx(2.007)
    assert usage["total"]["requests"] == 12
    assert usage["batch_discount"] == 0.5
    full = only_group(build_report(two_runs(), prices, batch_discount=0))["usage"]
    assert full["roles"]["eval"]["cost_usd"] == pytest.approx(4.0)


def test_cost_is_the_estimates_formula_per_backend():
    """Sync work is at list price, batch work at the discount, manual work unpriced: the report
    costs tokens exactly as the estimate projects them (`prices.cost_usd`)."""
    from lexpilot_batch.providers.prices import cost_usd

    price = {"input": 2.0, "output": 8.0}
    mixed = {
        "batch": {"requests": 2, "prompt_tokens": 300_000, "completion_tokens": 50_000},
        "sync": {"requests": 1, "prompt_tokens": 100_000, "completion_tokens": 20_000},
    }
    runs = [run("run1", {"dcg": dcg((FAMILY, True))}, usage={"eval": mixed})]
    usage = only_group(build_report(runs, {"eval": price}))["usage"]
    batch, sync = cost_usd(300_000, 50_000, price, "batch"), cost_usd(100_000, 20_000, price, "sync")
    assert batch is not None and sync is not None
    expected = batch + sync
    assert usage["roles"]["eval"]["cost_usd"] == pytest.approx(expected) == pytest.approx(0.5 * 1.0 + 0.36)
    assert usage["roles"]["eval"]["requests"] == 3
    local = [run("run1", {"dcg": dcg((FAMILY, True))}, usage={"eval": {**mixed, "manual": mixed["sync"]}})]
    assert only_group(build_report(local, {"eval": price}))["usage"]["roles"]["eval"]["cost_usd"] is None


def test_cost_is_undefined_without_a_price():
    usage = only_group(build_report(two_runs()))["usage"]
    assert usage["roles"]["eval"]["cost_usd"] is None
    assert usage["total"]["cost_usd"] is None
    assert usage["batch_discount"] is None
    partial_prices = {"eval": {"input": 2.0, "output": 8.0}}
    usage = only_group(build_report(two_runs(), partial_prices))["usage"]
    assert usage["roles"]["judge"]["cost_usd"] is None
    assert usage["total"]["cost_usd"] is None  # a total that leaves a role out would mislead


def test_bad_prices_and_records_are_refused_with_the_place_named():
    with pytest.raises(LexpilotError, match="eval"):
        build_report(two_runs(), {"eval": {"input": 1.0}})
    bad = run("run7", {"lca": lca((FAMILY, "complete", "maybe"))})
    with pytest.raises(LexpilotError, match="run7"):
        build_report([bad])
    with pytest.raises(LexpilotError, match="ljp_other"):
        build_report([run("run1", {"ljp_other": TaskRecords()})])


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_renderer_shows_the_metric_values(fmt):
    out = render(build_report(two_runs()), fmt)
    # LCA Macro-F1 mean 0.5333 and SD 0.2828; DCG mean 0.5000 and SD 0.2357 (LaTeX: x100).
    numbers = ("53.3", "28.3", "23.6") if fmt == "latex" else ("0.5333", "0.2828", "0.2357")
    for text in (*numbers, "model-a", FAMILY, CONTRACT):
        assert text in out


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_text_formats_use_four_decimals_and_plus_minus(fmt):
    out = render(build_report(two_runs()), fmt)
    assert "0.5333 ± 0.2828" in out
    assert "0.5333333" not in out


def test_latex_shows_percentages_with_one_decimal():
    out = render(build_report(two_runs()), "latex")
    assert r"53.3$\pm$28.3" in out
    assert "0.5333" not in out and "x100" in out


def test_undefined_is_rendered_as_undefined_never_as_zero_or_nan():
    # Every claim 支持 in both runs: QWK undefined in each run, so its mean is undefined too.
    same_label = ljp((FAMILY, [("支持", "支持"), ("支持", "支持")]))
    report = build_report([run("run1", {"ljp_gold": same_label}), run("run2", {"ljp_gold": same_label})])
    qwk = only_group(report)["tasks"]["ljp_gold"]["overall"]["qwk"]
    assert qwk == {
        "mean": None,
        "sd": None,
        "n_defined": 0,
        "per_run": {"run1": None, "run2": None},
        "n": {"run1": 2, "run2": 2},
        "cases": 1,
        "se": None,
        "ci": None,
        "ci_reason": None,  # undefined needs no reason beyond itself
        "variance": None,
    }
    table = render(report, "table")
    overall = next(line for line in table.splitlines() if line.lstrip().startswith("overall"))
    assert overall.split()[-5:] == ["2", "—", "1.0000", "±", "0.0000"]
    assert "— undefined: its denominator is zero" in table
    markdown = render(report, "markdown")
    assert "| model-a | 2 | undefined |" in markdown  # the main table: Gold LJP QWK
    assert "| overall (1 case) | model-a | 2 | undefined | 1.0000 ± 0.0000 [few cases] |" in markdown
    assert "- undefined: its denominator is zero" in markdown
    latex = render(report, "latex")
    assert r"model-a & 2 & -- \\" in latex
    assert r"model-a & 100.0$\pm$0.0 \\" in latex  # accuracy in the table of the other metrics
    assert "--: undefined" in latex
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    qwk = {r["run"]: r["value"] for r in rows if r["metric"] == "qwk" and r["class"] == "overall"}
    assert qwk == {"run1": "", "run2": "", "mean": "", "sd": ""}  # no interval either
    assert '"mean": null' in render(report, "json")
    for fmt in FORMATS:
        assert "nan" not in render(report, fmt).lower()


def test_a_task_with_no_finished_record_reads_no_records_not_undefined():
    # `--partial` while none of Gold LJP's cases has finished: there is nothing to score, which is
    # not a metric with a zero denominator.
    nothing = ljp(missing=["1", "2"])
    report = build_report([run("run1", {"ljp_gold": nothing, "dcg": dcg((FAMILY, True))})])
    assert only_group(report)["tasks"]["ljp_gold"]["n"] == {"run1": 0}
    markdown = render(report, "markdown")
    assert "| model-a | 1 | 1.0000 | n/a † |" in markdown  # the main table: Gold LJP's QWK
    assert "| overall (1 case) | model-a | 0 | n/a † | n/a † |" in markdown  # Gold LJP's own table
    assert "undefined" not in markdown
    assert "- n/a: no records (task not run, none of its cases finished, or class not represented in it)." in markdown
    table = render(report, "table")
    gold = table.split("Gold LJP (")[1].splitlines()
    assert gold[2].split() == ["overall", "(1", "case)", "model-a", "0", "n/a", "*", "n/a", "*"]
    assert "—" not in table and "n/a: no records" in table
    latex = render(report, "latex")
    assert r"model-a & 1 & 100.0 & n/a$^\dagger$ \\" in latex and "--: undefined" not in latex
    assert r"婚姻家庭 & model-a & 1 & 100.0 & n/a$^\dagger$ \\" in latex
    html = render(report, "html")
    assert "n/a †" in html and "n/a: no records" in html and ">undefined<" not in html


def test_interaction_statistics_with_no_finished_case_read_no_records_not_undefined():
    waiting = run("run1", {"ljp_interaction": ljp(missing=["1"]), "dcg": TaskRecords(missing=["2"])})
    report = build_report([waiting])
    assert only_group(report)["interaction"]["dcg"]["n"] == {"run1": 0}
    table = render(report, "table")
    rounds = table.split("DCG: success by round")[1].splitlines()[2].split()
    assert rounds == ["model-a", "0", "n/a", "n/a"]
    assert "—" not in table  # nothing is undefined: there is nothing at all
    ended = render(report, "markdown").split("## Interaction LJP: rounds used")[1]
    assert "| model-a | 0 | n/a | n/a | n/a | n/a | n/a |" in ended
    latex = render(report, "latex").split("tab:lexpilot-classes")[-1]
    assert r"model-a & n/a & n/a & n/a & n/a & n/a & n/a & n/a \\" in latex and "--: undefined" not in latex


def test_a_group_of_the_bundled_sample_says_so_in_every_format():
    sample = run("run1", {"dcg": dcg((FAMILY, True))})
    sample.bundled_sample = True
    report = build_report([sample, run("run1", {"dcg": dcg((FAMILY, True))}, model="model-b")])
    assert [g["bundled_sample"] for g in report["groups"]] == [True, False]
    # Table, Markdown and HTML: above the tables and in the group's remarks; LaTeX: in the comments
    # and under each of its tables that show the group (main, per class, comparisons, interaction).
    for fmt, times in (("table", 2), ("markdown", 2), ("html", 2), ("latex", 5)):
        assert render(report, fmt).count("not a user-supplied dataset") == times, fmt
    assert render(report, "table").splitlines()[3].startswith("!! model-a: dataset: the bundled sample")
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    assert {(r["model"], r["bundled_sample"]) for r in rows} == {("model-a", "true"), ("model-b", "false")}
    assert {r["task"] for r in rows if r["bundled_sample"] == "true"} == {"dcg"}  # metric and interaction rows
    assert json.loads(render(report, "json"))["groups"][0]["bundled_sample"] is True


def test_a_mean_over_fewer_runs_says_so():
    report = build_report(two_runs())  # ljp_direct QWK is defined in run2 only
    assert "0.0000 [1/2]" in render(report, "table")
    assert "0.0000 [1/2]" in render(report, "markdown")
    assert r"0.0\,[1/2]" in render(report, "latex")


def test_csv_is_tidy_one_numeric_value_per_row():
    rows = list(csv.DictReader(io.StringIO(render(build_report(two_runs()), "csv"))))
    assert list(rows[0]) == ["model", "user_model", "judge_model", "group_key", "run", "task", "class", "metric",
                             "value", "n", "unit", "partial", "bundled_sample", "cases", "few_cases"]  # fmt: skip
    for row in rows:
        assert row["value"] == "" or math.isfinite(float(row["value"]))
        assert "undefined" not in row.values()
    macro = {r["run"]: r for r in rows if (r["task"], r["class"], r["metric"]) == ("lca", "overall", "macro_f1")}
    # 4 cases (2 per class): too few for an interval, and every row says so.
    assert list(macro) == ["run1", "run2", "mean", "sd"]
    assert {(r["cases"], r["few_cases"]) for r in macro.values()} == {("4", "true")}
    assert float(macro["run1"]["value"]) == pytest.approx(11 / 15)
    assert (macro["run1"]["n"], macro["run1"]["unit"]) == ("4", "histories")
    assert float(macro["mean"]["value"]) == pytest.approx(8 / 15)
    assert (macro["mean"]["n"], macro["mean"]["unit"]) == ("2", "runs")
    six = [run(f"run{i}", {"dcg": dcg(*[(FAMILY, k % i == 0) for k in range(6)])}) for i in (1, 2)]
    rows6 = list(csv.DictReader(io.StringIO(render(build_report(six), "csv"))))
    success = {r["run"]: r for r in rows6 if (r["class"], r["metric"]) == ("overall", "success_rate")}
    assert list(success) == ["run1", "run2", "mean", "sd", "se", "ci_low", "ci_high", "var_between", "var_within"]
    kinds = ("se", "ci_low", "ci_high", "var_between", "var_within")
    assert {(success[k]["n"], success[k]["unit"]) for k in kinds} == {("6", "cases")}
    assert success["se"]["few_cases"] == "false"
    qwk = {
        r["run"]: r["value"] for r in rows if (r["task"], r["class"], r["metric"]) == ("ljp_direct", "overall", "qwk")
    }
    assert qwk["run1"] == "" and float(qwk["run2"]) == 0.0
    assert {r["class"] for r in rows} == {"overall", FAMILY, CONTRACT}
    assert {r["metric"] for r in rows if r["task"] == "dcg"} == {
        "success_rate",
        "success_by_round_1",
        "success_by_round_2",
    }


def test_csv_holds_every_number_of_the_json():
    """The tidy CSV read back gives exactly the JSON's per-run values, means, SDs, intervals and n."""
    runs = [*two_runs(), run("run1", {"dcg": dcg((FAMILY, True), (FAMILY, False))}, model="model-b")]
    report = build_report(runs)
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))

    def number(text: str) -> float | None:
        return None if text == "" else float(text)

    from_csv: dict[tuple, float | None] = {}
    for r in rows:
        key: tuple[Any, ...] = (r["model"], r["task"], r["class"], r["metric"], r["run"])
        assert key not in from_csv, key
        from_csv[key] = number(r["value"])
        from_csv[key + ("n",)] = int(r["n"])
    expected: dict[tuple, float | None] = {}
    for g in report["groups"]:
        for task_name, task in g["tasks"].items():
            for cls, summaries in [("overall", task["overall"]), *task["by_class"].items()]:
                for metric, s in summaries.items():
                    key = (g["model"], task_name, cls, metric)
                    for run_id, value in s["per_run"].items():
                        expected[key + (run_id,)] = value
                        expected[
                            key
                            + (
                                run_id,
                                "n",
                            )
                        ] = s["n"][run_id]
                    for stat in ("mean", "sd"):
                        expected[key + (stat,)] = s[stat]
                        expected[
                            key
                            + (
                                stat,
                                "n",
                            )
                        ] = s["n_defined"]
                    if s["ci"] is not None:
                        for end in ("low", "high"):
                            expected[key + (f"ci_{end}",)] = s["ci"][end]
                            expected[
                                key
                                + (
                                    f"ci_{end}",
                                    "n",
                                )
                            ] = s["ci"]["resamples"]
        dcg_rounds = g["interaction"]["dcg"]
        for k, s in dcg_rounds["success_by_round"].items():
            key = (g["model"], "dcg", "overall", f"success_by_round_{k}")
            for run_id, value in s["per_run"].items():
                expected[key + (run_id,)] = value
                expected[
                    key
                    + (
                        run_id,
                        "n",
                    )
                ] = dcg_rounds["n"][run_id]
            for stat in ("mean", "sd"):
                expected[key + (stat,)] = s[stat]
                expected[
                    key
                    + (
                        stat,
                        "n",
                    )
                ] = s["n_defined"]
    assert from_csv == expected  # repr() round-trips floats exactly


def test_json_renders_chinese_unescaped_and_round_trips():
    report = build_report(two_runs())
    out = render(report, "json")
    assert FAMILY in out
    assert json.loads(out) == report
    assert render(json.loads(out), "table") == render(report, "table")


def test_table_columns_line_up_with_cjk_class_names():
    assert display_width(FAMILY) == 8
    assert display_width("ab±—") == 4
    lines = render(build_report(two_runs()), "table").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("LCA (n = histories per run"))
    grid = lines[start + 1 : start + 8]  # header, then overall and the two classes, each with its interval
    assert grid[1].lstrip().startswith("overall") and grid[2].lstrip().startswith("[")
    assert len({display_width(line) for line in grid}) == 1
    # The first value column ends at the same display column on every row.
    ends = {display_width(line[: line.index("0.") + 6]) for line in grid[1::2]}
    assert len(ends) == 1


def test_latex_escapes_and_uses_booktabs():
    assert latex_escape("a_b&c%d$e#f{g}h~i^j\\k") == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k"
    )
    runs = [run("run1", {"dcg": dcg((FAMILY, True))}, model="org/gpt_4o&x")]
    out = render(build_report(runs), "latex")
    assert r"org/gpt\_4o\&x" in out
    for rule in (r"\toprule", r"\midrule", r"\bottomrule"):
        assert rule in out


def test_latex_has_a_compact_main_table_and_a_per_class_table():
    runs = [*two_runs(), run("run1", {"dcg": dcg((FAMILY, True))}, model="model-b")]
    out = render(build_report(runs), "latex")
    tables = out.split(r"\begin{table")[1:]
    main = tables[0]
    assert main.startswith("}[t]") and r"max width=\columnwidth" in main  # one column of the paper
    # Model, n, and one headline metric per task: LCA Macro-F1, DCG, Direct and Gold QWK.
    assert r"\begin{tabular}{lrcccc}" in main
    assert "model-a & 2 & 53.3$\\pm$28.3 & 50.0$\\pm$23.6" in main
    by_class = next(t for t in tables if "tab:lexpilot-classes" in t)
    assert by_class.startswith("*}[t]")  # page-wide
    assert f"{CONTRACT} & model-a & 3 & 33.3$\\pm$0.0" in by_class
    assert all(t.count(r"\begin{tabular}") == 1 for t in tables)
    assert max(t.split(r"\begin{tabular}{")[1].split("}")[0].__len__() for t in tables) <= 9


def test_markdown_shows_models_side_by_side():
    runs = [*two_runs(), run("run1", {"dcg": dcg((FAMILY, True))}, model="model-b")]
    out = render(build_report(runs), "markdown")
    main = out.split("## Main results")[1].split("## ")[0]
    assert "| Model | Runs | LCA Macro-F1 | DCG Success | Direct LJP QWK | Gold LJP QWK |" in main
    assert "| model-a | 2 | 0.5333 ± 0.2828 | 0.5000 ± 0.2357 |" in main
    assert "| model-b | 1 | n/a | 1.0000 |" in main
    dcg_table = out.split("## DCG\n")[1].split("## ")[0]
    # Overall, then each class, the two models on adjacent rows, with n and the interval.
    assert "| overall | model-a | 3 | 0.5000 ± 0.2357 [" in dcg_table
    assert "|  | model-b | 1 | 1.0000 [few cases] |" in dcg_table  # one case: no interval of width 0
    assert f"| {FAMILY} | model-a | 1 |" in dcg_table  # the models scored different cases: no count


def test_render_refuses_unknown_formats_and_foreign_shapes():
    report = build_report(two_runs())
    with pytest.raises(LexpilotError, match="markdown"):
        render(report, "docx")
    with pytest.raises(LexpilotError, match="shape"):
        render({"groups": [{"model": "m"}]}, "table")


def test_empty_report_renders():
    report = build_report([])
    assert report["groups"] == [] and report["comparisons"] == []
    for fmt in FORMATS:
        assert render(report, fmt)


def interaction(*cases: tuple[str, str]) -> TaskRecords:
    """(class, stop reason) per case, one claim each."""
    return with_cases(
        [
            (cls, {"case_number": f"{cls}{i}", "claims": [{"gold": "支持", "predicted": "支持"}], "stop_reason": stop})
            for i, (cls, stop) in enumerate(cases)
        ]
    )


def test_interaction_statistics_are_shares_per_run_then_mean_and_sd():
    r1, r2, r3, forced = "judgment_round_1", "judgment_round_2", "judgment_round_3", "forced_final_prediction"
    runs = [
        run("run1", {"ljp_interaction": interaction((FAMILY, r1), (FAMILY, r1), (CONTRACT, forced))}),
        run("run2", {"ljp_interaction": interaction((FAMILY, r2), (FAMILY, r3), (CONTRACT, r1))}),
    ]
    stats = only_group(build_report(runs))["interaction"]
    assert set(stats) == {"ljp_interaction"}
    s = stats["ljp_interaction"]
    assert s["n"] == {"run1": 3, "run2": 3}
    assert s["stop_reasons"][r1]["per_run"] == {"run1": pytest.approx(2 / 3), "run2": pytest.approx(1 / 3)}
    assert s["stop_reasons"][r1]["mean"] == pytest.approx(0.5)
    assert s["stop_reasons"][forced]["per_run"] == {"run1": pytest.approx(1 / 3), "run2": 0.0}
    # New responses: run1 (1 + 1 + 4) / 3 = 2, run2 (2 + 3 + 1) / 3 = 2.
    assert s["responses"] == {"mean": 2.0, "sd": 0.0, "n_defined": 2, "per_run": {"run1": 2.0, "run2": 2.0}}
    # DCG by round, from two_runs(): run1 succeeds on 1 of 3 cases, run2 on 2 of 3, all in round 2.
    dcg_rounds = only_group(build_report(two_runs()))["interaction"]["dcg"]["success_by_round"]
    assert dcg_rounds["1"]["per_run"] == {"run1": 0.0, "run2": 0.0}
    assert dcg_rounds["2"]["per_run"] == {"run1": pytest.approx(1 / 3), "run2": pytest.approx(2 / 3)}
    for fmt in ("table", "markdown", "latex", "html"):
        out = render(build_report(runs), fmt)
        assert "forced final prediction" in out or "Forced" in out, fmt
