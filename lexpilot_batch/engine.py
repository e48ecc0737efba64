"""The wave engine: where protocols (what to ask) meet providers (how to send it).

`prepare` registers runs and compiles the open wave; `submit` sends compiled files;
`poll_and_advance` polls, saves, ingests, advances every thread and compiles the next wave.
All runs, tasks and models of a workspace move together, one wave at a time.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lexpilot_batch import prompts
from lexpilot_batch.batches import (
    PollResult,
    SubmitResult,
    TamperedFile,
    check_compiled_files,
    poll_files,
    submit_files,
)
from lexpilot_batch.compiler import CompileResult, compile_wave
from lexpilot_batch.config import (
    ROLES,
    SIMULATED,
    Endpoint,
    Limits,
    Settings,
    endpoints_from_env,
    resolve_limits,
    role_backends,
    simulated_endpoint,
)
from lexpilot_batch.data import open_dataset
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.protocols import STAGES
from lexpilot_batch.providers.base import BatchBackend
from lexpilot_batch.providers.openai_batch import OpenAIBatchBackend
from lexpilot_batch.runs import add_threads, check_model, check_run_id, protocol_variants, register_run
from lexpilot_batch.workspace import Workspace

Say = Callable[[str], None]


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


class Session:
    """Endpoints, limits and (lazily) provider clients for one command on one workspace.

    Backends are chosen per role: the command line, else `LEXPILOT_<ROLE>_BACKEND`, else what
    this workspace used last, else `batch`. `--provider simulated` puts every role on the
    simulated provider.
    """

    def __init__(self, ws: Workspace, options: ProviderOptions) -> None:
        self.ws = ws
        self.options = options
        if options.provider not in (None, "env", SIMULATED):
            raise ConfigError(f"--provider must be 'env' or 'simulated', not {options.provider!r}")
        remembered = json.loads(ws.store.meta("backends") or "{}")
        explicit = {role: SIMULATED for role in ROLES} if options.provider == SIMULATED else {}
        if options.provider == "env":
            remembered = {}
        explicit.update({r: b for r, b in options.backends.items() if b})
        chosen = role_backends({r: explicit.get(r) for r in ROLES})
        for role in ROLES:  # the environment and flags win; otherwise keep the workspace's choice
            if role not in explicit and not os.environ.get(f"LEXPILOT_{role.upper()}_BACKEND"):
                chosen[role] = remembered.get(role, chosen[role])
        self.backends = chosen
        self._server = None
        self._endpoints: dict[str, Endpoint] | None = None
        self._clients: dict[tuple[str, str], object] = {}

    @property
    def provider(self) -> str:
        return SIMULATED if all(b == SIMULATED for b in self.backends.values()) else "env"

    @property
    def endpoints(self) -> dict[str, Endpoint]:
        """Where each role's requests go. Compiling needs only this, never a key or a server."""
        if self._endpoints is None:
            env = endpoints_from_env(backends=self.backends)
            self._endpoints = {
                role: simulated_endpoint(role, SIMULATED) if self.backends[role] == SIMULATED else env[role]
                for role in ROLES
            }
        return self._endpoints

    @property
    def endpoint_labels(self) -> dict[str, str]:
        return {role: e.base_url for role, e in self.endpoints.items()}

    @property
    def limits(self) -> dict[str, Limits]:
        o = self.options
        return {
            role: resolve_limits(
                o.profiles.get(role) or os.environ.get(f"LEXPILOT_{role.upper()}_PROFILE"),
                e.base_url,
                o.max_requests,
                o.max_bytes,
                o.completion_window,
                o.batch_endpoint,
            )
            for role, e in self.endpoints.items()
        }

    def _live_endpoint(self, role: str) -> Endpoint:
        if self.backends[role] != SIMULATED:
            return self.endpoints[role]
        if self._server is None:
            from lexpilot_batch.simulated import SimulatedServer, parse_faults

            self._server = SimulatedServer(
                self.ws.state_dir / "simulated", parse_faults(self.options.sim_faults), seed=self.options.sim_seed
            )
            self._server.start()
        return simulated_endpoint(role, self._server.base_url)

    def backend_for(self, roles: str) -> BatchBackend:
        """The Files + Batches client for a file of these roles (`batch` and `simulated`)."""
        role = roles.split("+")[0]
        key = ("batch", role)
        if key not in self._clients:
            self._clients[key] = OpenAIBatchBackend(
                self._live_endpoint(role), self.limits[role], timeout=self.options.timeout
            )
        return self._clients[key]  # type: ignore[return-value]

    def sync_runner_for(self, roles: str):
        from lexpilot_batch.providers.sync import SyncRunner

        role = roles.split("+")[0]
        key = ("sync", role)
        if key not in self._clients:
            self._clients[key] = SyncRunner(
                self._live_endpoint(role), concurrency=self.options.concurrency, timeout=self.options.timeout
            )
        return self._clients[key]

    def remember_backends(self) -> None:
        value = json.dumps(self.backends, sort_keys=True)
        if self.ws.store.meta("backends") != value:
            self.ws.store.set_meta("backends", value)

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


