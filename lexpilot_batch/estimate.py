"""Estimates before anything is sent: the next wave, a projection to the end, and their cost.

`dry_run_prepare` says what `prepare` would compile and what the runs will need in all, writing
nothing (`prepare --dry-run`); `estimate_workspace` says the same for the workspace as it stands
(`status --estimate`). Both read the database only, never a provider.

The next wave mirrors the compiler: each active thread's due steps come from `protocol.advance`
on the answers the database holds, are deduplicated by step key per (run, case) and skip steps
out of attempts, as in `compiler._advance_all`. So it is exactly what compiling would produce.

The projection plays every (run, case) forward with synthetic answers of assumed lengths, one
wave per round, branching on each LCA label that the Interaction-LJP thread reads (judgment or
clarification). Its minimum ends every consultation at its next label, its maximum takes three
clarification rounds, the forced final prediction and its extraction; "expected" weights the
branches by the clarification probability. It assumes no failures and no retries. Requests of a
wave already in flight are not counted again: the projection starts after that wave.

Assumptions, each replaced by what the workspace measured once it has answered requests:

- `CHARS_PER_TOKEN` = 1.3 prompt characters per token, about right for mostly-Chinese prompts on
  current tokenizers; measured as sum(prompt_chars) / sum(prompt_tokens) over requests whose
  provider reported `prompt_tokens`.
- `RESPONSE_CHARS`: an eval response ≈ 600 characters, a User Model reply ≈ 150; these feed the
  prompts of later steps (judge outputs feed none). Measured as the mean answer length per role.
- `COMPLETION_TOKENS` per request: eval 500, user 120, judge 400 (the default judge is a
  reasoning model whose thinking is billed as completion). Measured as the mean reported
  `completion_tokens` per role.
- `CLARIFY_PROBABILITY` = 0.5 that a consultation response asks rather than judges; measured
  from the answered underspecified-LCA and interaction labels once there are `MIN_LABELS`.

Cost uses prices shaped as in `report`: `{role: {"input": USD per 1M prompt tokens, "output":
USD per 1M completion tokens}}`, less the batch discount on the `batch` and `simulated` backends
(not `sync`); work left to the `manual` backend, or a role without a price, has no cost (None).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from lexpilot_batch import prompts
from lexpilot_batch.compiler import case_requests
from lexpilot_batch.config import (
    ROLES,
    Settings,
)
from lexpilot_batch.costs import DEFAULT_BATCH_DISCOUNT, check_prices, cost_usd
from lexpilot_batch.costs import total as total_cost
from lexpilot_batch.data import Case, Dataset, load_dataset, stored_case
from lexpilot_batch.errors import ConfigError, LexpilotError
from lexpilot_batch.protocols import PROTOCOLS
from lexpilot_batch.protocols.base import Answer, CaseContext, Step
from lexpilot_batch.protocols.interaction import MAX_ROUNDS, InteractionLJP, label_key
from lexpilot_batch.providers.session import ProviderOptions, Session
from lexpilot_batch.runs import (
    RunSpec,
    build_manifest,
    check_manifest,
    check_model,
    check_run_id,
    run_key,
)
from lexpilot_batch.store import DB_NAME
from lexpilot_batch.threads import due_for_case
from lexpilot_batch.waves import target_wave
from lexpilot_batch.workspace import Workspace

CHARS_PER_TOKEN = 1.3
RESPONSE_CHARS: dict[str, int] = {"eval": 600, "user": 150, "judge": 30}
COMPLETION_TOKENS: dict[str, int] = {"eval": 500, "user": 120, "judge": 400}
CLARIFY_PROBABILITY = 0.5
MIN_LABELS = 10  # answered labels needed before their clarification rate replaces the default

# The labels whose value decides how long a consultation goes on: the only branch points.
_BRANCHING = frozenset(label_key(k) for k in range(1, MAX_ROUNDS + 1))
_INTERACTION = InteractionLJP.task
_ANSWERED = ("answered", "discarded")  # what the compiler reads as an answer
_MAX_WAVES = 64  # far beyond any protocol's chain: more means a protocol never finishes


# --- The result ------------------------------------------------------------------------------


@dataclass
class Span:
    """A projected quantity: its minimum, probability-weighted expectation and maximum."""

    min: float = 0
    expected: float = 0
    max: float = 0

    def __add__(self, other: Span) -> Span:
        return Span(self.min + other.min, self.expected + other.expected, self.max + other.max)

    def map(self, f: Any) -> Span:
        return Span(f(self.min), f(self.expected), f(self.max))


@dataclass
class WaveRange:
    """How many more waves: all consultations ending at their next label, or going the distance."""

    min: int = 0
    max: int = 0


@dataclass
class RoleWave:
    """One role's requests in the next wave."""

    models: list[str]
    backend: str
    requests: int = 0
    prompt_chars: int = 0
    prompt_tokens: int = 0  # estimated from prompt_chars
    completion_tokens: int = 0  # estimated per request
    cost_usd: float | None = None


