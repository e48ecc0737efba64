"""Random finished runs of every task (seeded), as the report reads them and in the plain shape of
the independent re-computations (`helpers.independent_uncertainty`)."""

from __future__ import annotations

import random
from typing import Any

from lexpilot_batch.report import RunResults, TaskRecords

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
