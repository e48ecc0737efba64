"""A command's way to providers: the route of each (role, model), and the clients that send files.

`ProviderOptions` are what one invocation says about reaching providers (none of it is part of a
run's results); `Session` resolves routes (`routing.routes.resolve_route`) against them, the environment
and what the workspace remembers, and builds provider clients only when something is sent, so
that compiling never needs a key or a server.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lexpilot_batch.benchmark.settings import ROLES
from lexpilot_batch.engine.rehearsal import compiled_route, rehearsed
from lexpilot_batch.engine.settled import Settled
from lexpilot_batch.engine.tail import (
    AUTO,
    FLEX_REFUSED,
    OFF,
    Expected,
    Measures,
    TailPolicy,
    check_tail,
    check_tail_sync,
    flex_refused,
    measure,
)
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import BATCH, FLEX, SIMULATED, check_backend
from lexpilot_batch.providers.batch import BatchBackend
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.registry import (
    api_spec,
    batch_backend,
    chat_policy,
    file_api,
    native_simulated,
)
from lexpilot_batch.providers.routing.endpoints import Endpoint, simulated_endpoint, simulated_target
from lexpilot_batch.providers.routing.flex import ANY as FLEX_ANY
from lexpilot_batch.providers.routing.flex import TIMEOUT as FLEX_TIMEOUT
from lexpilot_batch.providers.routing.flex import takes_flex
from lexpilot_batch.providers.routing.routes import ModelRoute, Route, RouteRules, resolve_route
from lexpilot_batch.state.queries import measured_batch_seconds, measured_call_rates
from lexpilot_batch.study.price_memory import TAIL_CHOICES_KEY

if TYPE_CHECKING:
    from lexpilot_batch.providers.sync.runner import SyncRunner
    from lexpilot_batch.simulated import SimulatedServer
    from lexpilot_batch.state.compaction import Compactor
    from lexpilot_batch.state.workspace import Workspace


@dataclass
class ProviderOptions:
    """How this invocation reaches providers; none of it is part of a run's results."""

    provider: str | None = None  # "simulated": every role on the simulated provider
    backends: dict[str, str | None] = field(default_factory=dict)  # role -> batch|sync|manual|simulated
    profiles: dict[str, str | None] = field(default_factory=dict)  # role -> openai|azure|dashscope|generic
    sim_faults: str | None = None
    sim_seed: int = 0
    timeout: float = 120.0
    retries: int = 3
    concurrency: int = 8
    max_requests: int | None = None
    max_bytes: int | None = None
    completion_window: str | None = None
    batch_endpoint: str | None = None
    max_wave_age: float | None = None  # seconds; older batches are cancelled and their rest re-queued
    hedge: bool = False  # `--hedge`: also cancel batches past the workspace's own deadline (`hedge`)
    # `--off-peak` / `--any-hour` (`engine.off_peak`); None: what the workspace remembers.
    off_peak: bool | None = None
    # Seconds to look for a batch whose create answer was lost before creating it again (`batches`).
    create_grace: float = 60.0
    # Seconds `poll-and-advance --wait` keeps trying through a provider outage (`engine`).
    outage_wait: float = 1800.0
    # Enqueued-token budgets by model (`--max-enqueued-tokens MODEL=N`), remembered by the workspace.
    max_enqueued_tokens: dict[str, int] = field(default_factory=dict)
    # A wave's groups of at most N requests go through sync (`tail_sync`); None: what the workspace
    # remembers. An operational choice like a backend, not one of its `SETTINGS`: it decides how a
    # wave's groups travel, never how its files are cut or what their lines say.
    tail_sync: int | None = None
    # `--tail auto|off`, `--max-premium PCT`, `--flex MODEL=on|off`, `--expect-latency KIND=S`
    # (`engine.tail`); None / empty: what the workspace remembers. Operational, like `tail_sync`.
    tail: str | None = None
    max_premium: float | None = None
    flex: dict[str, bool] = field(default_factory=dict)
    expect_latency: dict[str, float] = field(default_factory=dict)
    # `--prices FILE` (loaded): what `--max-premium` weighs dollars at, over the bundled table; None:
    # what the workspace remembers.
    prices: dict[str, Any] | None = None
    # Keep at the provider the files of ingested batches a profile would delete (`--keep-provider-files`).
    keep_provider_files: bool = False


# The settings of a workspace that decide how its files are cut and its batches created: stored by
# the first command that sends or compiles, used by every later one, a different value refused.
SETTINGS = {
    "profiles": "--profile",
    "max_requests": "--max-requests-per-file",
    "max_bytes": "--max-bytes-per-file",
    "completion_window": "--completion-window",
    "batch_endpoint": "--batch-endpoint",
}