@dataclass
class RoleProjection:
    """One role's requests from the next wave to the end of every run."""

    models: list[str]
    backend: str
    requests: Span = field(default_factory=Span)
    prompt_chars: Span = field(default_factory=Span)
    prompt_tokens: Span = field(default_factory=Span)
    completion_tokens: Span = field(default_factory=Span)
    cost_usd: Span | None = None


@dataclass
class RunProjection:
    run_id: str
    model: str
    new: bool  # not yet registered in the workspace
    active_threads: int
    requests: Span = field(default_factory=Span)


@dataclass
class Assumptions:
    """The constants an estimate used, and how many answered requests measured each (0: default).

    Always assumed as well: no failures, hence no retries and no failed threads.
    """

    chars_per_token: float = CHARS_PER_TOKEN
    chars_per_token_measured_on: int = 0
    response_chars: dict[str, int] = field(default_factory=lambda: dict(RESPONSE_CHARS))
    response_chars_measured_on: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    completion_tokens: dict[str, int] = field(default_factory=lambda: dict(COMPLETION_TOKENS))
    completion_tokens_measured_on: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROLES, 0))
    clarify_probability: float = CLARIFY_PROBABILITY
    clarify_probability_measured_on: int = 0
    clarify_probability_given: bool = False
    batch_discount: float = DEFAULT_BATCH_DISCOUNT
    backends: dict[str, str] = field(default_factory=dict)


@dataclass
class Estimate:
    """Everything `render` shows; `to_json()` is the `--format json` shape."""

    mode: Literal["dry_run", "workspace"]
    runs: list[RunProjection]
    wave: int | None  # number of the next wave; None while a wave is in flight
    next_wave_source: Literal["compiled", "due", "in_flight", "nothing"]
    next_wave: dict[str, RoleWave]
    next_wave_cost_usd: float | None
    in_flight_wave: int | None
    in_flight_requests: dict[str, int]
    projection: dict[str, RoleProjection]
    projection_requests: Span
    projection_cost_usd: Span | None
    waves_remaining: WaveRange  # from the next wave on (after the one in flight, if any)
    prices_given: bool
    assumptions: Assumptions

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --- Opening a workspace without writing to it -------------------------------------------------


@contextlib.contextmanager
def open_readonly(root: Path | None, options: ProviderOptions) -> Iterator[tuple[Workspace | None, Session]]:
    """The workspace opened read-only (no lock, no writes), or None where there is none yet.

    Opening writable would create `state/`, the database and the lock, and record an id: a dry
    run must leave a folder exactly as it found it, so it needs this instead.
    """
    probe = Workspace(root, writable=False)
    if not (probe.state_dir / DB_NAME).is_file():
        yield None, Session(None, options)
        return
    with probe as ws:
        session = Session(ws, options)
        try:
            yield ws, session
        finally:
            session.close()


# --- Public entry points -----------------------------------------------------------------------