@dataclass
class PrepareResult:
    runs: list[str] = field(default_factory=list)
    new_threads: int = 0
    compiled: CompileResult = field(default_factory=CompileResult)


def tasks_for_stage(stage: str) -> list[str]:
    if stage not in STAGES:
        raise ConfigError(f"--stage must be one of {', '.join(STAGES)}, not {stage!r}")
    return list(STAGES[stage])


def prepare(
    ws: Workspace,
    session: Session,
    *,
    stage: str,
    run_ids: list[str],
    model: str | None,
    settings: Settings,
    dataset_path: Path | None,
    categories_path: Path | None,
    limit: int | None,
    prompts_path: Path | None,
    speculate: bool,
) -> PrepareResult:
    """Register each run, create its threads for the stage, compile what is due.

    The dataset is validated in one pass over the file that keeps no case in memory; its cases are
    read again only to copy them into a workspace that does not have them yet.
    """
    tasks = tasks_for_stage(stage)
    model = check_model(model)
    dataset = open_dataset(dataset_path, categories_path, variants=protocol_variants(tasks))
    templates = prompts.load_templates(prompts_path)
    result = PrepareResult()
    for raw in run_ids:
        run_id = check_run_id(raw)
        run = register_run(ws, run_id, model, settings, dataset, limit, templates, session.endpoint_labels, speculate)
        result.new_threads += add_threads(ws, run, tasks, dataset)
        result.runs.append(run_id)
    session.remember_backends()
    result.compiled = compile_wave(ws, session.endpoints, session.limits, session.options.retries)
    return result


def submit(ws: Workspace, session: Session, on_file: Callable[[str], None] | None = None) -> SubmitResult:
    _ensure_intact(ws, session)
    return submit_files(ws, session, on_file)


def _ensure_intact(ws: Workspace, session: Session) -> None:
    """Compiled files must be what the database says; a wave not yet sent is simply recompiled."""
    bad = check_compiled_files(ws)
    if not bad:
        return
    uploaded = ws.store.conn.execute(
        "SELECT 1 FROM files WHERE status != 'compiled' AND wave = (SELECT MAX(n) FROM waves) LIMIT 1"
    ).fetchone()
    if uploaded:
        raise TamperedFile(
            f"request file(s) changed on disk after compiling: {', '.join(bad)}; part of this wave is already "
            "submitted, so they cannot be rebuilt safely — restore them or run `lexpilot-batch doctor`"
        )
    compile_wave(ws, session.endpoints, session.limits, session.options.retries)


@dataclass
class AdvanceResult:
    poll: PollResult
    compiled: CompileResult | None
    submitted: SubmitResult | None


def poll_and_advance_once(ws: Workspace, session: Session, do_submit: bool) -> AdvanceResult:
    submitted = submit(ws, session) if do_submit else None
    poll = poll_files(ws, session, session.options.max_wave_age)
    compiled = None
    if poll.in_flight == 0:
        compiled = compile_wave(ws, session.endpoints, session.limits, session.options.retries)
        if do_submit and compiled.compiled:
            submitted = submit(ws, session)
    return AdvanceResult(poll, compiled, submitted)


def work_left(ws: Workspace) -> dict[str, int]:
    db = ws.store.conn

    def count(sql: str) -> int:
        return db.execute(sql).fetchone()[0]

    return {
        "unsubmitted": count("SELECT COUNT(*) FROM files WHERE status IN ('compiled','uploaded','creating')"),
        "in_flight": count("SELECT COUNT(*) FROM files WHERE status IN ('submitted','downloaded')"),
        "waiting_manual": count("SELECT COUNT(*) FROM files WHERE status = 'submitted' AND backend = 'manual'"),
        "active_threads": count("SELECT COUNT(*) FROM threads WHERE status = 'active'"),
    }


def poll_and_advance(
    ws: Workspace,
    session: Session,
    *,
    do_submit: bool,
    wait: bool,
    poll_interval: float,
    on_round: Callable[[AdvanceResult, dict[str, int]], None] | None = None,
) -> dict[str, int]:
    """One poll round, or with `wait` rounds until nothing is in flight or due."""
    while True:
        outcome = poll_and_advance_once(ws, session, do_submit)
        left = work_left(ws)
        if on_round:
            on_round(outcome, left)
        if not wait:
            return left
        if left["in_flight"] == left["waiting_manual"] and (left["unsubmitted"] == 0 or not do_submit):
            return left  # done, or only the user can move it on (manual files)
        if outcome.poll.in_flight:
            time.sleep(poll_interval)