class Session:
    """Routes and (lazily) provider clients for one command on one workspace.

    A role's backend is chosen on the command line (`--provider simulated`, `--<role>-backend`),
    else by `LEXPILOT_<ROLE>_BACKEND`, else it is what this workspace was last told; without any
    choice each model takes its model list's backend or its provider's default (`routes`). A model
    list's endpoints and backends are remembered too, so that later commands send its models the
    same way. Without a workspace (`ws` None: a dry run in a folder that has none yet) nothing is
    remembered and nothing can be sent.
    """

    def __init__(self, ws: Workspace | None, options: ProviderOptions) -> None:
        self.ws = ws
        self.options = options
        if options.provider not in (None, "env", SIMULATED):
            raise ConfigError(f"--provider must be 'env' or 'simulated', not {options.provider!r}")
        explicit = {role: SIMULATED for role in ROLES} if options.provider == SIMULATED else {}
        explicit.update({r: b for r, b in options.backends.items() if b})
        for role in ROLES:
            if role not in explicit and os.environ.get(f"LEXPILOT_{role.upper()}_BACKEND"):
                explicit[role] = os.environ[f"LEXPILOT_{role.upper()}_BACKEND"]
        self.choices = {} if options.provider == "env" else _remembered_choices(ws)
        self.choices.update({role: check_backend(b, role) for role, b in explicit.items()})
        remembered = json.loads(ws.store.meta("model_routes") or "{}") if ws is not None else {}
        self.model_routes = {name: ModelRoute.from_json(r) for name, r in remembered.items()}
        if options.tail_sync is not None:
            self.tail_sync = check_tail_sync(options.tail_sync)
        else:
            self.tail_sync = int(ws.store.meta("tail_sync") or 0) if ws is not None else 0
        self.tail = _tail_choices(ws, options)
        self._cleared = {m for m in (flex_refused(ws.store.conn) if ws is not None else []) if options.flex.get(m)}
        if self.tail["tail"] == AUTO and self.tail_sync:
            # Two ways of sending the tail (`--tail auto` decides every group itself: N beside it
            # was ignored, yet an estimate showed it). Given together: refused; one given now wins
            # over the other remembered; both remembered (an earlier version kept both): auto.
            if options.tail == AUTO and options.tail_sync:
                raise ConfigError(
                    f"--tail auto and --tail-sync {self.tail_sync} are two ways of sending the tail: choose one"
                )
            if options.tail_sync and options.tail != AUTO:
                self.tail["tail"] = OFF
            else:
                self.tail_sync = 0
        if options.provider == SIMULATED or SIMULATED in self.choices.values():
            from lexpilot_batch.simulated import parse_faults

            # A typo in a fault's name is refused now: at the first submit, the rehearsal it
            # turned into a clean run was already registered and compiled.
            parse_faults(options.sim_faults)
        self.settings = _workspace_settings(ws, self._given_settings())
        if ws is not None and ws.writable and options.off_peak is not None:
            _remember_off_peak(ws, options.off_peak)  # by any command it is given to (`engine.off_peak`)
        if ws is not None and ws.writable and options.max_enqueued_tokens:
            from lexpilot_batch.engine import budgets

            budgets.remember_flags(ws, options.max_enqueued_tokens)
        self._routes: dict[tuple[str, str, str | None], Route] = {}
        self._server: SimulatedServer | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self._batch: dict[tuple[Any, ...], BatchBackend] = {}
        self._sync: dict[tuple[Any, ...], SyncRunner] = {}
        self._compactor: Compactor | None = None
        # What this command's compiles read of the workspace's settled requests (`engine.settled`).
        self.settled = Settled()
        # Files whose batch results this command fetched (again): a held one is fetched once a command (`downloads`).
        self.refetched: set[int] = set()

    @property
    def provider(self) -> str:
        return SIMULATED if all(self.choices.get(r) == SIMULATED for r in ROLES) else "env"

    def _given_settings(self) -> dict[str, Any]:
        """The workspace settings this command was given (options, and profiles in the environment)."""
        o = self.options
        profiles = {r: o.profiles.get(r) or os.environ.get(f"LEXPILOT_{r.upper()}_PROFILE") for r in ROLES}
        return {
            "profiles": {r: p for r, p in profiles.items() if p},
            "max_requests": o.max_requests,
            "max_bytes": o.max_bytes,
            "completion_window": o.completion_window,
            "batch_endpoint": o.batch_endpoint,
        }

    def _rules(self) -> RouteRules:
        s = self.settings
        return RouteRules(
            choices=self.choices,
            model_routes=self.model_routes,
            profiles={r: s["profiles"].get(r) for r in ROLES},
            max_requests=s["max_requests"],
            max_bytes=s["max_bytes"],
            completion_window=s["completion_window"],
            batch_endpoint=s["batch_endpoint"],
        )

    def use_model_routes(self, routes: Mapping[str, ModelRoute]) -> None:
        """Send these models (by registered name) their own way from now on (a model list)."""
        changed = {name: r for name, r in routes.items() if r != ModelRoute() and self.model_routes.get(name) != r}
        if changed:
            self.model_routes.update(changed)
            self._routes.clear()

    def route(self, role: str, model: str, provider: str | None) -> Route:
        """Where the requests of `model` (as registered) in `role` go. Needs no key and no server."""
        key = (role, model, provider)
        if key not in self._routes:
            rules = self._rules()
            route = resolve_route(role, model, provider, rules)
            self._routes[key] = rehearsed(route, rules) if route.backend == SIMULATED else route
        return self._routes[key]

    def file_route(self, row: Mapping[str, Any]) -> Route:
        """The route a compiled file's requests were written for: its (role, model)'s, unless the
        file names another endpoint of the simulated provider than that route does now — compiled
        by an earlier version, which sent every simulated model through the OpenAI routes (or a
        platform's path) — whose lines, batches and limits it keeps (`rehearsal.compiled_route`)."""
        route = self.route(row["roles"].split("+")[0], row["model"], row["provider"])
        recorded = _recorded(row)
        if route.backend == SIMULATED and recorded is not None and recorded != route.endpoint.base_url:
            return compiled_route(route, recorded, self._rules())
        return route

    def _live(self, route: Route, recorded: str | None = None) -> Endpoint:
        """Where a route's requests are sent now; `recorded` is the endpoint a compiled file names
        (a simulated file compiled before platforms were rehearsed on their own paths names
        `simulated`, and stays on the OpenAI routes where its batches are)."""
        if route.backend != SIMULATED and simulated_target(route.endpoint.base_url) is None:
            return route.endpoint  # (a rehearsed sync route names the simulated provider: `rehearsal.rehearsed`)
        if self._server is None:
            from lexpilot_batch.simulated import SimulatedServer, parse_faults

            if self.ws is not None:
                state = self.ws.state_dir / "simulated"
            else:  # a command that keeps nothing (`preflight`): the provider's state goes when it ends
                self._scratch = tempfile.TemporaryDirectory(prefix="lexpilot-simulated-")
                state = Path(self._scratch.name)
            self._server = SimulatedServer(state, parse_faults(self.options.sim_faults), seed=self.options.sim_seed)
            self._server.start()
        where = route.endpoint.base_url if recorded is None else recorded
        # `simulated/<api>`: a native API's own routes; `simulated/<platform>`: an OpenAI-compatible
        # platform's path; `simulated`: the OpenAI routes (`routes`, `rehearsal.rehearsed`).
        platform = simulated_target(where) or ""
        if platform in native_simulated():
            base_url = self._server.native_url(platform)
        else:
            base_url = self._server.profile_url(platform) if platform else self._server.base_url
        return simulated_endpoint(route.role, base_url, route.endpoint.model)

    def endpoint(self, route: Route) -> Endpoint:
        """Where a route's requests are sent now (a rehearsal's: the simulated provider's URL)."""
        return self._live(route)

    def batch_backend(self, row: Mapping[str, Any]) -> BatchBackend:
        """The Files + Batches client for a compiled file (`batch` and `simulated` backends)."""
        route = self.file_route(row)
        endpoint = self._live(route, _recorded(row))
        key = (route.api, endpoint.base_url, endpoint.key_var, route.limits)
        if key not in self._batch:
            self._batch[key] = batch_backend(route.api, endpoint, route.limits, self.options.timeout)
        return self._batch[key]

    def check_flex(self, routes: list[Route], models: set[str]) -> None:
        """Before anything is registered: a `--flex MODEL=on` (given now or remembered) for a route
        with no flex tier is refused (`routing.flex.takes_flex`), and so is a flag of this command naming no
        model of it or of the workspace (it would be remembered and do nothing)."""
        flags = self.tail["flex"]
        for route in routes:
            takes_flex(route, flags)
        known = set(models)
        if self.ws is not None:
            known.update(
                r[0] for r in self.ws.store.conn.execute("SELECT model FROM runs UNION SELECT model FROM files")
            )
        unknown = sorted(set(self.options.flex) - known - {FLEX_ANY})
        if unknown:
            raise ConfigError(
                f"--flex {unknown[0]}=...: names no model of this command or workspace; its models are "
                f"{', '.join(sorted(known))} (or '*' for every one). Nothing was registered or compiled."
            )

    def tail_policy(self, projecting: bool = False) -> TailPolicy:
        """How the next wave's groups travel (`engine.tail`): this command's choices, what the
        workspace remembers, its measured batch durations and the models flex kept refusing. The
        answered requests' sizes (`tail.measure`, two scans of every request) are read where they
        are weighed: under `--tail auto`, and for a projection (`projecting`), which shows the auto
        policy whatever the workspace's own."""
        t = self.tail
        weighed = projecting or t["tail"] == AUTO
        measured = measured_batch_seconds(self.ws.store.conn) if self.ws is not None else None
        expect = dict(t["expect_latency"])
        if "batch" not in expect and measured:
            expect["batch"] = measured
        return TailPolicy(
            limit=self.tail_sync,
            auto=t["tail"] == AUTO,
            max_premium=float(t["max_premium"]),
            concurrency=self.options.concurrency,
            expected=Expected(**expect),
            flex=dict(t["flex"]),
            refused=frozenset(self._still_refused()),
            measures=measure(self.ws.store.conn, t["prices"])
            if weighed and self.ws is not None
            else Measures(t["prices"]),
            rates=measured_call_rates(self.ws.store.conn) if weighed and self.ws is not None else {},
        )

    def flex_refused_now(self, model: str) -> None:
        """Flex kept refusing `model` during this command (`poll`): a `--flex MODEL=on` of it no
        longer puts it back."""
        self._cleared.discard(model)

    def _still_refused(self) -> list[str]:
        """The models flex kept refusing (`poll`), but those this command puts on it again with
        `--flex MODEL=on` (`_cleared`: refused before it started; a refusal is of capacity at the
        time, and the user may know it is back). One that refuses during this command stays refused."""
        refused = flex_refused(self.ws.store.conn) if self.ws is not None else []
        return [m for m in refused if m not in self._cleared]

    def sync_runner(self, row: Mapping[str, Any]) -> SyncRunner:
        """The synchronous runner for a compiled file of the `sync` or `flex` backend."""
        from lexpilot_batch.providers.sync.runner import SYNC_RETRIES, SyncRunner

        endpoint = self._live(self.file_route(row), _recorded(row))
        # The API shape of the file's lines: a `--tail-sync` group of a native batch route is sent
        # through its own API's synchronous call, which for Gemini names the model.
        api = file_api(row)
        model = parse_model(row["model"]).sent if api_spec(api).chat_names_model else ""
        flex = row["backend"] == FLEX
        key = (endpoint.role, endpoint.base_url, endpoint.key_var, api, model, flex)
        if key not in self._sync:
            # A flex call takes the provider's recommended timeout (`providers.routing.flex.TIMEOUT`) if
            # longer, and a provider whose SDK waits longer than `--timeout` its own (`chat_policy`: Ark's).
            timeout = max(self.options.timeout, FLEX_TIMEOUT) if flex else self.options.timeout
            timeout, retries = chat_policy(row["provider"], timeout, SYNC_RETRIES)
            self._sync[key] = SyncRunner(
                endpoint,
                concurrency=self.options.concurrency,
                timeout=timeout,
                max_retries=retries,
                api=api,
                model=model,
                flex=flex,
            )
        return self._sync[key]

    def remember(self) -> None:
        """Keep this command's backend choices, model routes, `--tail-sync` and settings for the
        workspace's later commands (its enqueued-token budgets are kept as soon as it opens)."""
        assert self.ws is not None, "no workspace to remember anything in"
        for key, value in (
            ("backend_choices", json.dumps(self.choices, sort_keys=True)),
            ("model_routes", json.dumps({n: r.to_json() for n, r in sorted(self.model_routes.items())})),
            ("tail_sync", str(self.tail_sync)),
            (_TAIL_KEY, json.dumps(self.tail, sort_keys=True)),
            (_SETTINGS_KEY, json.dumps(self.settings, sort_keys=True)),
        ):
            if self.ws.store.meta(key) != value:
                self.ws.store.set_meta(key, value)
        still = self._still_refused()
        if still != flex_refused(self.ws.store.conn):
            self.ws.store.set_meta(FLEX_REFUSED, json.dumps(sorted(still)))

    def compactor(self) -> Compactor:
        """The worker compressing this workspace's finished waves (`compaction.Compactor`); what it
        packed is recorded by its next round, or when the session closes."""
        from lexpilot_batch.state.compaction import Compactor

        assert self.ws is not None, "no workspace to compact"
        if self._compactor is None:
            self._compactor = Compactor(self.ws)
        return self._compactor

    def close(self) -> None:
        if self._compactor is not None:
            compactor, self._compactor = self._compactor, None
            if sys.exc_info()[0] is None:
                compactor.finish()
            else:  # an error or Ctrl-C: stop at once; the next command packs it again
                compactor.abandon()
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None