def dry_run_prepare(
    ws: Workspace | None,
    session: Session,
    spec: RunSpec,
    *,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
    clarify_probability: float | None = None,
) -> Estimate:
    """What `engine.prepare` of `spec` would compile, and the projection; writes nothing.

    Checks what `prepare` checks (model, run ids, dataset, prompts, an existing run's manifest)
    and fails the same way. `ws` None means no workspace exists yet.
    """
    check_prices(prices, batch_discount)
    tasks = spec.tasks
    model = check_model(spec.model)
    if spec.limit is not None and spec.limit < 1:
        raise ConfigError("--limit must be at least 1")
    dataset = load_dataset(spec.dataset, spec.categories)
    templates = prompts.load_templates(spec.prompts)
    with _snapshot(ws):
        state = _State.read(ws, session.options.retries)
        for raw in spec.run_ids:
            state.add_run(
                check_run_id(raw), model, spec.settings, dataset, spec.limit, templates, spec.speculate, tasks, session
            )
        return _build(state, "dry_run", session, prices, batch_discount, clarify_probability, ws)


def estimate_workspace(
    ws: Workspace,
    session: Session,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    *,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
    clarify_probability: float | None = None,
) -> Estimate:
    """The next wave of the workspace as it stands and the projection of all that remains."""
    check_prices(prices, batch_discount)
    with _snapshot(ws):
        state = _State.read(ws, session.options.retries)
        return _build(state, "workspace", session, prices, batch_discount, clarify_probability, ws)


@contextlib.contextmanager
def _snapshot(ws: Workspace | None) -> Iterator[None]:
    """Read the whole estimate from one database snapshot, even while a writer moves on.

    A deferred transaction that only reads, rolled back: it takes no write lock and writes nothing.
    """
    if ws is None or ws.store.conn.in_transaction:
        yield
        return
    ws.store.conn.execute("BEGIN")
    try:
        yield
    finally:
        ws.store.conn.execute("ROLLBACK")


# --- The workspace's state, and runs a dry run would add ----------------------------------------


@dataclass
class _Run:
    run_id: str
    model: str
    key: str
    dataset: str
    settings: Settings
    templates: dict[str, str]
    speculate: bool
    pk: int | None = None  # None: not in the workspace
    cases: dict[int, tuple[Case, str]] = field(default_factory=dict)  # for new runs: idx -> (case, class)

    @cached_property
    def templates_hash(self) -> str:
        return prompts.templates_hash(self.templates)

    @property
    def shape(self) -> tuple:
        """What a fresh (run, case) projection depends on besides the case."""
        return (self.dataset, self.templates_hash, self.speculate)


@dataclass
class _Pending:
    """A request of the wave in flight: answered by the time the next wave is compiled."""

    key: str
    role: str
    parser: str
    n_claims: int


@dataclass
class _Group:
    """One (run, case) with its active threads and what the database knows of its steps."""

    run: _Run
    case_idx: int
    ctx: CaseContext
    threads: list[tuple[str, str]]
    answers: dict[str, Answer] = field(default_factory=dict)
    history: dict[str, list] = field(default_factory=dict)
    in_flight: list[_Pending] = field(default_factory=list)

    @property
    def fresh(self) -> bool:
        return not (self.answers or self.history or self.in_flight)


