"""Building an estimate: `dry_run_prepare` and `estimate_workspace`, the next wave, the projection
summed over every (run, case), and their cost.

The next wave mirrors the compiler: each active thread's due steps come from `protocol.advance`
on the answers the database holds, are deduplicated by step key per (run, case) and skip steps
out of attempts, as in `compiler._advance_all`. So it is exactly what compiling would produce.

Cost uses prices shaped as in `report`: `{role: {"input": USD per 1M prompt tokens, "output":
USD per 1M completion tokens}}`, less the batch discount on the `batch` and `simulated` backends
(not `sync`); work left to the `manual` backend, or a role without a price, has no cost (None).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from typing import Literal

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.settings import ROLES
from lexpilot_batch.data import open_dataset
from lexpilot_batch.engine.off_peak import OFF_PEAK
from lexpilot_batch.engine.request_files import file_group
from lexpilot_batch.engine.session import Session
from lexpilot_batch.engine.tail import Spent, TailPolicy, sent_spent, wave_travel
from lexpilot_batch.estimate import off_peak
from lexpilot_batch.estimate.assumptions import (
    Assumptions,
    Estimate,
    RoleProjection,
    RoleWave,
    RunProjection,
    Span,
    WaveRange,
)
from lexpilot_batch.estimate.calibration import calibrate
from lexpilot_batch.estimate.projection import Leaf, Tally, due_steps, play
from lexpilot_batch.estimate.state import RunView, State, snapshot
from lexpilot_batch.estimate.tail import group_sizes, project_auto, project_tail_sync
from lexpilot_batch.providers.backends import BATCH
from lexpilot_batch.providers.prices import (
    DEFAULT_BATCH_DISCOUNT,
    check_prices,
    cost_usd,
    price_for,
    refuse_misspelt_prices,
)
from lexpilot_batch.providers.prices import total as total_cost
from lexpilot_batch.providers.routing.routes import Route
from lexpilot_batch.state.states import FileState, RequestState
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.choices_memory import with_remembered_choices
from lexpilot_batch.study.dataset_memory import refuse_if_changed, with_remembered_dataset
from lexpilot_batch.study.lineup import plan_runs
from lexpilot_batch.study.price_memory import study_models
from lexpilot_batch.study.runs import RunSpec, check_case_limit, check_run_id, protocol_variants
from lexpilot_batch.util import clock


def dry_run_prepare(
    ws: Workspace | None,
    session: Session,
    spec: RunSpec,
    *,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
    clarify_probability: float | None = None,
) -> Estimate:
    """What `engine.loop.prepare` of `spec` would compile, and the projection; writes nothing.

    Checks what `prepare` checks (model, run ids, dataset, prompts, an existing run's manifest)
    and fails the same way. `ws` None means no workspace exists yet. As in `prepare`, the dataset
    is validated in one pass that keeps no case; the cases of new runs are read again one at a
    time, as the projection reaches them.
    """
    check_prices(prices, batch_discount)
    remembered = None
    if ws is not None:  # as `prepare` reads it: without --dataset, the workspace's own
        spec, _, remembered = with_remembered_dataset(ws.store.conn, spec)
        spec, _ = with_remembered_choices(ws.store.conn, spec)
    refuse_misspelt_prices(session.options.prices, study_models(ws, spec), "prepare --dry-run")
    tasks = spec.tasks
    plans = plan_runs(spec, session, sends=False)  # an estimate sends nothing: no SDK needed
    run_ids = [check_run_id(raw) for raw in spec.run_ids]
    check_case_limit(spec.limit)
    dataset = open_dataset(spec.dataset, spec.categories, variants=protocol_variants(tasks))
    if ws is not None:
        refuse_if_changed(ws.store.conn, remembered, dataset)
    templates = prompts.load_templates(spec.prompts)
    with snapshot(ws):
        state = State.read(ws, session.options.retries)
        for plan in plans:
            for run_id in run_ids:
                state.add_run(run_id, plan, dataset, spec.limit, templates, spec.speculate, tasks)
        return build(state, "dry_run", session, prices, batch_discount, clarify_probability, ws)


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
    with snapshot(ws):
        state = State.read(ws, session.options.retries)
        return build(state, "workspace", session, prices, batch_discount, clarify_probability, ws)


def build(
    state: State,
    mode: Literal["dry_run", "workspace"],
    session: Session,
    prices: Mapping[str, Mapping[str, float]] | None,
    discount: float,
    clarify_probability: float | None,
    ws: Workspace | None,
) -> Estimate:
    backends = _role_backends(state, session)
    a = calibrate(ws, clarify_probability, discount, backends)
    routes: dict[Hashable, Route] = {}  # each file group's route (`request_files.file_group`)
    run_groups: dict[str, dict[str, Hashable]] = {}  # run key -> role -> its file group
    wave_parts: dict[tuple[Hashable, str], list[int]] = {}  # next wave: (group, role) -> [requests, chars]
    models: dict[str, set[str]] = {role: set() for role in ROLES}  # of the projection
    wave_models: dict[str, set[str]] = {role: set() for role in ROLES}
    wave: dict[str, RoleWave] = {}
    tally = Tally()
    per_run: dict[str, RunProjection] = {}
    memo: dict[tuple, list[Leaf]] = {}  # fresh (run, case) projections by shape: runs alike share them
    memo_case: int | None = None
    by_model: dict[tuple[str, str], list[Span]] = {}  # (role, model) -> [requests, prompt chars]

    for group in state.groups():
        if group.case_idx != memo_case:  # groups come in case order: no later group reads this memo
            memo, memo_case = {}, group.case_idx
        run = group.run
        groups = run_groups.get(run.key)
        if groups is None:
            groups = run_groups[run.key] = {}
            for role in ROLES:
                route = session.route(role, run.settings.model_for(role, run.model), run.requests[role].provider)
                groups[role] = file_group(route)
                routes.setdefault(groups[role], route)
        summary = per_run.setdefault(run.key, RunProjection(run.run_id, run.model, run.key in state.new_runs, 0))
        summary.active_threads += len(group.threads)
        if state.target is not None:
            due, _ = due_steps(group, group.threads, group.answers, state.retries)
            for step in due:
                entry = wave.setdefault(step.role, RoleWave([], backends[step.role]))
                entry.requests += 1
                entry.prompt_chars += len(step.prompt)
                wave_models[step.role].add(run.settings.model_for(step.role, run.model))
                part = wave_parts.setdefault((groups[step.role], step.role), [0, 0])
                part[0] += 1
                part[1] += len(step.prompt)
        shape = (run.shape, group.case_idx, tuple(group.threads))
        leaves = memo.get(shape) if group.fresh else None
        if leaves is None:
            leaves = play(group, state.retries, a.response_chars, a.clarify_probability)
            if group.fresh:
                memo[shape] = leaves
        before = {role: (tally.requests[role], tally.chars[role]) for role in ROLES}
        summary.requests += tally.add(leaves, groups, group.in_flight)
        for role in ROLES:  # what this (run, case) adds, by the model that serves the role
            spans = by_model.setdefault((role, run.settings.model_for(role, run.model)), [Span(), Span()])
            spans[0] += _minus(tally.requests[role], before[role][0])
            spans[1] += _minus(tally.chars[role], before[role][1])
        for role in ROLES:
            if max(leaf.requests[role] for leaf in leaves):
                models[role].add(run.settings.model_for(role, run.model))

    source: Literal["compiled", "due", "in_flight", "nothing"]
    if state.target is None:
        source = "in_flight"
    elif mode == "workspace" and state.compiled:
        source, wave = FileState.COMPILED, _compiled_wave(state)
    else:
        source = "due" if wave else "nothing"

    def price_of(role: str, model: str | None) -> Mapping[str, float] | None:
        return price_for(prices, role, model)

    for role, entry in wave.items():
        entry.models = sorted(wave_models[role] | set(entry.models))
        entry.prompt_tokens = round(entry.prompt_chars / a.chars_per_token)
        entry.completion_tokens = entry.requests * a.completion_tokens[role]
        entry.cost_usd = _wave_cost(entry, role, wave_parts, routes, a, price_of, discount)
    # What the workspace sent so far, as the compiler's premium budget counts it (`tail.sent_spent`).
    # A compiled, unsent target wave is compiled again, and projected as due: not counted twice.
    policy = session.tail_policy(projecting=True)
    again = state.target if state.target is not None and state.compiled else None
    spent = sent_spent(ws.store.conn, policy.measures, but_wave=again) if ws is not None else None
    if source == "due":
        _apply_tail(wave, wave_parts, routes, policy, spent, a, price_of, discount)
    wave = {role: wave[role] for role in ROLES if role in wave}

    projection: dict[str, RoleProjection] = {}
    for role in ROLES:
        requests = tally.requests[role]
        if not requests.max:
            continue
        p = RoleProjection(sorted(models[role]), backends[role], requests, tally.chars[role])
        p.prompt_tokens = p.prompt_chars.map(lambda c: round(c / a.chars_per_token))
        p.completion_tokens = requests.map(lambda n, role=role: round(n * a.completion_tokens[role]))
        projection[role] = p
    cost_by_model = _cost_by_model(by_model, backends, a, price_of, discount)
    # Models priced by the hour: both ways; under `--off-peak`, at the off-peak price (`off_peak`).
    hours = off_peak.choices(cost_by_model, backends, prices, bool(session.tail.get(OFF_PEAK)), clock.now())
    # (Nothing left to project is no missing price: the cost so far is priced as usual.)
    priced = any(cost is not None for cost in cost_by_model.values()) or not cost_by_model
    for role, p in projection.items():
        mine = [cost for (r, _), cost in cost_by_model.items() if r == role]
        known = [c for c in mine if c is not None]
        p.cost_usd = sum(known, Span()) if priced and len(known) == len(mine) else None
    models_cost: dict[str, Span | None] = {}
    for (_, model), cost in cost_by_model.items():
        so_far = models_cost.get(model, Span())
        models_cost[model] = None if so_far is None or cost is None else so_far + cost

    projection_cost = _projection_cost(projection) if priced else None
    # The projected waves by the numbers the workspace will give them: the next compile's onwards.
    first = state.target if state.target is not None else (state.latest_wave or 0) + 1
    tally.in_flight.wave = state.latest_wave if state.target is None else None
    tail = project_tail_sync(tally, routes, session.tail_sync, a, prices, discount, first)
    auto = project_auto(tally, routes, policy, a, prices, discount, spent, first)
    if tail.premium_usd is not None and projection_cost is not None and projection_cost.expected:
        tail.premium_share = tail.premium_usd / projection_cost.expected
    return Estimate(
        mode=mode,
        runs=[per_run[key] for key in state.runs if key in per_run],
        wave=state.target,
        next_wave_source=source,
        next_wave=wave,
        next_wave_cost_usd=total_cost(w.cost_usd for w in wave.values()) if priced else None,
        in_flight_wave=state.latest_wave if state.target is None else None,
        in_flight_requests=_in_flight(state),
        projection=projection,
        projection_requests=tally.total,
        projection_cost_usd=projection_cost,
        waves_remaining=WaveRange(tally.waves_min, tally.waves_max),
        prices_given=priced,
        projection_cost_by_model=models_cost if priced else {},
        assumptions=a,
        tail_sync=tail,
        tail_auto=auto,
        off_peak=hours,
    )


def _apply_tail(
    wave: dict[str, RoleWave],
    parts: Mapping[tuple[Hashable, str], list[int]],
    routes: Mapping[Hashable, Route],
    policy: TailPolicy,
    spent: Spent | None,
    a: Assumptions,
    price_of: Callable[[str, str | None], Mapping[str, float] | None],
    discount: float,
) -> None:
    """The next wave's groups as the compiler would send them (`tail.wave_travel`: `--tail-sync N`
    or `--tail auto`, from what was compiled before it): a role whose groups all go one other way
    is shown on that backend (`sync`, `flex`), one partly so as `mixed`, and its cost is each
    group's on its own backend."""
    sizes = group_sizes(parts, routes)
    travels = wave_travel(policy, sizes, replace(spent) if spent is not None else None)
    if all(backend == routes[group].backend for group, backend in travels.items()):
        return
    for role, entry in wave.items():
        mine = [(group, n, chars) for (group, r), (n, chars) in parts.items() if r == role]
        chosen = {travels[group] for group, _, _ in mine}
        entry.backend = chosen.pop() if len(chosen) == 1 else MIXED
        entry.cost_usd = total_cost(
            cost_usd(
                round(chars / a.chars_per_token),
                n * a.completion_tokens[role],
                price_of(role, routes[group].model),
                travels[group],
                discount,
                round(chars / a.chars_per_token) * a.cached_share[role],
            )
            for group, n, chars in mine
        )


