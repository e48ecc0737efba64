"""How long `build_report` takes on the 20x benchmark's shape: one family of 8,640 cases in six
cause classes, 5 runs of 2 models, every task (the default 1,000 resamples). Not a test (timings
on a shared machine are not assertions): `python bench/perf_report.py [cases] [runs]`."""

from __future__ import annotations

import random
import sys
import time
from typing import Any

from lexpilot_batch.report import RunResults, TaskRecords, build_report

VERDICTS = ("支持", "部分支持", "驳回")
CLASSES = ("合同纠纷", "婚姻家庭", "劳动争议", "侵权责任", "物权纠纷", "其他")
STOPS = ("judgment_round_1", "judgment_round_2", "judgment_round_3", "forced_final_prediction")


def synthetic(n_cases: int, n_runs: int, models: tuple[str, ...], seed: int = 1) -> list[RunResults]:
    rng = random.Random(seed)
    cls_of = {str(i): CLASSES[i % len(CLASSES)] for i in range(n_cases)}
    claims = {c: [rng.choice(VERDICTS) for _ in range(rng.randint(1, 4))] for c in cls_of}
    runs = []
    for model in models:
        skill = {c: rng.random() for c in cls_of}
        for r in range(n_runs):
            tasks = {t: TaskRecords() for t in ("lca", "dcg", "ljp_direct", "ljp_gold", "ljp_interaction")}
            for case, cls in cls_of.items():
                p = skill[case]
                for history in ("complete", "underspecified"):
                    label = "clarification" if (rng.random() < p) == (history == "underspecified") else "judgment"
                    tasks["lca"].records.append((cls, {"history_type": history, "label": label}))
                    tasks["lca"].cases.append(case)
                won = rng.random() < p
                tasks["dcg"].records.append((cls, {"success": won, "decisions": ["否", "是" if won else "否"]}))
                tasks["dcg"].cases.append(case)
                for task in ("ljp_direct", "ljp_gold", "ljp_interaction"):
                    record: dict[str, Any] = {
                        "claims": [
                            {"gold": g, "predicted": g if rng.random() < p else rng.choice(VERDICTS)}
                            for g in claims[case]
                        ]
                    }
                    if task == "ljp_interaction":
                        record["stop_reason"] = rng.choice(STOPS)
                    tasks[task].records.append((cls, record))
                    tasks[task].cases.append(case)
            runs.append(RunResults(f"run{r + 1}", model, "u", "j", f"g-{model}", comparison_key="c", tasks=tasks))
    return runs


if __name__ == "__main__":
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 8640
    n_runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    runs = synthetic(cases, n_runs, ("model-a", "model-b"))
    times = []
    for _ in range(3):
        start = time.process_time()
        build_report(runs)
        times.append(time.process_time() - start)
    print(
        f"build_report (CPU time), {cases} cases x {n_runs} runs x 2 models: " + ", ".join(f"{t:.2f} s" for t in times)
    )
