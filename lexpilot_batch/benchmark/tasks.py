"""The benchmark's five tasks as the report, `status`, the export and stored scores know them.

One ordered registry: benchmark order, titles, what a task's n counts, its metrics, the fields of
a finished record it scores and how, and the original code's result files it is exported to.
What a task *asks* (its steps, prompts and record) is its protocol's (`protocols/`); everything
here reads finished records only.

Scoring goes through additive statistics. `Task.counts` turns one record into a tuple of integers
(LCA's confusion counts, DCG's successes and cases, LJP's claims per gold and per predicted label,
squared label distance and correct claims) whose sum over any set of records is that set's
statistics, and `Task.from_counts` turns such a sum into the task's metrics (`metrics`). The
report scores a run by adding its records' counts, and its swap test (`report.statistics.swap`)
scores each pattern of cases swapped between two models the same way, so both give the same number
for the same records.

A record's scored fields are stored beside it when its thread finishes (`Task.scored`) and are all
the report reads, so the two are defined together: a field one of them names and the other does
not is a bug the report names ("not in the shape the protocol writes") instead of scoring a wrong
shape. Besides what the metrics read, they keep what the report's interaction statistics read
(DCG's per-round decisions, Interaction LJP's stop reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.benchmark import metrics
from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.protocols.interaction import STOP_REASONS

Record = Mapping[str, Any]
Counts = tuple[int, ...]


class _Scoring:
    """How one kind of task (LCA, DCG, LJP) scores its records."""

    metrics: tuple[str, ...]
    width: int  # how many statistics `counts` returns
    keys: tuple[str, ...]  # the record fields `scored` keeps

    def scored(self, record: Record) -> dict[str, Any]:
        return {k: record[k] for k in self.keys if k in record}

    def counts(self, record: Record) -> Counts:
        raise NotImplementedError

    def from_counts(self, counts: Sequence[int]) -> tuple[Metric, ...]:
        raise NotImplementedError

    def size(self, counts: Sequence[int]) -> int:
        raise NotImplementedError

    def correct(self, counts: Sequence[int]) -> bool:
        """Whether one record (or case) was answered right: the label LCA expects, a DCG success,
        every LJP claim's verdict."""
        raise NotImplementedError

    def outcome(self, record: Record) -> dict[str, Any]:
        """What one finished record came to, as the per-case export and viewer show it."""
        raise NotImplementedError


class _Lca(_Scoring):
    metrics = metrics.LCA_METRICS
    width = 4
    keys = ("history_type", "label")

    def counts(self, record: Record) -> Counts:
        c = metrics.lca_counts([(record["history_type"], record["label"])])
        return c.tp, c.fp, c.fn, c.tn

    def from_counts(self, counts: Sequence[int]) -> tuple[Metric, ...]:
        return metrics.lca_from_counts(metrics.LcaCounts(*counts))

    def size(self, counts: Sequence[int]) -> int:
        return sum(counts)

    def correct(self, counts: Sequence[int]) -> bool:
        return counts[0] + counts[3] == self.size(counts)

    def outcome(self, record: Record) -> dict[str, Any]:
        return {
            "history_type": record["history_type"],
            "label": record["label"],
            "correct": self.correct(self.counts(record)),
        }


class _Dcg(_Scoring):
    metrics = metrics.DCG_METRICS
    width = 2
    keys = ("success",)

    def scored(self, record: Record) -> dict[str, Any]:
        out = super().scored(record)
        rounds = record.get("rounds")
        if "decisions" in record:  # already scored fields
            out["decisions"] = record["decisions"]
        elif isinstance(rounds, list) and all(isinstance(r, dict) and "decision" in r for r in rounds):
            out["decisions"] = [r["decision"] for r in rounds]
        return out

    def counts(self, record: Record) -> Counts:
        success = record["success"]
        if not isinstance(success, bool):
            raise ValueError(f"DCG success must be true or false, got {success!r}")
        return int(success), 1

    def from_counts(self, counts: Sequence[int]) -> tuple[Metric, ...]:
        return metrics.dcg_from_counts(counts[0], counts[1])

    def size(self, counts: Sequence[int]) -> int:
        return counts[1]

    def correct(self, counts: Sequence[int]) -> bool:
        return counts[0] == counts[1]

    def outcome(self, record: Record) -> dict[str, Any]:
        decisions = self.scored(record).get("decisions", [])
        return {"success": record["success"], "decisions": decisions, "correct": record["success"]}


