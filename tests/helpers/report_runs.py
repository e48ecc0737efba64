"""Finished runs built by hand for the report's tests: records of each task in two cause classes,
and two comparable runs (`two_runs`) whose metrics `report/test_report.py` works out by hand."""

from __future__ import annotations

from lexpilot_batch.report import RunResults, TaskRecords

FAMILY = "婚姻家庭"  # sorts after CONTRACT by code point


CONTRACT = "合同纠纷"


def with_cases(records: list[tuple[str, dict]], **kwargs) -> TaskRecords:
    return TaskRecords(records=records, cases=[str(r["case_number"]) for _, r in records], **kwargs)


def lca(*rows: tuple[str, str, str]) -> TaskRecords:
    """One record per row, each its own case."""
    return with_cases(
        [
            (cls, {"case_number": f"{cls}{i}", "history_type": truth, "response": "…", "label": label})
            for i, (cls, truth, label) in enumerate(rows)
        ]
    )


def dcg(*rows: tuple[str, bool]) -> TaskRecords:
    """Success (or not) in the second round."""
    return with_cases(
        [
            (cls, {"case_number": f"{cls}{i}", "success": success, "decisions": ["否", "是" if success else "否"]})
            for i, (cls, success) in enumerate(rows)
        ]
    )


def ljp(*cases: tuple[str, list[tuple[str, str]]], missing=(), failed=()) -> TaskRecords:
    return with_cases(
        [
            (
                cls,
                {
                    "case_number": f"{cls}{i}",
                    "response": "…",
                    "claims": [{"claim": f"诉请{j}", "gold": g, "predicted": p} for j, (g, p) in enumerate(claims)],
                },
            )
            for i, (cls, claims) in enumerate(cases)
        ],
        missing=list(missing),
        failed=list(failed),
    )


def run(
    run_id: str, tasks: dict, group_key: str = "g1", model: str = "model-a", usage: dict | None = None
) -> RunResults:
    return RunResults(
        run_id=run_id,
        model=model,
        user_model="user-m",
        judge_model="judge-m",
        group_key=group_key,
        settings={"temperature": 0.7, "max_tokens": 8192},
        tasks=tasks,
        usage=usage or {},
    )


def two_runs() -> list[RunResults]:
    """Two comparable runs whose numbers are worked out by hand (`report/test_report.py`)."""
    run1 = run(
        "run1",
        {
            # Overall TP=2 FP=1 FN=0 TN=1: F1_U=4/5, F1_C=2/3, Macro=11/15, Acc_C=1/2, Acc_U=1.
            # FAMILY: TP=1 TN=1, everything 1. CONTRACT: TP=1 FP=1: F1_U=2/3, F1_C=0, Macro=1/3.
            "lca": lca(
                (FAMILY, "complete", "judgment"),
                (FAMILY, "underspecified", "clarification"),
                (CONTRACT, "complete", "clarification"),
                (CONTRACT, "underspecified", "clarification"),
            ),
            "dcg": dcg((FAMILY, True), (CONTRACT, False), (CONTRACT, False)),  # 1/3
            # All 支持: QWK undefined, accuracy 1.
            "ljp_direct": ljp((FAMILY, [("支持", "支持"), ("支持", "支持")])),
            "ljp_gold": ljp((FAMILY, [("支持", "驳回"), ("驳回", "驳回")])),
        },
        usage={
            "eval": {"batch": {"requests": 4, "prompt_tokens": 600_000, "completion_tokens": 100_000}},
            "judge": {"batch": {"requests": 4, "prompt_tokens": 10_000, "completion_tokens": 1_000}},
        },
    )
    run2 = run(
        "run2",
        {
            # Always answers: TP=0 FP=0 FN=2 TN=2: F1_U=0, F1_C=2/3, Macro=1/3, Acc_C=1, Acc_U=0.
            "lca": lca(
                (FAMILY, "complete", "judgment"),
                (FAMILY, "underspecified", "judgment"),
                (CONTRACT, "complete", "judgment"),
                (CONTRACT, "underspecified", "judgment"),
            ),
            "dcg": dcg((FAMILY, False), (CONTRACT, True), (CONTRACT, True)),  # 2/3
            # gold 0,2 predicted 2,2: QWK = 1 - 2*4/8 = 0, accuracy 1/2.
            "ljp_direct": ljp((FAMILY, [("支持", "驳回"), ("驳回", "驳回")])),
        },
        usage={"eval": {"batch": {"requests": 4, "prompt_tokens": 400_000, "completion_tokens": 150_000}}},
    )
    return [run2, run1]  # given out of order on purpose
