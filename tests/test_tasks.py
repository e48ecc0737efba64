"""The task registry: one ordered home for what the report, status and the export know of a task."""

from __future__ import annotations

import pytest

from lexpilot_batch import metrics
from lexpilot_batch.protocols import PROTOCOLS
from lexpilot_batch.tasks import TASK_ORDER, TASKS, in_order


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
    assert TASKS["dcg"].scored({"success": False, "rounds": []}) == {"success": False}
    for task in ("ljp_direct", "ljp_gold", "ljp_interaction"):
        assert TASKS[task].scored({"claims": claims, "response": "x"}) == {
            "claims": [{"gold": "支持", "predicted": "驳回"}]
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
    assert TASKS["ljp_gold"].size(ljp) == 2 and TASKS["lca"].size(lca) == 1
    assert TASKS["ljp_gold"].score(ljp)["accuracy"] == metrics.ratio(1, 2)
    with pytest.raises(KeyError):
        TASKS["lca"].score([{"label": "judgment"}])  # a record without its history type is not scored
