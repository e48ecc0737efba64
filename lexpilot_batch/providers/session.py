"""A command's way to providers: which backend each role uses, its endpoint and limits, and clients.

`ProviderOptions` are what one invocation says about reaching providers (none of it is part of a
run's results); `Session` resolves them against the environment and the workspace, and builds
provider clients only when something is sent, so that compiling never needs a key or a server.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lexpilot_batch.config import (
    ROLES,
    SIMULATED,
    Endpoint,
    Limits,
    endpoints_from_env,
    resolve_limits,
    role_backends,
    simulated_endpoint,
)
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.base import BatchBackend
from lexpilot_batch.providers.openai_batch import OpenAIBatchBackend

if TYPE_CHECKING:
    from lexpilot_batch.providers.sync import SyncRunner
    from lexpilot_batch.simulated import SimulatedServer
    from lexpilot_batch.workspace import Workspace


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
    simulated provider. Without a workspace (`ws` None: a dry run in a folder that has none yet)
    the same choice is made with nothing remembered, and nothing can be sent.
    """

    def __init__(self, ws: Workspace | None, options: ProviderOptions) -> None:
        self.ws = ws
        self.options = options
        if options.provider not in (None, "env", SIMULATED):
            raise ConfigError(f"--provider must be 'env' or 'simulated', not {options.provider!r}")
        remembered = json.loads(ws.store.meta("backends") or "{}") if ws is not None else {}
        explicit = {role: SIMULATED for role in ROLES} if options.provider == SIMULATED else {}
        if options.provider == "env":
            remembered = {}
        explicit.update({r: b for r, b in options.backends.items() if b})
        chosen = role_backends({r: explicit.get(r) for r in ROLES})
        for role in ROLES:  # the environment and flags win; otherwise keep the workspace's choice
            if role not in explicit and not os.environ.get(f"LEXPILOT_{role.upper()}_BACKEND"):
                chosen[role] = remembered.get(role, chosen[role])
        self.backends = chosen
        self._server: SimulatedServer | None = None
        self._endpoints: dict[str, Endpoint] | None = None
        self._batch: dict[str, BatchBackend] = {}  # by role
        self._sync: dict[str, SyncRunner] = {}

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

            assert self.ws is not None, "no workspace: nothing is sent"
            self._server = SimulatedServer(
                self.ws.state_dir / "simulated", parse_faults(self.options.sim_faults), seed=self.options.sim_seed
            )
            self._server.start()
        return simulated_endpoint(role, self._server.base_url)

    def backend_for(self, roles: str) -> BatchBackend:
        """The Files + Batches client for a file of these roles (`batch` and `simulated`)."""
        role = roles.split("+")[0]
        if role not in self._batch:
            self._batch[role] = OpenAIBatchBackend(
                self._live_endpoint(role), self.limits[role], timeout=self.options.timeout
            )
        return self._batch[role]

    def sync_runner_for(self, roles: str) -> SyncRunner:
        from lexpilot_batch.providers.sync import SyncRunner

        role = roles.split("+")[0]
        if role not in self._sync:
            self._sync[role] = SyncRunner(
                self._live_endpoint(role), concurrency=self.options.concurrency, timeout=self.options.timeout
            )
        return self._sync[role]

    def remember_backends(self) -> None:
        assert self.ws is not None, "no workspace to remember backends in"
        value = json.dumps(self.backends, sort_keys=True)
        if self.ws.store.meta("backends") != value:
            self.ws.store.set_meta("backends", value)

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