class _Ljp(_Scoring):
    metrics = metrics.LJP_METRICS
    width = 8  # claims per gold label (3), per predicted label (3), squared distance, correct
    keys = ("claims",)

    def __init__(self, interaction: bool = False) -> None:
        self.interaction = interaction

    def scored(self, record: Record) -> dict[str, Any]:
        out: dict[str, Any] = {}
        claims = record.get("claims")
        if isinstance(claims, list):
            out["claims"] = [
                {k: c[k] for k in ("gold", "predicted") if k in c} if isinstance(c, dict) else c for c in claims
            ]
        if self.interaction and "stop_reason" in record:
            out["stop_reason"] = record["stop_reason"]
        return out

    def counts(self, record: Record) -> Counts:
        gold = [0, 0, 0]
        predicted = [0, 0, 0]
        distance = correct = 0
        for claim in record["claims"]:
            g = metrics.verdict_index(claim["gold"])
            p = metrics.verdict_index(claim["predicted"])
            gold[g] += 1
            predicted[p] += 1
            distance += (g - p) ** 2
            correct += g == p
        return (*gold, *predicted, distance, correct)

    def from_counts(self, counts: Sequence[int]) -> tuple[Metric, ...]:
        return metrics.ljp_from_counts(counts[0:3], counts[3:6], counts[6], counts[7])

    def size(self, counts: Sequence[int]) -> int:
        return counts[0] + counts[1] + counts[2]

    def correct(self, counts: Sequence[int]) -> bool:
        return counts[7] == self.size(counts)

    def outcome(self, record: Record) -> dict[str, Any]:
        claims = record["claims"]
        counts = self.counts(record)
        out: dict[str, Any] = {
            "claims": len(claims),
            "claims_correct": counts[7],
            "gold": [c["gold"] for c in claims],
            "predicted": [c["predicted"] for c in claims],
            "correct": self.correct(counts),
        }
        if self.interaction:
            out["stop_reason"] = record["stop_reason"]
            out["responses"] = responses_used(record["stop_reason"])
        return out


def responses_used(stop_reason: str) -> int:
    """New LexAwN responses an Interaction LJP case took: k for a judgment at round k, 4 when the
    third round still asked and the final prediction was forced."""
    if stop_reason not in STOP_REASONS:
        raise ValueError(f"unknown stop reason {stop_reason!r}; expected one of {', '.join(STOP_REASONS)}")
    return STOP_REASONS.index(stop_reason) + 1


@dataclass(frozen=True)
class Task:
    """What is known of one task outside its protocol."""

    name: str  # as threads, records and the report JSON name it
    title: str  # as tables show it
    unit: str  # what `n` counts per run: histories, cases or claims
    eval_file: str  # eval_results/<run>/<model>/<eval_file>
    generation: tuple[str, str]  # (folder, file name) of its generation file in the seed layout
    scoring: _Scoring

    @property
    def metrics(self) -> tuple[str, ...]:
        return self.scoring.metrics

    @property
    def headline(self) -> str:
        """The metric a compact table shows for this task (LCA Macro-F1, DCG success, LJP QWK)."""
        return self.scoring.metrics[0]

    @property
    def width(self) -> int:
        """How many statistics `counts` returns."""
        return self.scoring.width

    def scored(self, record: Record) -> dict[str, Any]:
        """The fields the report reads of a finished record: LCA's history type and label, DCG's
        success and per-round decisions, each LJP claim's gold and predicted verdicts and the
        Interaction LJP stop reason. A field the record lacks is left out, so that scoring names
        it instead of scoring a wrong shape."""
        return self.scoring.scored(record)

    def counts(self, record: Record) -> Counts:
        """The record's additive statistics (see the module docstring)."""
        return self.scoring.counts(record)

    def from_counts(self, counts: Sequence[int]) -> tuple[Metric, ...]:
        """The task's metrics, in `metrics` order, of summed statistics."""
        return self.scoring.from_counts(counts)

    def size(self, counts: Sequence[int]) -> int:
        """`n` of summed statistics: histories (LCA), cases (DCG) or claims (LJP)."""
        return self.scoring.size(counts)

    def outcome(self, record: Record) -> dict[str, Any]:
        """One finished record's result: label or success, verdicts against gold, whether it was
        right, and for Interaction LJP the stop reason and the responses it took."""
        return self.scoring.outcome(record)

    def total(self, records: Iterable[Record]) -> Counts:
        """The summed statistics of these records."""
        total = [0] * self.width
        for record in records:
            for i, value in enumerate(self.counts(record)):
                total[i] += value
        return tuple(total)

    def score(self, records: Iterable[Record]) -> dict[str, Metric]:
        """Every metric of this task over these (scored) records of one run."""
        return dict(zip(self.metrics, self.from_counts(self.total(records)), strict=True))


TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("lca", "LCA", "histories", "LCA_results.jsonl", ("AwN_gen", "a1.jsonl"), _Lca()),
        Task("dcg", "DCG", "cases", "DCG_results.jsonl", ("Force_ask_gen", "force_ask.jsonl"), _Dcg()),
        Task("ljp_direct", "Direct LJP", "claims", "LJP_direct.jsonl", ("Force_judge_gen", "a1_direct.jsonl"), _Ljp()),
        Task("ljp_gold", "Gold LJP", "claims", "LJP_gold.jsonl", ("Force_judge_gen", "a1_force_judge.jsonl"), _Ljp()),
        Task(
            "ljp_interaction",
            "Interaction LJP",
            "claims",
            "LJP_interaction.jsonl",
            ("AwN_gen", "interaction.jsonl"),
            _Ljp(interaction=True),
        ),
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