@dataclass
class _State:
    ws: Workspace | None
    retries: int
    runs: dict[str, _Run] = field(default_factory=dict)  # by run key
    threads: dict[tuple[str, int], list[tuple[str, str]]] = field(default_factory=dict)  # active, by (key, idx)
    new_runs: set[str] = field(default_factory=set)
    latest_wave: int | None = None
    target: int | None = 1  # the wave the next compile writes into; None while one is in flight
    compiled: bool = False  # the target wave is compiled but not sent

    @classmethod
    def read(cls, ws: Workspace | None, retries: int) -> _State:
        state = cls(ws, retries)
        if ws is None:
            return state
        db = ws.store.conn
        state.latest_wave = db.execute("SELECT MAX(n) FROM waves").fetchone()[0]
        state.target, state.compiled = target_wave(db)
        for r in db.execute("SELECT pk, run_id, model, key, dataset, manifest, templates, speculate FROM runs"):
            state.runs[r["key"]] = _Run(
                r["run_id"],
                r["model"],
                r["key"],
                r["dataset"],
                Settings(**json.loads(r["manifest"])["settings"]),
                json.loads(r["templates"]),
                bool(r["speculate"]),
                r["pk"],
            )
        by_pk = {run.pk: run for run in state.runs.values()}
        for t in db.execute("SELECT run_pk, case_idx, task, variant FROM threads WHERE status = 'active' ORDER BY pk"):
            state.threads.setdefault((by_pk[t["run_pk"]].key, t["case_idx"]), []).append((t["task"], t["variant"]))
        return state

    def add_run(
        self,
        run_id: str,
        model: str,
        settings: Settings,
        dataset: Dataset,
        limit: int | None,
        templates: dict[str, str],
        speculate: bool,
        tasks: Sequence[str],
        session: Session,
    ) -> None:
        """What `runs.register_run` and `runs.add_threads` would do, in memory only."""
        key = run_key(run_id, model)
        indices = list(range(len(dataset.cases)))[: limit or None]
        run = self.runs.get(key)
        if run is not None and (run.run_id, run.model) != (run_id, model):
            raise ConfigError(f"run {run_id!r} collides with run {run.run_id!r}; choose another --run-id")
        if run is not None and run.pk is not None:
            self._check_manifest(run, settings, dataset, indices, templates, session)
            indices = indices[: len(self._manifest(run)["case_ids"])]
        elif run is None:
            run = _Run(run_id, model, key, dataset.sha256, settings, dict(templates), speculate)
            run.cases = {i: (dataset.cases[i], dataset.class_of(dataset.cases[i])) for i in indices}
            self.runs[key] = run
            self.new_runs.add(key)
        run.speculate = speculate  # `register_run` records the flag of the latest prepare
        existing = self._existing_threads(run)
        for task in tasks:
            protocol = PROTOCOLS[task]
            for i in indices:
                for variant in protocol.variants(dataset.cases[i]):
                    if (task, i, variant) not in existing:
                        existing.add((task, i, variant))
                        self.threads.setdefault((key, i), []).append((task, variant))

    def _manifest(self, run: _Run) -> dict:
        assert self.ws is not None
        row = self.ws.store.conn.execute("SELECT manifest FROM runs WHERE pk = ?", (run.pk,)).fetchone()
        return json.loads(row["manifest"])

    def _check_manifest(
        self,
        run: _Run,
        settings: Settings,
        dataset: Dataset,
        indices: list[int],
        templates: dict[str, str],
        session: Session,
    ) -> None:
        new = build_manifest(run.run_id, run.model, settings, dataset, indices, templates, session.endpoint_labels)
        check_manifest(self._manifest(run), new, run.run_id, run.model)

    def _existing_threads(self, run: _Run) -> set[tuple[str, int, str]]:
        """Every thread of the run, whatever its status, and those already added in memory."""
        out = {(task, i, variant) for (key, i), ts in self.threads.items() if key == run.key for task, variant in ts}
        if run.pk is not None and self.ws is not None:
            out |= {
                (r["task"], r["case_idx"], r["variant"])
                for r in self.ws.store.conn.execute(
                    "SELECT task, case_idx, variant FROM threads WHERE run_pk = ?", (run.pk,)
                )
            }
        return out

    def groups(self) -> Iterator[_Group]:
        """Every (run, case) with an active thread, its answers and its requests in flight."""
        db = self.ws.store.conn if self.ws is not None else None
        for (key, idx), threads in sorted(self.threads.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            run = self.runs[key]
            if run.pk is None:
                case, cause_class = run.cases[idx]
                yield _Group(run, idx, CaseContext(case, cause_class, run.templates, run.speculate), threads)
                continue
            assert db is not None
            row = db.execute(
                "SELECT data, cause_class FROM cases WHERE dataset = ? AND idx = ?", (run.dataset, idx)
            ).fetchone()
            ctx = CaseContext(stored_case(row["data"]), row["cause_class"], run.templates, run.speculate)
            group = _Group(run, idx, ctx, threads)
            group.history, group.answers = case_requests(db, run.pk, idx)
            if self.target is None:  # a wave in flight: its pending requests are answered first
                group.in_flight = [
                    _Pending(r["step"], r["role"], r["parser"], r["n_claims"])
                    for rows in group.history.values()
                    for r in rows
                    if r["status"] == "pending"
                ]
            yield group


# --- Playing a (run, case) forward ----------------------------------------------------------------


def _due(
    group: _Group, threads: Sequence[tuple[str, str]], answers: Mapping[str, Answer], retries: int
) -> tuple[list[Step], list[tuple[str, str]]]:
    """One compile of one (run, case), exactly as the compiler decides it: the due steps and the
    threads still active (finished threads and threads out of attempts drop out)."""
    due = due_for_case(group.ctx, [(t, t[0], t[1]) for t in threads], dict(answers), group.history, retries)
    return due.steps, [handle for handle, _, _ in due.active]


def _synthetic(step: Step | _Pending, response_chars: Mapping[str, int]) -> Answer:
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
    steps: Iterable[Step | _Pending], response_chars: Mapping[str, int], p: float, branch: bool
) -> list[tuple[float, dict[str, Answer]]]:
    """Every way these steps may be answered, with its probability: one per label combination."""
    fixed: dict[str, Answer] = {}
    labels: list[str] = []
    for step in steps:
        if branch and step.parser == "lca_label" and step.key in _BRANCHING:
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
class _Leaf:
    """One way a (run, case) may go to its end: probability, requests and prompt chars per role, waves."""

    prob: float
    requests: Counter
    chars: Counter
    waves: int