MIXED = "mixed"  # a role whose models go through different backends


def _role_backends(state: State, session: Session) -> dict[str, str]:
    """Each role's backend over the runs with work left: the one they share, or `mixed`."""
    active = {key for key, _ in state.threads}
    found: dict[str, set[str]] = {role: set() for role in ROLES}
    for key in active:
        run = state.runs[key]
        for role in ROLES:
            found[role].add(_route_backend(session, run, role))
    fallback = {role: session.choices.get(role, BATCH) for role in ROLES}
    return {role: (MIXED if len(b) > 1 else next(iter(b), fallback[role])) for role, b in found.items()}


def _route_backend(session: Session, run: RunView, role: str) -> str:
    return session.route(role, run.settings.model_for(role, run.model), run.requests[role].provider).backend


def _cost(
    prompt_tokens: float,
    completion_tokens: float,
    price: Mapping[str, float] | None,
    backend: str,
    discount: float,
    cached_share: float = 0.0,
) -> float | None:
    """`prices.cost_usd`, `cached_share` of the prompt tokens cached (`Assumptions.cached_share`); a
    role split over backends has no single price factor, so no cost."""
    if backend == MIXED:
        return None
    return cost_usd(prompt_tokens, completion_tokens, price, backend, discount, prompt_tokens * cached_share)