_SETTINGS_KEY = "workspace_settings"
_TAIL_KEY = TAIL_CHOICES_KEY


def _tail_choices(ws: Workspace | None, options: ProviderOptions) -> dict[str, Any]:
    """`--tail`, `--max-premium`, `--flex`, `--expect-latency`, `--prices` and `--off-peak`: this command's, over what the
    workspace remembers (a `--flex` or `--expect-latency` adds to the remembered ones)."""
    kept = json.loads(ws.store.meta(_TAIL_KEY) or "{}") if ws is not None else {}
    premium = options.max_premium if options.max_premium is not None else kept.get("max_premium", 0.0)
    if not (0 <= premium <= 1000):
        raise ConfigError(f"--max-premium must be a percentage between 0 and 1000, not {premium}")
    return {
        "tail": check_tail(options.tail) or kept.get("tail", "off"),
        "max_premium": premium,
        "flex": {**kept.get("flex", {}), **options.flex},
        "expect_latency": {**kept.get("expect_latency", {}), **options.expect_latency},
        "prices": options.prices if options.prices is not None else kept.get("prices"),
        **({"off_peak": off_peak} if (off_peak := _off_peak(options, kept)) else {}),
    }


def _remember_off_peak(ws: Workspace, on: bool) -> None:
    """`--off-peak` / `--any-hour` kept at once, whichever command was given it: the files it holds
    wait across commands, and `status` says so."""
    kept = json.loads(ws.store.meta(_TAIL_KEY) or "{}")
    if bool(kept.get("off_peak")) != on:
        kept["off_peak"] = on
        ws.store.set_meta(
            _TAIL_KEY, json.dumps({k: v for k, v in kept.items() if k != "off_peak" or on}, sort_keys=True)
        )