def _play(group: _Group, retries: int, response_chars: Mapping[str, int], p: float) -> list[_Leaf]:
    branch = any(task == _INTERACTION for task, _ in group.threads)
    leaves: list[_Leaf] = []

    def walk(
        answers: dict[str, Answer],
        threads: list[tuple[str, str]],
        prob: float,
        requests: Counter,
        chars: Counter,
        waves: int,
    ) -> None:
        while True:
            due, threads = _due(group, threads, answers, retries)
            if not due:
                leaves.append(_Leaf(prob, requests, chars, waves))
                return
            if waves >= _MAX_WAVES:
                raise LexpilotError(
                    f"case {group.ctx.case.case_number}: the projection does not end; "
                    "a protocol keeps asking for steps (a bug: please report it)"
                )
            waves += 1
            for step in due:
                requests[step.role] += 1
                chars[step.role] += len(step.prompt)
            outcomes = _outcomes(due, response_chars, p, branch)
            if len(outcomes) == 1:
                answers = {**answers, **outcomes[0][1]}
                continue
            for q, answered in outcomes:
                walk({**answers, **answered}, threads, prob * q, requests.copy(), chars.copy(), waves)
            return

    # Whatever is in flight is answered before the next wave is compiled: no request, no wave.
    for prob, answered in _outcomes(group.in_flight, response_chars, p, branch):
        walk({**group.answers, **answered}, list(group.threads), prob, Counter(), Counter(), 0)
    return leaves


def _span(leaves: Sequence[_Leaf], value: Any) -> Span:
    values = [value(leaf) for leaf in leaves]
    return Span(min(values), sum(leaf.prob * v for leaf, v in zip(leaves, values, strict=True)), max(values))


@dataclass
class _Tally:
    requests: dict[str, Span] = field(default_factory=lambda: {r: Span() for r in ROLES})
    chars: dict[str, Span] = field(default_factory=lambda: {r: Span() for r in ROLES})
    total: Span = field(default_factory=Span)
    waves_min: int = 0
    waves_max: int = 0

    def add(self, leaves: Sequence[_Leaf]) -> Span:
        for role in ROLES:
            self.requests[role] += _span(leaves, lambda leaf, role=role: leaf.requests[role])
            self.chars[role] += _span(leaves, lambda leaf, role=role: leaf.chars[role])
        total = _span(leaves, lambda leaf: sum(leaf.requests.values()))
        self.total += total
        # Every (run, case) moves in the same waves: the run lasts as long as its longest one.
        self.waves_min = max(self.waves_min, min(leaf.waves for leaf in leaves))
        self.waves_max = max(self.waves_max, max(leaf.waves for leaf in leaves))
        return total


