"""The benchmark's five tasks as the report, `status`, the export and stored scores know them.

One ordered registry: benchmark order, titles, what a task's n counts, its metrics, the fields of
a finished record it scores and how, and the original code's result files it is exported to.
What a task *asks* (its steps, prompts and record) is its protocol's (`protocols/`); everything
here reads finished records only.

A record's scored fields are stored beside it when its thread finishes (`Task.scored`) and are all
the report reads (`Task.score`), so the two are defined together: a field one of them names and
the other does not is a bug the report names ("not in the shape the protocol writes") instead of
scoring a wrong shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lexpilot_batch import metrics
from lexpilot_batch.metrics import Metric

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Task:
    """What is known of one task outside its protocol."""

    name: str  # as threads, records and the report JSON name it
    title: str  # as tables show it
    unit: str  # what `n` counts per run: histories, cases or claims
    metrics: tuple[str, ...]
    eval_file: str  # eval_results/<run>/<model>/<eval_file>
    generation: tuple[str, str]  # (folder, file name) of its generation file in the seed layout
    _score: Callable[[Sequence[Record]], dict[str, Metric]]
    _scored_keys: tuple[str, ...]

    @property
    def is_ljp(self) -> bool:
        return self._scored_keys == ("claims",)

    def scored(self, record: Record) -> dict[str, Any]:
        """The fields `score` reads of a finished record: LCA's history type and label, DCG's
        success, each LJP claim's gold and predicted verdicts. A field the record lacks is left
        out, so that scoring names it instead of scoring a wrong shape."""
        if self.is_ljp:
            claims = record.get("claims")
            if not isinstance(claims, list):
                return {}
            return {
                "claims": [
                    {k: c[k] for k in ("gold", "predicted") if k in c} if isinstance(c, dict) else c for c in claims
                ]
            }
        return {k: record[k] for k in self._scored_keys if k in record}

    def score(self, records: Sequence[Record]) -> dict[str, Metric]:
        """Every metric of this task over these (scored) records of one run."""
        return self._score(records)

    def size(self, records: Sequence[Record]) -> int:
        """`n`: histories (LCA), cases (DCG) or claims (LJP) scored."""
        if self.is_ljp:
            return sum(len(r["claims"]) for r in records)
        return len(records)


def _lca(records: Iterable[Record]) -> dict[str, Metric]:
    return metrics.lca_metrics((r["history_type"], r["label"]) for r in records)


def _dcg(records: Iterable[Record]) -> dict[str, Metric]:
    return metrics.dcg_metrics(r["success"] for r in records)


def _ljp(records: Iterable[Record]) -> dict[str, Metric]:
    return metrics.ljp_metrics((c["gold"], c["predicted"]) for r in records for c in r["claims"])


def _ljp_task(name: str, title: str, eval_file: str, generation: tuple[str, str]) -> Task:
    return Task(name, title, "claims", metrics.LJP_METRICS, eval_file, generation, _ljp, ("claims",))


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task(
            "lca",
            "LCA",
            "histories",
            metrics.LCA_METRICS,
            "LCA_results.jsonl",
            ("AwN_gen", "a1.jsonl"),
            _lca,
            ("history_type", "label"),
        ),
        Task(
            "dcg",
            "DCG",
            "cases",
            metrics.DCG_METRICS,
            "DCG_results.jsonl",
            ("Force_ask_gen", "force_ask.jsonl"),
            _dcg,
            ("success",),
        ),
        _ljp_task("ljp_direct", "Direct LJP", "LJP_direct.jsonl", ("Force_judge_gen", "a1_direct.jsonl")),
        _ljp_task("ljp_gold", "Gold LJP", "LJP_gold.jsonl", ("Force_judge_gen", "a1_force_judge.jsonl")),
        _ljp_task("ljp_interaction", "Interaction LJP", "LJP_interaction.jsonl", ("AwN_gen", "interaction.jsonl")),
    )
}
# Benchmark order: how tables, `status` and the report JSON list tasks.
TASK_ORDER: tuple[str, ...] = tuple(TASKS)

METRIC_TITLES: dict[str, str] = {
    "macro_f1": "Macro-F1",
    "f1_u": "F1_U",
    "f1_c": "F1_C",
    "acc_c": "Acc_C",
    "acc_u": "Acc_U",
    "success_rate": "Success",
    "qwk": "QWK",
    "accuracy": "Acc",
}


def in_order(names: Iterable[str]) -> list[str]:
    """Task names in benchmark order; names the registry does not know come last, sorted."""
    names = set(names)
    return [t for t in TASK_ORDER if t in names] + sorted(names - set(TASK_ORDER))
