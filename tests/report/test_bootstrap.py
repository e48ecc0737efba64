"""Bootstrap intervals and model comparisons, checked against an independent bootstrap
(`independent_bootstrap`) with the same seed, and against a pair worked out by hand."""

from __future__ import annotations

import random
from typing import Any

import pytest
from independent_bootstrap import bootstrap, p_value, replicates

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import RunResults, TaskRecords, build_report
from lexpilot_batch.report.bootstrap import DEFAULT_RESAMPLES

VERDICTS = ("支持", "部分支持", "驳回")
CLASSES = ("合同纠纷", "婚姻家庭", "劳动争议")
STOPS = ("judgment_round_1", "judgment_round_2", "judgment_round_3", "forced_final_prediction")


def synthetic(models=("model-a", "model-b"), n_runs=3, n_cases=20, seed=1, comparison_key="c1"):
    """Random finished records of every task: RunResults for the report, and the same records in
    the independent bootstrap's plain shape."""
    rng = random.Random(seed)
    # Classes of unequal size; the last has two cases only, so some resamples leave a metric undefined.
    cls_of = {
        str(i): CLASSES[0] if i < n_cases // 2 else CLASSES[1] if i < n_cases - 2 else CLASSES[2]
        for i in range(n_cases)
    }
    claims = {case: [rng.choice(VERDICTS) for _ in range(rng.randint(1, 3))] for case in cls_of}
    runs, plain = [], []
    for model in models:
        skill = rng.random()
        plain_group = []
        for r in range(n_runs):
            tasks: dict[str, TaskRecords] = {t: TaskRecords() for t in ("lca", "dcg", "ljp_gold", "ljp_interaction")}
            rows: dict[str, list] = {t: [] for t in tasks}

            def add(task, case, record, tasks=tasks, rows=rows):
                tasks[task].records.append((cls_of[case], record))
                tasks[task].cases.append(case)
                rows[task].append((case, cls_of[case], record))

            for case in cls_of:
                for history in ("complete", "underspecified"):
                    label = rng.choice(("judgment", "clarification"))
                    add("lca", case, {"history_type": history, "label": label})
                decisions = [rng.choice("是否"), rng.choice("是否")]
                add("dcg", case, {"success": "是" in decisions, "decisions": decisions})
                for task in ("ljp_gold", "ljp_interaction"):
                    verdicts = [g if rng.random() < skill else rng.choice(VERDICTS) for g in claims[case]]
                    record: dict[str, Any] = {
                        "claims": [{"gold": g, "predicted": p} for g, p in zip(claims[case], verdicts, strict=True)]
                    }
                    if task == "ljp_interaction":
                        record["stop_reason"] = rng.choice(STOPS)
                    add(task, case, record)
            runs.append(
                RunResults(
                    run_id=f"run{r + 1}",
                    model=model,
                    user_model="user",
                    judge_model="judge",
                    group_key=f"g-{model}",
                    comparison_key=comparison_key,
                    tasks=tasks,
                )
            )
            plain_group.append({"run_id": f"run{r + 1}", "tasks": rows})
        plain.append(plain_group)
    return runs, plain


def summaries(report: dict):
    """(group index, task, scope, metric) -> summary, scope None for overall."""
    for gi, group in enumerate(report["groups"]):
        for task_name, task in group["tasks"].items():
            for scope, by_metric in [(None, task["overall"]), *task["by_class"].items()]:
                for metric, summary in by_metric.items():
                    yield (gi, task_name, scope, metric), summary


def test_every_interval_equals_an_independent_bootstrap_with_the_same_seed():
    runs, plain = synthetic()
    report = build_report(runs, resamples=300, seed=7)
    expected = bootstrap(plain, resamples=300, seed=7)
    seen = 0
    for key, summary in summaries(report):
        want = expected[key]
        if summary["mean"] is None:
            assert summary["ci"] is None
            continue
        assert summary["ci"] is not None and want is not None, key
        assert summary["ci"]["resamples"] == want["resamples"], key
        assert summary["ci"]["low"] == pytest.approx(want["low"], abs=1e-12), key
        assert summary["ci"]["high"] == pytest.approx(want["high"], abs=1e-12), key
        assert summary["ci"]["low"] <= summary["ci"]["high"]
        seen += 1
    # Two models x (lca 5 + dcg 1 + two LJP tasks x 2 metrics) x (overall + 3 classes), less undefined ones.
    assert seen >= 2 * 10 * 3
    assert any(s["ci"]["resamples"] < 300 for _, s in summaries(report) if s["ci"])  # the two-case class


def test_comparisons_equal_an_independent_paired_bootstrap():
    runs, plain = synthetic(models=("model-a", "model-b", "model-c"))
    report = build_report(runs, resamples=200, seed=3)
    reps = replicates(plain, resamples=200, seed=3)
    pairs = [(c["a"]["model"], c["b"]["model"]) for c in report["comparisons"]]
    assert pairs == [("model-a", "model-b"), ("model-a", "model-c"), ("model-b", "model-c")]
    index = {g["model"]: i for i, g in enumerate(report["groups"])}
    for comparison in report["comparisons"]:
        a, b = index[comparison["a"]["model"]], index[comparison["b"]["model"]]
        assert comparison["cases"] == 20 and comparison["partial"] is False
        assert set(comparison["tasks"]) == {"lca", "dcg", "ljp_gold", "ljp_interaction"}
        for task_name, metrics in comparison["tasks"].items():
            for metric, d in metrics.items():
                mean_a = report["groups"][a]["tasks"][task_name]["overall"][metric]["mean"]
                mean_b = report["groups"][b]["tasks"][task_name]["overall"][metric]["mean"]
                assert (d["a"], d["b"]) == (mean_a, mean_b)
                assert d["difference"] == pytest.approx(mean_a - mean_b)
                diffs = [
                    None if x is None or y is None else x - y
                    for x, y in zip(reps[(a, task_name, None, metric)], reps[(b, task_name, None, metric)], strict=True)
                ]
                defined = sorted(x for x in diffs if x is not None)
                assert d["ci"]["resamples"] == len(defined)
                assert d["ci"]["low"] == pytest.approx(bootstrap_interval(defined)[0], abs=1e-12)
                assert d["ci"]["high"] == pytest.approx(bootstrap_interval(defined)[1], abs=1e-12)
                assert d["p_value"] == pytest.approx(p_value(diffs))


