"""Every judge call of a finished case, in its own words: what the viewer and the exports show
beside each decision.

A judge step (the LCA classifier, the DCG judge, the verdict extractor) may take several attempts:
an answer that does not validate (`benchmark.judges`) is rejected and asked again. Each attempt is
a request row (what it decided, or why it was rejected) and, from migration `0017_judge_words` on,
a row of `state.judge_words` (the judge's whole content and its reasoning where the API returns it
apart). `load_judge_calls` reads them per run and case; `calls_of` picks those of one record,
by the step keys its protocol reads (`protocols.Protocol.reads`). Requests answered before that
migration show their decision and rejection reason, with no words.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.benchmark.protocols import PROTOCOLS
from lexpilot_batch.state.states import RequestState

# What each judge step is, by the end of its key (`protocols/`: `lca.c.cls`, `dcg.q1j`, `int.c2`,
# `dir.ext`, ...): the viewer's and the exports' name for it.
_JUDGES = (
    ("cls", "classifier"),
    ("q1j", "DCG judge, question 1"),
    ("q2j", "DCG judge, question 2"),
    ("ext", "verdict extractor"),
)


@dataclass(frozen=True)
class JudgeCall:
    """One attempt of one judge step."""

    step: str  # the protocol's step key: `lca.u.cls`, `dcg.q2j`, `int.c3`, `gold.ext`, ...
    attempt: int
    status: str  # answered | failed | discarded | pending (`state.states.RequestState`)
    decision: Any  # the validated answer (a label, 是/否, the verdicts); None when rejected
    rejected: str | None  # why the attempt was not used (`engine.answers`), None when answered
    raw: str | None  # the judge's whole content, None where it returned none (or before 0013)
    reasoning: str | None  # its reasoning returned apart from the content, where the API gives it

    @property
    def judge(self) -> str:
        """What the step is, for a reader: "classifier", "DCG judge, question 1", ..."""
        end = self.step.rsplit(".", 1)[-1]
        for suffix, name in _JUDGES:
            if end == suffix:
                return name
        if end.startswith("c"):  # Interaction LJP's classifier of round k (`int.c<k>`)
            return f"classifier, round {end[1:]}"
        return "judge"

    def to_json(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "step": self.step,
            "attempt": self.attempt,
            "status": self.status,
            "decision": self.decision,
            "rejected": self.rejected,
            "raw": self.raw,
            "reasoning": self.reasoning,
        }


# Per (run id, model): case number -> the case's judge calls, in step and attempt order.
JudgeCalls = dict[tuple[str, str], dict[str, list[JudgeCall]]]


def load_judge_calls(db: sqlite3.Connection, runs: Iterable[tuple[str, str]]) -> JudgeCalls:
    """The judge calls of every case of `runs` ((run id, model) pairs), from the database alone."""
    out: JudgeCalls = {}
    for run_id, model in runs:
        row = db.execute("SELECT pk, dataset FROM runs WHERE run_id = ? AND model = ?", (run_id, model)).fetchone()
        if row is None:
            continue
        run_pk, dataset = row[0], row[1]
        number = dict(db.execute("SELECT idx, case_number FROM cases WHERE dataset = ?", (dataset,)).fetchall())
        of_case: dict[str, list[JudgeCall]] = defaultdict(list)
        for case_idx, step, attempt, status, value, error, raw, reasoning in db.execute(
            "SELECT q.case_idx, q.step, q.attempt, q.status, q.value, q.error, w.raw, w.reasoning"
            " FROM requests q LEFT JOIN judge_words w ON w.request_pk = q.pk"
            " WHERE q.run_pk = ? AND q.role = 'judge' ORDER BY q.case_idx, q.step, q.attempt",
            (run_pk,),
        ):
            decision = json.loads(value) if value is not None and status != RequestState.FAILED else None
            of_case[str(number.get(case_idx, case_idx))].append(
                JudgeCall(step, attempt, status, decision, error, raw, reasoning)
            )
        out[(run_id, model)] = dict(of_case)
    return out


def calls_of(calls: Mapping[str, list[JudgeCall]], task: str, case: str, variant: str) -> list[JudgeCall]:
    """The judge calls of one record: those of its case whose steps its task's protocol reads."""
    prefixes = PROTOCOLS[task].reads(variant)
    return [c for c in calls.get(case, ()) if c.step.startswith(prefixes)]
