"""The task registry: one ordered home for what the report, status and the export know of a task."""

from __future__ import annotations

from typing import Any

import pytest

from lexpilot_batch.benchmark import metrics
from lexpilot_batch.benchmark.protocols import PROTOCOLS
from lexpilot_batch.benchmark.tasks import TASK_ORDER, TASKS, in_order


def test_the_registry_names_every_protocol_in_benchmark_order():
    assert TASK_ORDER == tuple(PROTOCOLS) == ("lca", "dcg", "ljp_direct", "ljp_gold", "ljp_interaction")
    assert {t.eval_file for t in TASKS.values()} == {
        "LCA_results.jsonl",
        "DCG_results.jsonl",
        "LJP_direct.jsonl",
        "LJP_gold.jsonl",
        "LJP_interaction.jsonl",
    }
    assert len({t.generation for t in TASKS.values()}) == len(TASKS)  # no two tasks share a file


def test_in_order_puts_known_tasks_first_in_benchmark_order():
    assert in_order(["ljp_gold", "zzz", "lca", "aaa"]) == ["lca", "ljp_gold", "aaa", "zzz"]


def test_scored_keeps_what_the_report_scores_and_leaves_out_what_is_missing():
    claims = [{"claim": "判令被告偿还借款", "gold": "支持", "predicted": "驳回"}]
    assert TASKS["lca"].scored({"history_type": "complete", "label": "judgment", "history": []}) == {
        "history_type": "complete",
        "label": "judgment",
    }
    rounds = [{"question": "q1", "reply": "r1", "decision": "否"}, {"question": "q2", "decision": "是"}]
    assert TASKS["dcg"].scored({"success": True, "rounds": rounds}) == {"success": True, "decisions": ["否", "是"]}
    assert TASKS["dcg"].scored({"success": False}) == {"success": False}
    for task in ("ljp_direct", "ljp_gold", "ljp_interaction"):
        assert TASKS[task].scored({"claims": claims, "response": "x"}) == {
            "claims": [{"gold": "支持", "predicted": "驳回"}]
        }
    interaction = {"claims": claims, "response": "x", "stop_reason": "judgment_round_2", "rounds": []}
    assert TASKS["ljp_interaction"].scored(interaction) == {
        "claims": [{"gold": "支持", "predicted": "驳回"}],
        "stop_reason": "judgment_round_2",
    }
    assert TASKS["lca"].scored({"label": "judgment"}) == {"label": "judgment"}
    assert TASKS["ljp_gold"].scored({"response": "x"}) == {}


def test_score_reads_exactly_what_scored_keeps():
    lca = [{"history_type": "underspecified", "label": "clarification", "response": "?"}]
    ljp = [
        {
            "claims": [
                {"claim": "a", "gold": "支持", "predicted": "支持"},
                {"claim": "b", "gold": "驳回", "predicted": "支持"},
            ]
        }
    ]
    for name, records in (("lca", lca), ("dcg", [{"success": True}]), ("ljp_gold", ljp)):
        task = TASKS[name]
        kept = [task.scored(r) for r in records]
        assert task.score(kept) == task.score(records)
        assert set(task.score(kept)) == set(task.metrics)
    assert TASKS["ljp_gold"].size(TASKS["ljp_gold"].total(ljp)) == 2
    assert TASKS["lca"].size(TASKS["lca"].total(lca)) == 1
    assert TASKS["ljp_gold"].score(ljp)["accuracy"] == metrics.ratio(1, 2)
    with pytest.raises(KeyError):
        TASKS["lca"].score([{"label": "judgment"}])  # a record without its history type is not scored


def test_scored_fields_scored_again_are_unchanged():
    """The report reads whole records (HTML) or their stored scored fields alike."""
    records: dict[str, dict[str, Any]] = {
        "lca": {"history_type": "complete", "label": "judgment", "response": "r"},
        "dcg": {"success": True, "rounds": [{"question": "q", "reply": "r", "decision": "是"}, {"question": "q"}]},
        "ljp_interaction": {"claims": [{"claim": "c", "gold": "驳回", "predicted": "驳回"}], "stop_reason": "x"},
    }
    records["dcg"]["rounds"][1]["decision"] = "否"
    for name, record in records.items():
        once = TASKS[name].scored(record)
        assert TASKS[name].scored(once) == once


def test_counts_add_up_to_the_metrics_of_the_union():
    """Statistics are additive: the metrics of summed counts equal the metrics of the pooled records,
    which is what lets the bootstrap score a resample as a sum."""
    verdicts = ("支持", "部分支持", "驳回")
    ljp: list[dict[str, Any]] = [
        {
            "claims": [
                {"gold": verdicts[(i * 7 + j) % 3], "predicted": verdicts[(i + j * 5) % 3]} for j in range(i % 4 + 1)
            ]
        }
        for i in range(9)
    ]
    lca: list[dict[str, Any]] = [
        {"history_type": ("complete", "underspecified")[i % 2], "label": ("judgment", "clarification")[i % 3 == 0]}
        for i in range(9)
    ]
    dcg: list[dict[str, Any]] = [{"success": i % 3 == 1} for i in range(9)]
    for name, records in (("ljp_gold", ljp), ("lca", lca), ("dcg", dcg)):
        task = TASKS[name]
        summed = [sum(column) for column in zip(*(task.counts(r) for r in records), strict=True)]
        if name == "lca":
            expected = metrics.lca_metrics((r["history_type"], r["label"]) for r in records)
        elif name == "dcg":
            expected = metrics.dcg_metrics(r["success"] for r in records)
        else:
            expected = metrics.ljp_metrics((c["gold"], c["predicted"]) for r in records for c in r["claims"])
        assert dict(zip(task.metrics, task.from_counts(summed), strict=True)) == expected


def test_outcome_says_whether_a_record_was_right():
    assert TASKS["lca"].outcome({"history_type": "underspecified", "label": "clarification"})["correct"] is True
    assert TASKS["lca"].outcome({"history_type": "complete", "label": "clarification"})["correct"] is False
    claims = [{"claim": "a", "gold": "支持", "predicted": "支持"}, {"claim": "b", "gold": "驳回", "predicted": "支持"}]
    out = TASKS["ljp_interaction"].outcome({"claims": claims, "stop_reason": "forced_final_prediction"})
    assert out == {
        "claims": 2,
        "claims_correct": 1,
        "gold": ["支持", "驳回"],
        "predicted": ["支持", "支持"],
        "correct": False,
        "stop_reason": "forced_final_prediction",
        "responses": 4,
    }
    with pytest.raises(ValueError, match="stop reason"):
        TASKS["ljp_interaction"].outcome({"claims": claims, "stop_reason": "gave_up"})