# --- Calibration ------------------------------------------------------------------------------


def _assumptions(
    ws: Workspace | None, clarify_probability: float | None, discount: float, backends: Mapping[str, str]
) -> Assumptions:
    a = Assumptions(batch_discount=discount, backends=dict(backends))
    if clarify_probability is not None:
        if not 0 <= clarify_probability <= 1:
            raise ConfigError(f"the clarification probability must be between 0 and 1, not {clarify_probability}")
        a.clarify_probability, a.clarify_probability_given = clarify_probability, True
    if ws is None:
        return a
    db = ws.store.conn
    chars, tokens, n = db.execute(
        "SELECT SUM(prompt_chars), SUM(prompt_tokens), COUNT(*) FROM requests WHERE prompt_tokens > 0"
    ).fetchone()
    if n:
        a.chars_per_token, a.chars_per_token_measured_on = chars / tokens, n
    for r in db.execute(
        "SELECT role, AVG(LENGTH(text)) AS mean, COUNT(*) AS n FROM requests"
        " WHERE status IN ('answered', 'discarded') AND parser = 'text' GROUP BY role"
    ):
        a.response_chars[r["role"]], a.response_chars_measured_on[r["role"]] = round(r["mean"]), r["n"]
    for r in db.execute(
        "SELECT role, AVG(completion_tokens) AS mean, COUNT(*) AS n FROM requests"
        " WHERE status IN ('answered', 'discarded') AND completion_tokens > 0 GROUP BY role"
    ):
        a.completion_tokens[r["role"]], a.completion_tokens_measured_on[r["role"]] = round(r["mean"]), r["n"]
    keys = sorted(_BRANCHING)
    asks, n = db.execute(
        f"SELECT SUM(value = ?), COUNT(*) FROM requests WHERE status IN ('answered', 'discarded')"
        f" AND parser = 'lca_label' AND step IN ({', '.join('?' * len(keys))})",
        (json.dumps("clarification"), *keys),
    ).fetchone()
    if n >= MIN_LABELS and not a.clarify_probability_given:
        a.clarify_probability, a.clarify_probability_measured_on = asks / n, n
    return a


# --- Building the estimate ---------------------------------------------------------------------