def _off_peak(options: ProviderOptions, kept: dict[str, Any]) -> bool:
    """`--off-peak` / `--any-hour` given now, else what the workspace remembers (`engine.off_peak`);
    kept only when on, so that a workspace that never used it remembers what it did before."""
    return bool(options.off_peak if options.off_peak is not None else kept.get("off_peak", False))


def _workspace_settings(ws: Workspace | None, given: dict[str, Any]) -> dict[str, Any]:
    """The settings to use: the workspace's stored ones, or these given ones when it has none yet.
    A given value that differs from a stored one is refused, naming both: a workspace's files and
    batches must agree from its first wave to its last (line url, batch endpoint, file limits)."""
    raw = ws.store.meta(_SETTINGS_KEY) if ws is not None else None
    if raw is None:
        if ws is not None and ws.writable:
            ws.store.set_meta(_SETTINGS_KEY, json.dumps(given, sort_keys=True))
        return given
    stored = json.loads(raw)
    conflicts = []
    for key, option in SETTINGS.items():
        value, kept = given.get(key), stored.get(key)
        if key == "profiles":
            for role, name in (value or {}).items():
                if (kept or {}).get(role) != name:
                    was = (kept or {}).get(role) or "none (guessed from the base URL or the provider)"
                    conflicts.append(f"{option} {role}={name} (this workspace uses {was})")
        elif value is not None and value != kept:
            conflicts.append(
                f"{option} {value} (this workspace uses {kept if kept is not None else 'the profile default'})"
            )
    if conflicts:
        raise ConfigError(
            "a workspace keeps the settings it was prepared with, so that every wave's files and batches agree: "
            + "; ".join(conflicts)
            + ". Leave the option out to use the workspace's, or prepare a new workspace (--root) for other settings"
        )
    return stored


def _remembered_choices(ws: Workspace | None) -> dict[str, str]:
    """The backends this workspace was last told, per role.

    Workspaces of earlier versions kept every role's backend under `backends`, the default `batch`
    included: only their other choices were choices.
    """
    if ws is None:
        return {}
    stored = ws.store.meta("backend_choices")
    if stored is not None:
        return dict(json.loads(stored))
    return {r: b for r, b in json.loads(ws.store.meta("backends") or "{}").items() if b != BATCH}


def _recorded(row: Mapping[str, Any]) -> str | None:
    """The endpoint a compiled file's row names (a dict or a `sqlite3.Row`), if it has the column."""
    return row["endpoint"] if "endpoint" in row.keys() else None  # noqa: SIM118 - a sqlite3.Row iterates its values