def _minus(after: Span, before: Span) -> Span:
    return Span(after.min - before.min, after.expected - before.expected, after.max - before.max)


def _wave_cost(
    entry: RoleWave,
    role: str,
    parts: Mapping[tuple[Hashable, str], list[int]],
    routes: Mapping[Hashable, Route],
    a: Assumptions,
    price_of: Callable[[str, str | None], Mapping[str, float] | None],
    discount: float,
) -> float | None:
    """The next wave's cost of a role: each model's part at its own price (one price for the
    role's tokens when the parts are not known, as for a compiled wave of one model)."""
    mine = [(routes[group].model, n, chars) for (group, r), (n, chars) in parts.items() if r == role]
    if not mine or sum(n for _, n, _ in mine) != entry.requests:
        models: list[str | None] = [*entry.models] or [None]
        prices = [price_of(role, m) for m in models]
        price = prices[0] if all(p == prices[0] for p in prices) else None
        return _cost(entry.prompt_tokens, entry.completion_tokens, price, entry.backend, discount, a.cached_share[role])
    return total_cost(
        _cost(
            round(chars / a.chars_per_token),
            n * a.completion_tokens[role],
            price_of(role, m),
            entry.backend,
            discount,
            a.cached_share[role],
        )
        for m, n, chars in mine
    )


