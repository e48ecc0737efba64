"""The data of the HTML report's per-case viewer: every finished record as the turns it added.

For each (group, run, task, case[, variant]) one item: the history the task started from, the new
turns in order (LexAwN responses with the judge's label or DCG decision, User Model replies, the
forced final prediction), and what it came to (`tasks.Task.outcome`: label or success, each
claim's predicted verdict against gold, stop reason). A full study repeats the same texts many
times (every case's histories in every run, task and model; Interaction LJP's first response is
LCA's), so every text is stored once in `strings` and every history once in `histories`, and
items refer to them by index:

    {"strings": [text, ...],
     "histories": [[string index of each message, user first, alternating], ...],
     "tasks": [[task, title], ...], "groups": [{"label", "model", "runs": [run id, ...]}, ...],
     "cases": [[case number, class], ...],
     "items": [[group, run, task, case, variant, history, turns, outcome], ...]}

`turns` is [[who, string index, tag], ...] with who "a" (a LexAwN response), "u" (a User Model
reply) or "f" (the forced final prediction) and tag the judge's label or decision ("" if none).
`outcome` is `Task.outcome` with an LJP record's claims as `verdicts`: [[claim text's string
index, gold, predicted], ...].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lexpilot_batch.benchmark.protocols.interaction import FORCED_FINAL
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.document import RunResults
from lexpilot_batch.report.layout import group_label


class _Table:
    """Values stored once, referred to by index."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.values: list[Any] = []

    def __call__(self, value: Any) -> int:
        i = self.index.get(value)
        if i is None:
            i = self.index[value] = len(self.values)
            self.values.append(value)
        return i


def _turns(task: str, record: Mapping[str, Any], text: _Table) -> list[list]:
    if task == "lca":
        return [["a", text(record["response"]), record["label"]]]
    if task == "dcg":
        turns = []
        for r in record["rounds"]:
            turns.append(["a", text(r["question"]), r["decision"]])
            if "reply" in r:
                turns.append(["u", text(r["reply"]), ""])
        return turns
    if task == "ljp_interaction":
        turns = []
        for r in record["rounds"]:
            turns.append(["a", text(r["response"]), r["label"]])
            if "reply" in r:
                turns.append(["u", text(r["reply"]), ""])
        if record["stop_reason"] == FORCED_FINAL:
            turns.append(["f", text(record["final_response"]), ""])
        return turns
    return [["a", text(record["response"]), ""]]


def _outcome(task: str, record: Mapping[str, Any], text: _Table) -> dict[str, Any]:
    outcome = TASKS[task].outcome(record)
    if "gold" in outcome:  # each claim as [text, gold, predicted]
        outcome["verdicts"] = [[text(c["claim"]), c["gold"], c["predicted"]] for c in record["claims"]]
        del outcome["gold"], outcome["predicted"]
    return outcome


def viewer_data(runs: Sequence[RunResults], report: Mapping[str, Any]) -> dict[str, Any]:
    """The viewer's data for `runs` (whole records: `results.load_run_results(texts=True)`), with
    groups as `report` (built from the same runs) orders them."""
    groups = report["groups"]
    group_of = {
        (g["group_key"], run_id): (gi, ri) for gi, g in enumerate(groups) for ri, run_id in enumerate(g["runs"])
    }
    task_index = {t: i for i, t in enumerate(TASKS)}
    text, histories, cases = _Table(), _Table(), _Table()
    items = []
    for run in runs:
        gi, ri = group_of[(run.group_key, run.run_id)]
        for task, task_records in run.tasks.items():
            variants = task_records.records
            for (cls, record), case in zip(variants, task_records.cases, strict=True):
                try:
                    history = histories(tuple(text(m["content"]) for m in record["history"]))
                    variant = record.get("history_type", "")[:1]
                    items.append(
                        [
                            gi,
                            ri,
                            task_index[task],
                            cases((case, cls)),
                            variant,
                            history,
                            _turns(task, record, text),
                            _outcome(task, record, text),
                        ]
                    )
                except (KeyError, TypeError, ValueError) as exc:
                    raise LexpilotError(
                        f"Cannot show case {case} of task {task}, run {run.run_id} (model {run.model}) in the viewer: "
                        f"{exc!r}; the record is not in the shape the protocol writes."
                    ) from exc
    items.sort(key=lambda item: (item[0], item[1], item[2], item[3], item[4]))
    return {
        "strings": text.values,
        "histories": [list(h) for h in histories.values],
        "tasks": [[t, TASKS[t].title] for t in TASKS],
        "groups": [{"label": group_label(g, groups), "model": g["model"], "runs": g["runs"]} for g in groups],
        "cases": [list(c) for c in cases.values],
        "items": items,
    }
