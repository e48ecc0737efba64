"""The projection: one (run, case) played forward to its end, and the sum over all of them.

The projection plays every (run, case) forward with synthetic answers of assumed lengths, one
wave per round, branching on each LCA label that the Interaction-LJP thread reads (judgment or
clarification). Its minimum ends every consultation at its next label, its maximum takes three
clarification rounds, the forced final prediction and its extraction; "expected" weights the
branches by the clarification probability. It assumes no failures and no retries. Requests of a
wave already in flight are sent but not yet paid for: each leaf counts them (requests and prompt
characters, so that their cost is estimated as a compiled request's is) but not as a projected
wave, and their synthetic answers start the play.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lexpilot_batch.benchmark.protocols.base import Answer, Step
from lexpilot_batch.benchmark.protocols.interaction import MAX_ROUNDS, InteractionLJP, label_key
from lexpilot_batch.benchmark.settings import ROLES
from lexpilot_batch.engine.due import due_for_case
from lexpilot_batch.engine.tail import is_round_trip
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.estimate.assumptions import Span
from lexpilot_batch.estimate.state import Group, Pending

# The labels whose value decides how long a consultation goes on: the only branch points.
BRANCHING = frozenset(label_key(k) for k in range(1, MAX_ROUNDS + 1))
_INTERACTION = InteractionLJP.task
_MAX_WAVES = 64  # far beyond any protocol's chain: more means a protocol never finishes


def due_steps(
    group: Group, threads: Sequence[tuple[str, str]], answers: Mapping[str, Answer], retries: int
) -> tuple[list[Step], list[tuple[str, str]]]:
    """One compile of one (run, case), exactly as the compiler decides it: the due steps and the
    threads still active (finished threads and threads out of attempts drop out)."""
    due = due_for_case(group.ctx, [(t, t[0], t[1]) for t in threads], dict(answers), group.history, retries)
    return due.steps, [handle for handle, _, _ in due.active]


def _synthetic(step: Step | Pending, response_chars: Mapping[str, int]) -> Answer:
    """A valid answer of the assumed length; only its length and its value matter downstream."""
    if step.parser == "text":
        text = "某" * response_chars[step.role]
        return Answer(text, text)
    if step.parser == "dcg_decision":
        return Answer('{"decision": "是"}', "是")
    if step.parser == "verdicts":
        verdicts = ["支持"] * step.n_claims
        return Answer(json.dumps({"verdicts": verdicts}, ensure_ascii=False), verdicts)
    return Answer('{"label": "judgment"}', "judgment")  # a label no consultation thread reads


def _outcomes(
    steps: Iterable[Step | Pending], response_chars: Mapping[str, int], p: float, branch: bool
) -> list[tuple[float, dict[str, Answer]]]:
    """Every way these steps may be answered, with its probability: one per label combination."""
    fixed: dict[str, Answer] = {}
    labels: list[str] = []
    for step in steps:
        if branch and step.parser == "lca_label" and step.key in BRANCHING:
            labels.append(step.key)
        else:
            fixed[step.key] = _synthetic(step, response_chars)
    out = []
    for values in itertools.product(("judgment", "clarification"), repeat=len(labels)):
        prob, answers = 1.0, dict(fixed)
        for key, value in zip(labels, values, strict=True):
            prob *= p if value == "clarification" else 1 - p
            answers[key] = Answer(json.dumps({"label": value}), value)
        out.append((prob, answers))
    return out


@dataclass(frozen=True)
class Leaf:
    """One way a (run, case) may go to its end: probability, requests and prompt chars per role
    (those in flight included), projected waves (after the one in flight)."""

    prob: float
    requests: Counter
    chars: Counter
    waves: int
    by_wave: tuple[dict[str, tuple[int, int]], ...] = ()  # each wave's (requests, prompt chars) per role


def play(group: Group, retries: int, response_chars: Mapping[str, int], p: float) -> list[Leaf]:
    branch = any(task == _INTERACTION for task, _ in group.threads)
    leaves: list[Leaf] = []

    def walk(
        answers: dict[str, Answer],
        threads: list[tuple[str, str]],
        prob: float,
        requests: Counter,
        chars: Counter,
        waves: int,
        by_wave: tuple[dict[str, tuple[int, int]], ...],
    ) -> None:
        while True:
            due, threads = due_steps(group, threads, answers, retries)
            if not due:
                leaves.append(Leaf(prob, requests, chars, waves, by_wave))
                return
            if waves >= _MAX_WAVES:
                raise LexpilotError(
                    f"case {group.ctx.case.case_number}: the projection does not end; "
                    "a protocol keeps asking for steps (a bug: please report it)"
                )
            waves += 1
            wave: dict[str, tuple[int, int]] = {}
            for step in due:
                requests[step.role] += 1
                chars[step.role] += len(step.prompt)
                n, c = wave.get(step.role, (0, 0))
                wave[step.role] = (n + 1, c + len(step.prompt))
            by_wave = (*by_wave, wave)
            outcomes = _outcomes(due, response_chars, p, branch)
            if len(outcomes) == 1:
                answers = {**answers, **outcomes[0][1]}
                continue
            for q, answered in outcomes:
                walk({**answers, **answered}, threads, prob * q, requests.copy(), chars.copy(), waves, by_wave)
            return

    # Whatever is in flight is answered before the next wave is compiled: its requests are still
    # to be paid for, but it is no projected wave (its travel is decided: `Leaf.by_wave` leaves it out).
    sent: Counter[str] = Counter()
    sent_chars: Counter[str] = Counter()
    for pending in group.in_flight:
        sent[pending.role] += 1
        sent_chars[pending.role] += pending.prompt_chars
    for prob, answered in _outcomes(group.in_flight, response_chars, p, branch):
        walk({**group.answers, **answered}, list(group.threads), prob, sent.copy(), sent_chars.copy(), 0, ())
    return leaves


def _span(leaves: Sequence[Leaf], value: Any) -> Span:
    values = [value(leaf) for leaf in leaves]
    return Span(min(values), sum(leaf.prob * v for leaf, v in zip(leaves, values, strict=True)), max(values))


@dataclass
class InFlight:
    """The wave in flight, as the projected waves are kept (`Tally.by_wave`): each (file group,
    role)'s unanswered requests and prompt characters, and the backend each group travels on,
    decided when it was compiled."""

    wave: int | None = None
    parts: dict[tuple[Hashable, str], list[float]] = field(default_factory=dict)
    backends: dict[Hashable, str] = field(default_factory=dict)

    def add(self, pending: Pending, group: Hashable) -> None:
        entry = self.parts.setdefault((group, pending.role), [0.0, 0.0])
        entry[0] += 1
        entry[1] += pending.prompt_chars
        # A group with a file on a batch waits for that round trip, whatever its other files do.
        if group not in self.backends or not is_round_trip(self.backends[group]):
            self.backends[group] = pending.backend


@dataclass
class Tally:
    requests: dict[str, Span] = field(default_factory=lambda: {r: Span() for r in ROLES})
    chars: dict[str, Span] = field(default_factory=lambda: {r: Span() for r in ROLES})
    total: Span = field(default_factory=Span)
    waves_min: int = 0
    waves_max: int = 0
    # Expected (requests, prompt chars) of each projected wave, by (file group, role): what decides
    # which groups a wave sends at once, through the sync backend (`estimate.tail`).
    by_wave: list[dict[tuple[Hashable, str], list[float]]] = field(default_factory=list)
    in_flight: InFlight = field(default_factory=InFlight)  # counted in the spans above, in no `by_wave`

    def add(
        self, leaves: Sequence[Leaf], groups: Mapping[str, Hashable] | None = None, in_flight: Sequence[Pending] = ()
    ) -> Span:
        """Add one (run, case)'s leaves and its requests in flight (which its leaves count);
        `groups` names the file group of each role's requests."""
        if groups is not None:
            for pending in in_flight:
                self.in_flight.add(pending, groups[pending.role])
            for leaf in leaves:
                for w, wave in enumerate(leaf.by_wave):
                    if w == len(self.by_wave):
                        self.by_wave.append({})
                    into = self.by_wave[w]
                    for role, (n, c) in wave.items():
                        entry = into.setdefault((groups[role], role), [0.0, 0.0])
                        entry[0] += leaf.prob * n
                        entry[1] += leaf.prob * c
        for role in ROLES:
            self.requests[role] += _span(leaves, lambda leaf, role=role: leaf.requests[role])
            self.chars[role] += _span(leaves, lambda leaf, role=role: leaf.chars[role])
        total = _span(leaves, lambda leaf: sum(leaf.requests.values()))
        self.total += total
        # Every (run, case) moves in the same waves: the run lasts as long as its longest one.
        self.waves_min = max(self.waves_min, min(leaf.waves for leaf in leaves))
        self.waves_max = max(self.waves_max, max(leaf.waves for leaf in leaves))
        return total