def _cost_by_model(
    by_model: Mapping[tuple[str, str], list[Span]],
    backends: Mapping[str, str],
    a: Assumptions,
    price_of: Callable[[str, str | None], Mapping[str, float] | None],
    discount: float,
) -> dict[tuple[str, str], Span | None]:
    """The projected cost of each (role, model): its tokens at its own price."""
    out: dict[tuple[str, str], Span | None] = {}
    for (role, model), (requests, chars) in by_model.items():
        if not requests.max:
            continue
        price = price_of(role, model)
        costs = [
            _cost(
                round(getattr(chars, k) / a.chars_per_token),
                round(getattr(requests, k) * a.completion_tokens[role]),
                price,
                backends[role],
                discount,
                a.cached_share[role],
            )
            for k in ("min", "expected", "max")
        ]
        out[(role, model)] = None if costs[0] is None else Span(*costs)  # type: ignore[arg-type]
    return out


def _projection_cost(projection: Mapping[str, RoleProjection]) -> Span | None:
    spans = [p.cost_usd for p in projection.values()]
    if any(s is None for s in spans):
        return None
    return sum((s for s in spans if s is not None), Span())


def _compiled_wave(state: State) -> dict[str, RoleWave]:
    """The pending requests of the compiled, unsent wave, per role, as the database holds them."""
    assert state.ws is not None
    out: dict[str, RoleWave] = {}
    for r in state.ws.store.conn.execute(
        "SELECT q.role, q.model, f.backend, COUNT(*) AS n, SUM(q.prompt_chars) AS chars FROM requests q"
        f" JOIN files f ON f.pk = q.file_pk WHERE q.wave = ? AND q.status = '{RequestState.PENDING}' GROUP BY q.role, q.model, f.backend",
        (state.target,),
    ):
        entry = out.setdefault(r["role"], RoleWave([], r["backend"]))
        if entry.backend != r["backend"]:
            entry.backend = MIXED
        if r["model"] not in entry.models:
            entry.models.append(r["model"])
        entry.requests += r["n"]
        entry.prompt_chars += r["chars"]
    return out


def _in_flight(state: State) -> dict[str, int]:
    if state.target is not None or state.ws is None:
        return {}
    rows = state.ws.store.conn.execute(
        f"SELECT role, COUNT(*) AS n FROM requests WHERE wave = ? AND status = '{RequestState.PENDING}' GROUP BY role",
        (state.latest_wave,),
    )
    counts = {r["role"]: r["n"] for r in rows}
    return {role: counts[role] for role in ROLES if role in counts}
