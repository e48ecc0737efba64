"""A study's lineup: for each evaluated model, what each role's requests carry and where they go.

`plan_runs` reads every model name (`providers.registry`), builds each role's body in its
provider's dialect (`providers.bodies.request`) with the model's own options, and resolves its route
(`providers.routing.routes`), so that every mistake — an unknown prefix, a provider without a Batch API
asked for batches, a `--model-arg` for a model the command does not use — is refused before any
run is registered or anything compiled. No key is needed for any of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from lexpilot_batch.benchmark.settings import ROLES, Settings
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import MANUAL, SIMULATED
from lexpilot_batch.providers.bodies.contract import check_role_body
from lexpilot_batch.providers.bodies.request import (
    REASONING_EFFORTS,
    applied_settings,
    is_openai_reasoning_model,
    role_request,
)
from lexpilot_batch.providers.prefixes import ModelName, parse_model
from lexpilot_batch.providers.registry import PROVIDERS, guess_profile, missing_sdk
from lexpilot_batch.providers.routing.routes import ModelRoute, Route
from lexpilot_batch.study.model_list import ModelOptions
from lexpilot_batch.study.runs import RunPlan, RunSpec, check_model

_OPTION = {"eval": "--model", "user": "--user-model", "judge": "--judge-model"}


class Routing(Protocol):
    """Where requests go, as a command's session resolves it (`engine.session.Session`)."""

    def use_model_routes(self, routes: Mapping[str, ModelRoute]) -> None: ...

    def route(self, role: str, model: str, provider: str | None) -> Route: ...

    def check_flex(self, routes: list[Route], models: set[str]) -> None: ...


def plan_runs(spec: RunSpec, session: Routing, *, sends: bool = True) -> list[RunPlan]:
    """One `RunPlan` per evaluated model of `spec`, in the order given. `sends`: the plans are to be
    sent (`prepare`), so each route's SDK must be installed; an estimate sends nothing."""
    if not spec.models:
        check_model(None)  # raises: no evaluated model
    evals = [check_model(m) for m in spec.models]
    twice = sorted({m for m in evals if evals.count(m) > 1})
    if twice:
        raise ConfigError(f"--model {twice[0]} is given twice")
    settings = spec.settings
    names: dict[str, ModelName] = {}
    for role, given in (("user", settings.user_model), ("judge", settings.judge_model)):
        check_model(given, _OPTION[role])
        names[given] = parse_model(given, _OPTION[role])
    names.update({m: parse_model(m, "--model") for m in evals})
    unused = sorted(set(spec.model_options) - set(names))
    if unused:
        raise ConfigError(
            f"options for {unused[0]} (--model-arg or a model list) name no model of this command; "
            f"its models are {', '.join(sorted(names))}"
        )
    effort = spec.reasoning_effort
    if effort is not None and effort not in REASONING_EFFORTS:
        raise ConfigError(f"--reasoning-effort must be one of {', '.join(REASONING_EFFORTS)}, not {effort!r}")
    session.use_model_routes({name: o.route for name, o in spec.model_options.items()})
    plans = []
    routes: list[Route] = []
    for model in evals:
        requests, endpoints = {}, {}
        for role in ROLES:
            registered = settings.model_for(role, model)
            name = names[registered]
            options = spec.model_options.get(registered, ModelOptions())
            request = role_request(
                role, name, settings, reasoning_effort=effort, args=options.args, reasoning=options.reasoning
            )
            route = session.route(role, registered, request.provider)
            routes.append(route)
            if sends:
                _check_sdk(role, registered, route)
            _check_bare_reasoning(role, name, request.body, route)
            check_role_body(role, name, request.body, reasoning=options.reasoning)
            requests[role], endpoints[role] = request, route.label
        plans.append(RunPlan(model, applied_settings(settings, requests), requests, endpoints))
    session.check_flex(routes, set(names))
    if effort is not None and not any(
        r.body.get("reasoning_effort") == effort for p in plans for r in p.requests.values()
    ):
        raise ConfigError(
            "--reasoning-effort applies to OpenAI reasoning models (openai/o4-mini, azure/... with reasoning = true "
            "in a model list), and no model of this command is one; for another model use --model-arg "
            "MODEL:reasoning_effort=..."
        )
    return plans


def _check_sdk(role: str, model: str, route: Route) -> None:
    """A route whose API's SDK is not installed would stop at its first submit: say so before
    anything is registered (a rehearsal too: it sends through the same SDK, `routes`)."""
    if route.backend == MANUAL:
        return  # its files are run elsewhere
    missing = missing_sdk(route.api)
    if missing is not None:
        raise ConfigError(f"{model} ({role} role): {missing}. Nothing was registered or compiled.")


def _check_bare_reasoning(role: str, name: ModelName, body: dict, route: Route) -> None:
    """A bare name of an OpenAI reasoning model, sent to OpenAI (or rehearsed), would be refused on
    every request: say how to name it instead of sending them."""
    if name.provider is not None or not is_openai_reasoning_model(name.sent):
        return
    home = PROVIDERS.get(guess_profile(route.endpoint.base_url))
    openai_like = route.backend == SIMULATED or (home is not None and home.first_party)
    if openai_like and ("max_tokens" in body or "temperature" in body):
        raise ConfigError(
            f"{_OPTION[role]} {name.name}: an OpenAI reasoning model refuses max_tokens and a temperature, which a "
            f"bare name sends; write openai/{name.name} (or azure/<deployment>), whose requests carry "
            "max_completion_tokens and no temperature"
        )


OPTION = {"eval": "--temperature", "user": "--temperature", "judge": "--judge-temperature"}


def not_applied_notes(plans: list[RunPlan], asked: Settings) -> list[str]:
    """A note for each (role, model) whose requests cannot carry the temperature or token limit the
    settings ask for (a reasoning model takes neither): a paper must report what was sent, and the
    manifest records it (`RoleRequest.not_applied`), but `prepare` said nothing."""
    notes: dict[tuple[str, str], str] = {}
    for plan in plans:
        for role, request in plan.requests.items():
            key = (role, f"{request.provider}/{request.model}")
            if not request.not_applied or key in notes:
                continue
            model = plan.settings.model_for(role, plan.model)
            dropped = []
            if "temperature" in request.not_applied and asked.temperature_for(role) is not None:
                dropped.append(f"{OPTION[role]} {asked.temperature_for(role)}")
            if "max_tokens" in request.not_applied and asked.max_tokens is not None:
                dropped.append(f"--max-tokens {asked.max_tokens}")
            if dropped:
                notes[key] = (
                    f"{model} ({role} role) does not take {' or '.join(dropped)}: not sent (its API refuses "
                    "or ignores it, as for reasoning models); the run's manifest records it as not applied."
                )
    return list(notes.values())
