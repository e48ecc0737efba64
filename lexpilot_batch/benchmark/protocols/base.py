"""What a protocol is: a pure state machine per (run, task, case[, variant]) thread.

Given the answered steps of one case in one run, a protocol says which steps are due now and,
once it has everything, the thread's result record. It never performs I/O and knows nothing of
waves, files, batches, custom_ids or retries: those belong to the engine.

Step keys are shared by every task of a (run, case): the Interaction-Based LJP thread names the
LCA underspecified steps (`lca.u.gen`, `lca.u.cls`) as its round 1, so preparing both tasks
requests them once and both threads read the same answers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lexpilot_batch.benchmark.prompts import Templates
from lexpilot_batch.data import Case

ModelRole = Literal["eval", "user", "judge"]
Parser = Literal["text", "lca_label", "dcg_decision", "verdicts"]


@dataclass(frozen=True)
class Step:
    """One request a thread needs: who answers it, with what prompt, validated how."""

    key: str
    role: ModelRole
    prompt: str
    parser: Parser
    n_claims: int = 0  # for `verdicts`: how many labels the answer must hold


@dataclass(frozen=True)
class Answer:
    """A validated answer: the response text (reasoning stripped) and its parsed value."""

    text: str
    value: Any


@dataclass(frozen=True)
class CaseContext:
    """Everything a protocol may use for one case of one run.

    Not the case's cause class: no protocol asks by class, and a class belongs to the mapping a
    run is scored with (`results`), not to the case."""

    case: Case
    templates: Templates
    speculate: bool = False


@dataclass(frozen=True)
class Advance:
    """A protocol's verdict on a thread: what is due, or its finished record.

    `unused` names answered or requested speculative steps this thread will never read (a User
    Model reply to a response that turned out to be a judgment); the engine counts them as
    discarded unless another thread of the case still needs them.
    """

    due: tuple[Step, ...] = ()
    record: dict[str, Any] | None = None
    unused: frozenset[str] = field(default_factory=frozenset)


class Protocol(ABC):
    """One benchmark task."""

    task: str
    stage: str  # the `--stage` name

    def variants(self, case: Case) -> tuple[str, ...]:
        """The threads of this task for one case, by variant name ("" when only one)."""
        return ("",)

    @abstractmethod
    def reads(self, variant: str) -> tuple[str, ...]:
        """Prefixes of every step key this thread requests or reads: the engine loads only those
        answers for it, and refuses a due step outside them."""

    @abstractmethod
    def advance(self, ctx: CaseContext, variant: str, answers: Mapping[str, Answer]) -> Advance:
        """The due steps of this thread, or its record when every step it needs is answered."""