def _build(
    state: _State,
    mode: Literal["dry_run", "workspace"],
    session: Session,
    prices: Mapping[str, Mapping[str, float]] | None,
    discount: float,
    clarify_probability: float | None,
    ws: Workspace | None,
) -> Estimate:
    a = _assumptions(ws, clarify_probability, discount, session.backends)
    models: dict[str, set[str]] = {role: set() for role in ROLES}  # of the projection
    wave_models: dict[str, set[str]] = {role: set() for role in ROLES}
    wave: dict[str, RoleWave] = {}
    tally = _Tally()
    per_run: dict[str, RunProjection] = {}
    memo: dict[tuple, list[_Leaf]] = {}

    for group in state.groups():
        run = group.run
        summary = per_run.setdefault(run.key, RunProjection(run.run_id, run.model, run.key in state.new_runs, 0))
        summary.active_threads += len(group.threads)
        if state.target is not None:
            due, _ = _due(group, group.threads, group.answers, state.retries)
            for step in due:
                entry = wave.setdefault(step.role, RoleWave([], session.backends[step.role]))
                entry.requests += 1
                entry.prompt_chars += len(step.prompt)
                wave_models[step.role].add(run.settings.model_for(step.role, run.model))
        shape = (run.shape, group.case_idx, tuple(group.threads))
        leaves = memo.get(shape) if group.fresh else None
        if leaves is None:
            leaves = _play(group, state.retries, a.response_chars, a.clarify_probability)
            if group.fresh:
                memo[shape] = leaves
        summary.requests += tally.add(leaves)
        for role in ROLES:
            if max(leaf.requests[role] for leaf in leaves):
                models[role].add(run.settings.model_for(role, run.model))

    source: Literal["compiled", "due", "in_flight", "nothing"]
    if state.target is None:
        source = "in_flight"
    elif mode == "workspace" and state.compiled:
        source, wave = "compiled", _compiled_wave(state, session)
    else:
        source = "due" if wave else "nothing"
    price_of = (lambda role: None) if prices is None else prices.get
    for role, entry in wave.items():
        entry.models = sorted(wave_models[role] | set(entry.models))
        entry.prompt_tokens = round(entry.prompt_chars / a.chars_per_token)
        entry.completion_tokens = entry.requests * a.completion_tokens[role]
        entry.cost_usd = cost_usd(entry.prompt_tokens, entry.completion_tokens, price_of(role), entry.backend, discount)
    wave = {role: wave[role] for role in ROLES if role in wave}

    projection: dict[str, RoleProjection] = {}
    for role in ROLES:
        requests = tally.requests[role]
        if not requests.max:
            continue
        p = RoleProjection(sorted(models[role]), session.backends[role], requests, tally.chars[role])
        p.prompt_tokens = p.prompt_chars.map(lambda c: round(c / a.chars_per_token))
        p.completion_tokens = requests.map(lambda n, role=role: round(n * a.completion_tokens[role]))
        if prices is not None:
            p.cost_usd = _cost_span(p, price_of(role), discount)
        projection[role] = p

    return Estimate(
        mode=mode,
        runs=[per_run[key] for key in state.runs if key in per_run],
        wave=state.target,
        next_wave_source=source,
        next_wave=wave,
        next_wave_cost_usd=total_cost(w.cost_usd for w in wave.values()) if prices is not None else None,
        in_flight_wave=state.latest_wave if state.target is None else None,
        in_flight_requests=_in_flight(state),
        projection=projection,
        projection_requests=tally.total,
        projection_cost_usd=_projection_cost(projection) if prices is not None else None,
        waves_remaining=WaveRange(tally.waves_min, tally.waves_max),
        prices_given=prices is not None,
        assumptions=a,
    )


def _cost_span(p: RoleProjection, price: Mapping[str, float] | None, discount: float) -> Span | None:
    costs = [
        cost_usd(getattr(p.prompt_tokens, k), getattr(p.completion_tokens, k), price, p.backend, discount)
        for k in ("min", "expected", "max")
    ]
    return None if costs[0] is None else Span(*costs)  # type: ignore[arg-type]


def _projection_cost(projection: Mapping[str, RoleProjection]) -> Span | None:
    spans = [p.cost_usd for p in projection.values()]
    if any(s is None for s in spans):
        return None
    return sum((s for s in spans if s is not None), Span())


def _compiled_wave(state: _State, session: Session) -> dict[str, RoleWave]:
    """The pending requests of the compiled, unsent wave, per role, as the database holds them."""
    assert state.ws is not None
    out: dict[str, RoleWave] = {}
    for r in state.ws.store.conn.execute(
        "SELECT role, model, COUNT(*) AS n, SUM(prompt_chars) AS chars FROM requests"
        " WHERE wave = ? AND status = 'pending' GROUP BY role, model",
        (state.target,),
    ):
        entry = out.setdefault(r["role"], RoleWave([], session.backends[r["role"]]))
        entry.models.append(r["model"])
        entry.requests += r["n"]
        entry.prompt_chars += r["chars"]
    return out


def _in_flight(state: _State) -> dict[str, int]:
    if state.target is not None or state.ws is None:
        return {}
    rows = state.ws.store.conn.execute(
        "SELECT role, COUNT(*) AS n FROM requests WHERE wave = ? AND status = 'pending' GROUP BY role",
        (state.latest_wave,),
    )
    counts = {r["role"]: r["n"] for r in rows}
    return {role: counts[role] for role in ROLES if role in counts}


# --- Rendering -------------------------------------------------------------------------------


def _n(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.4f}"


def _three(span: Span, fmt: Any = _n) -> str:
    return f"{fmt(span.min)} / {fmt(span.expected)} / {fmt(span.max)}"


