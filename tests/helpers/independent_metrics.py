"""An independent scorer of exported `eval_results/` files, to check the report against.

Deliberately shares nothing with `lexpilot_batch.benchmark.metrics` or `lexpilot_batch.report`: it reads
the exported JSONL files and scores them with scikit-learn, following the seed README's
definitions. Undefined values (zero denominators, zero expected disagreement for QWK, no items)
are `None`.

    score_export(out_dir) -> {(run_id, model): {task: {"overall": {metric: value},
                                                      "by_class": {class: {metric: value}}}}}

Run id and model are read from each run's exported `runs/<run>/<model>/manifest.json`.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, recall_score

FILES = {
    "LCA_results.jsonl": "lca",
    "DCG_results.jsonl": "dcg",
    "LJP_direct.jsonl": "ljp_direct",
    "LJP_gold.jsonl": "ljp_gold",
    "LJP_interaction.jsonl": "ljp_interaction",
}
ORDINAL = {"支持": 0, "部分支持": 1, "驳回": 2}
LABELS = [0, 1, 2]
U, C = "underspecified", "complete"


def _defined(value: float) -> float | None:
    value = float(value)
    return None if math.isnan(value) else value


def lca(records: list[dict]) -> dict[str, float | None]:
    # The response's label, mapped onto the history type it is right for.
    truth = [r["history_type"] for r in records]
    predicted = [U if r["label"] == "clarification" else C for r in records]
    assert set(truth) <= {U, C} and {r["label"] for r in records} <= {"clarification", "judgment"}
    if not records:
        return dict.fromkeys(("macro_f1", "f1_u", "f1_c", "acc_c", "acc_u"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f1_u, f1_c = (_defined(f1_score(truth, predicted, pos_label=pos, zero_division=np.nan)) for pos in (U, C))
        # Acc_U / Acc_C are the recalls of each history type.
        acc_u, acc_c = (_defined(recall_score(truth, predicted, pos_label=pos, zero_division=np.nan)) for pos in (U, C))
    macro = None if f1_u is None or f1_c is None else (f1_u + f1_c) / 2
    return {"macro_f1": macro, "f1_u": f1_u, "f1_c": f1_c, "acc_c": acc_c, "acc_u": acc_u}


def dcg(records: list[dict]) -> dict[str, float | None]:
    successes = [r["success"] for r in records]
    assert all(isinstance(s, bool) for s in successes)
    return {"success_rate": float(np.mean(successes)) if successes else None}


def expected_disagreement(gold: list[int], predicted: list[int]) -> float:
    """sum_ij (i-j)^2 * P(gold=i) * P(pred=j): zero exactly when QWK is undefined."""
    n = len(gold)
    p_gold = np.bincount(gold, minlength=3) / n
    p_pred = np.bincount(predicted, minlength=3) / n
    weights = (np.arange(3)[:, None] - np.arange(3)[None, :]) ** 2
    return float((weights * np.outer(p_gold, p_pred)).sum())


def ljp(records: list[dict]) -> dict[str, float | None]:
    gold = [ORDINAL[c["gold"]] for r in records for c in r["claims"]]
    predicted = [ORDINAL[c["predicted"]] for r in records for c in r["claims"]]
    if not gold:
        return {"qwk": None, "accuracy": None}
    if expected_disagreement(gold, predicted) == 0:
        qwk = None
    else:
        qwk = float(cohen_kappa_score(gold, predicted, weights="quadratic", labels=LABELS))
    return {"qwk": qwk, "accuracy": float(accuracy_score(gold, predicted))}


SCORERS = {"lca": lca, "dcg": dcg, "ljp_direct": ljp, "ljp_gold": ljp, "ljp_interaction": ljp}


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def score_file(task: str, records: list[dict]) -> dict:
    scorer = SCORERS[task]
    classes = sorted({r["cause_class"] for r in records})
    return {
        "overall": scorer(records),
        "by_class": {cls: scorer([r for r in records if r["cause_class"] == cls]) for cls in classes},
    }


def score_export(out_dir: Path, partial: bool = False) -> dict[tuple[str, str], dict[str, dict]]:
    """Every run's metrics from its eval_results files; with `partial`, from `*.partial.jsonl` files too."""
    out: dict[tuple[str, str], dict[str, dict]] = {}
    for run_dir in sorted((Path(out_dir) / "eval_results").glob("*/*")):
        manifest_file = Path(out_dir) / "runs" / run_dir.parent.name / run_dir.name / "manifest.json"
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        tasks = {}
        for name, task in FILES.items():
            path = run_dir / name
            if partial and not path.exists():
                path = run_dir / name.replace(".jsonl", ".partial.jsonl")
            if path.exists():
                tasks[task] = score_file(task, read_jsonl(path))
        out[(manifest["run_id"], manifest["model"])] = tasks
    return out
