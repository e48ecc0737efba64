"""Provider endpoints, from options and the seed's environment variables (their limits are each
provider's own, `spec.Provider.limits`, looked up by `registry.resolve_limits`).

API keys are read from the environment when a provider client is built and never stored: not in
the database, a manifest, a request file, a log line nor an error message. Only the *name* of the
variable a key came from is ever shown; a key handed to a client is registered with `redaction`,
which removes it (and URL credentials) from whatever a provider echoes.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.backends import SIMULATED
from lexpilot_batch.util.redaction import redact_url, register_secret

# Where a bare name goes when its role's variables name no endpoint: OpenAI's.
DEFAULT_BASE_URL = "https://api.openai.com/v1"
# The path vLLM's `run-batch` accepts in a request line: files for the `manual` backend carry it
# whatever the profile says.
VLLM_ENDPOINT = "/v1/chat/completions"


def endpoint_identity(base_url: str) -> str:
    """How a manifest names an endpoint: its URL without credentials (userinfo dropped, key-like
    query values redacted), and without the port of a loopback server, which is picked when the
    server starts (`serve-simulated --port 0`, a local vLLM) and says nothing about what answers."""
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return redact_url(base_url)
    host = parts.hostname
    if host is None:
        return redact_url(base_url)
    shown = f"[{host}]" if ":" in host else host
    if port is not None:
        shown += ":*" if _is_loopback(host) else f":{port}"
    return redact_url(urlunsplit((parts.scheme, shown, parts.path, parts.query, parts.fragment)))


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Endpoint:
    """Where one (role, model)'s requests go. `api_key` never leaves this object's use in a client."""

    role: str
    base_url: str
    key_var: str
    api_key: str | None = field(default=None, repr=False, compare=False)
    backend: str = "batch"
    model: str | None = None  # a provider-qualified model: named in messages
    key_hint: str = ""  # the variables a missing key can be set in, when more than `key_var`
    keyless: bool = False  # its SDK finds its credentials itself (`spec.Provider.keyless`): none is asked for

    @property
    def where(self) -> str:
        """The endpoint as messages name it: role, model (when qualified) and URL."""
        model = f" ({self.model})" if self.model else ""
        return f"{self.role} role{model} at {redact_url(self.base_url)}"

    def require_key(self) -> str:
        """The key, for a provider client: registered for redaction first, so that no echo of it
        is ever printed or stored, whatever variable it came from ("" for a keyless provider)."""
        if self.keyless and self.backend != SIMULATED:
            return ""
        if not self.api_key:
            raise ConfigError(
                f"no API key for the {self.where}: set {self.key_hint or self.key_var}, "
                "or use --provider simulated to rehearse offline"
            )
        if self.backend != SIMULATED:
            register_secret(self.key_var, self.api_key)
        return self.api_key


def role_endpoint(role: str, environ: Mapping[str, str] | None = None) -> Endpoint:
    """Where a bare name of `role` goes: `LEXPILOT_<ROLE>_BASE_URL/_API_KEY`, else
    `OPENAI_BASE_URL/_API_KEY`, else OpenAI."""
    env = os.environ if environ is None else environ
    prefix = f"LEXPILOT_{role.upper()}_"
    base_url = env.get(prefix + "BASE_URL") or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    if env.get(prefix + "API_KEY"):
        key_var = prefix + "API_KEY"
    elif env.get("OPENAI_API_KEY"):
        key_var = "OPENAI_API_KEY"
    else:
        key_var = prefix + "API_KEY"
    hint = f"{prefix}API_KEY or OPENAI_API_KEY"
    return Endpoint(role, base_url.rstrip("/"), key_var, env.get(key_var) or None, key_hint=hint)


def simulated_endpoint(role: str, base_url: str, model: str | None = None) -> Endpoint:
    return Endpoint(role, base_url, "simulated", "simulated-key", SIMULATED, model)


def simulated_target(base_url: str) -> str | None:
    """Which routes of the simulated provider a route's (or a compiled file's) endpoint names: ""
    for `simulated` (its OpenAI routes), the API or platform of `simulated/<api or platform>`, and
    None for an endpoint that is not the simulated provider's."""
    if base_url == SIMULATED:
        return ""
    return base_url.partition("/")[2] if base_url.startswith(SIMULATED + "/") else None