def render(estimate: Estimate) -> str:
    """A terminal table: next wave, projection, waves left, cost, and the assumptions made."""
    e, a = estimate, estimate.assumptions
    lines = ["Dry run: nothing was written." if e.mode == "dry_run" else "Estimate for this workspace."]
    if e.runs:
        lines.append("Runs with work left (requests min / expected / max):")
        for r in e.runs:
            lines.append(
                f"  {r.run_id}  {r.model}{'  (new)' if r.new else ''}  {r.active_threads} active threads, "
                f"{_three(r.requests)} requests"
            )
    if e.in_flight_wave is not None:
        n = sum(e.in_flight_requests.values())
        lines.append(
            f"Wave {e.in_flight_wave} is under way ({n} requests in flight); "
            "new work joins the next wave, and the projection starts after it."
        )

    if e.next_wave:
        what = "compiled, not yet submitted" if e.next_wave_source == "compiled" else "what compiling would produce"
        lines.append(f"\nNext wave {e.wave} ({what}):")
        lines.append(
            f"  {'role':<7}{'backend':<11}{'requests':>10}{'prompt chars':>14}{'~prompt tok':>13}"
            f"{'~compl. tok':>13}{'~cost USD':>12}  model(s)"
        )
        for role, w in e.next_wave.items():
            lines.append(
                f"  {role:<7}{w.backend:<11}{w.requests:>10,}{w.prompt_chars:>14,}{w.prompt_tokens:>13,}"
                f"{w.completion_tokens:>13,}{_usd(w.cost_usd) if e.prices_given else '-':>12}"
                f"  {', '.join(w.models)}"
            )
    elif e.next_wave_source != "in_flight":
        lines.append("\nNothing is due: every thread is finished." if not e.projection else "\nNothing is due now.")

    if e.projection:
        lines.append("\nProjection to the end of every run (min / expected / max):")
        lines.append(f"  {'role':<7}{'requests':>24}{'~prompt tokens':>34}{'~completion tokens':>34}")
        for role, p in e.projection.items():
            lines.append(
                f"  {role:<7}{_three(p.requests):>24}{_three(p.prompt_tokens):>34}{_three(p.completion_tokens):>34}"
            )
        lines.append(f"  {'total':<7}{_three(e.projection_requests):>24}")
        if e.prices_given:
            lines.append(
                "  cost USD: "
                + ", ".join(
                    f"{role} {_three(p.cost_usd, _usd) if p.cost_usd else 'n/a'}" for role, p in e.projection.items()
                )
                + f"; total {_three(e.projection_cost_usd, _usd) if e.projection_cost_usd else 'n/a'}"
            )
        after = " after the one in flight" if e.in_flight_wave is not None else ""
        lines.append(f"Waves remaining{after}: {e.waves_remaining.min} to {e.waves_remaining.max}")
    if e.prices_given:
        lines.append(
            f"Cost: list price per 1M tokens x (1 - {a.batch_discount:g}) on batch/simulated backends, "
            "full price on sync, n/a on manual or where a role has no price."
        )
    lines.append("Assumptions: " + _assumption_text(a))
    return "\n".join(lines)


def _measured(n: int) -> str:
    return f"measured on {n}" if n else "default"


def _assumption_text(a: Assumptions) -> str:
    clarify = "given" if a.clarify_probability_given else _measured(a.clarify_probability_measured_on)
    return (
        "; ".join(
            [
                f"{a.chars_per_token:.2f} prompt chars/token ({_measured(a.chars_per_token_measured_on)})",
                f"clarification probability {a.clarify_probability:.2f} ({clarify})",
                "response chars "
                + ", ".join(
                    f"{r} {a.response_chars[r]} ({_measured(a.response_chars_measured_on[r])})"
                    for r in ("eval", "user")
                ),
                "completion tokens/request "
                + ", ".join(
                    f"{r} {a.completion_tokens[r]} ({_measured(a.completion_tokens_measured_on[r])})" for r in ROLES
                ),
                "no failures or retries",
            ]
        )
        + "."
    )