def bootstrap_interval(defined: list[float]) -> tuple[float, float]:
    from independent_bootstrap import interval

    found = interval(defined)
    assert found is not None
    return found["low"], found["high"]


def dcg_runs(model: str, rates: list[list[bool]]) -> list[RunResults]:
    """One run per list of per-case successes, cases "1".."n" in one class."""
    runs = []
    for r, successes in enumerate(rates):
        records = [("合同纠纷", {"success": s, "decisions": ["否", "是" if s else "否"]}) for s in successes]
        tasks = {"dcg": TaskRecords(records=records, cases=[str(i + 1) for i in range(len(successes))])}
        runs.append(RunResults(f"run{r + 1}", model, "u", "j", f"g-{model}", comparison_key="same", tasks=tasks))
    return runs


def test_a_pair_worked_out_by_hand():
    # A succeeds on every case in both runs, B on none: every resample gives A - B = 1, so the
    # interval is [1, 1] and only the "+1" of the p-value is left: p = 2 * 1 / (1 + 500).
    a = dcg_runs("A", [[True, True, True], [True, True, True]])
    b = dcg_runs("B", [[False, False, False], [False, False, False]])
    (comparison,) = build_report(a + b, resamples=500, seed=11)["comparisons"]
    d = comparison["tasks"]["dcg"]["success_rate"]
    assert (d["a"], d["b"], d["difference"]) == (1.0, 0.0, 1.0)
    assert d["ci"] == {"low": 1.0, "high": 1.0, "resamples": 500}
    assert d["p_value"] == pytest.approx(2 / 501)

    # A: runs at 2/3 and 1/3 (mean 1/2); B: 0 and 1/3 (mean 1/6): A - B = 1/3. Case 1 is the one
    # both of A's runs win and B's second run wins too; by hand, a resample drawing case 1 k1
    # times, case 2 k2 times and case 3 k3 times (k1 + k2 + k3 = 3) gives
    # A = (2 k1 + k2) / 6 and B = k2 / 6, so A - B = k1 / 3.
    a = dcg_runs("A", [[True, True, False], [True, False, False]])
    b = dcg_runs("B", [[False, False, False], [False, True, False]])
    (comparison,) = build_report(a + b, resamples=400, seed=5)["comparisons"]
    d = comparison["tasks"]["dcg"]["success_rate"]
    assert d["difference"] == pytest.approx(1 / 3)
    rng = random.Random(5)
    by_hand = [rng.choices(["1", "2", "3"], k=3).count("1") / 3 for _ in range(400)]
    assert d["ci"]["low"] == pytest.approx(bootstrap_interval(sorted(by_hand))[0])
    assert d["ci"]["high"] == pytest.approx(bootstrap_interval(sorted(by_hand))[1])
    below, above = sum(x <= 0 for x in by_hand), sum(x >= 0 for x in by_hand)
    assert d["p_value"] == pytest.approx(min(1.0, 2 * min(1 + below, 1 + above) / 401))
    assert below == sum(x == 0 for x in by_hand) > 0  # resamples without case 1: (2/3)^3 of them


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


def test_resamples_are_a_choice_and_zero_means_no_intervals():
    runs, _ = synthetic()
    report = build_report(runs)
    assert report["bootstrap"]["resamples"] == DEFAULT_RESAMPLES >= 1000
    assert report["bootstrap"]["level"] == 0.95
    assert "percentile bootstrap over cases" in report["bootstrap"]["method"]
    none = build_report(runs, resamples=0)
    assert all(s["ci"] is None for _, s in summaries(none))
    d = none["comparisons"][0]["tasks"]["dcg"]["success_rate"]
    assert d["difference"] is not None and d["ci"] is None and d["p_value"] is None
    # The point values do not depend on the bootstrap.
    assert [s["mean"] for _, s in summaries(none)] == [s["mean"] for _, s in summaries(report)]
    with pytest.raises(LexpilotError, match="--bootstrap"):
        build_report(runs, resamples=-1)


def test_the_same_seed_gives_the_same_intervals_and_another_seed_others():
    runs, _ = synthetic()
    one = [s["ci"] for _, s in summaries(build_report(runs, resamples=100, seed=1))]
    assert one == [s["ci"] for _, s in summaries(build_report(runs, resamples=100, seed=1))]
    assert one != [s["ci"] for _, s in summaries(build_report(runs, resamples=100, seed=2))]


def test_records_without_case_numbers_are_refused():
    runs, _ = synthetic(models=("model-a",), n_runs=1)
    runs[0].tasks["dcg"].cases.pop()
    with pytest.raises(LexpilotError, match="case number"):
        build_report(runs)
