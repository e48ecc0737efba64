"""Provider endpoints and their limits, from options and the seed's environment variables.

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
from lexpilot_batch.providers.apis import SIMULATED
from lexpilot_batch.util.redaction import redact_url, register_secret

DEFAULT_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class Limits:
    """How a provider wants its batch files cut and its batches created."""

    max_requests: int = 50_000
    max_bytes: int = 200 * 1_000_000
    completion_window: str = "24h"
    endpoint: str = "/v1/chat/completions"
    # Enqueued input tokens one model may have waiting in batches (`budgets`); None: no budget
    # unless the workspace is told one (--max-enqueued-tokens) or learns one from a refusal.
    enqueued_tokens: int | None = None
    # Seconds after which the provider should delete an uploaded file and a batch's output files
    # (`expires_after`, `output_expires_after`); None: not sent (the provider's default).
    file_expiry: int | None = None
    # Whether files the workspace uploaded, and its batches' output files, are deleted at the
    # provider once their results are saved and ingested (`--keep-provider-files` keeps them).
    delete_files: bool = False


# A documented "MB" read as the smaller of its two readings, 10^6 bytes: a file cut 4.9% short of a
# limit the provider meant in MiB costs nothing, one over a limit it meant in decimal megabytes is
# refused whole (and Anthropic's request body, the file's lines in a JSON array, is a few bytes
# longer than the file whose size is checked).
MB = 1_000_000
# The path vLLM's `run-batch` accepts in a request line: files for the `manual` backend carry it
# whatever the profile says.
VLLM_ENDPOINT = "/v1/chat/completions"
# Built-in provider profiles (from each provider's batch documentation; every field can be
# overridden on the command line because providers change them). No profile sets
# `enqueued_tokens`: OpenAI's quota depends on the usage tier and the model, Azure's on what each
# deployment is configured with, and neither documents one value to assume.
PROFILES: dict[str, Limits] = {
    "openai": Limits(50_000, 200 * MB, "24h", "/v1/chat/completions"),
    # Azure OpenAI v1 routes live under /openai/v1; `model` is the Global Batch deployment name.
    # A resource holds at most 500 batch files without an expiration, output files included, and
    # 10,000 with one (14 to 30 days: 1,209,600 to 2,592,000 s; Azure OpenAI batch how-to, "Batch
    # limits"): files expire after 14 days and are deleted once ingested.
    "azure": Limits(100_000, 200 * MB, "24h", "/chat/completions", file_expiry=14 * 24 * 3600, delete_files=True),
    # Alibaba Model Studio (DashScope), OpenAI-compatible mode: .../compatible-mode/v1
    "dashscope": Limits(50_000, 500 * MB, "24h", "/v1/chat/completions"),
    "generic": Limits(50_000, 200 * MB, "24h", "/v1/chat/completions"),
    # Mistral batch jobs (https://docs.mistral.ai/capabilities/batch): "up to 1M requests" per
    # batch; cut at 100,000, as Anthropic's, to keep one file's results a manageable size, and at
    # OpenAI's 200 MB (no byte limit is documented for batch files). The window is the job's
    # `timeout_hours` (default 24).
    "mistral": Limits(100_000, 200 * MB, "24h", "/v1/chat/completions"),
    # Groq (the `groq` SDK: a file of at most 100 MB, a window of 24h to 7d; no count documented).
    "groq": Limits(50_000, 100 * MB, "24h", "/v1/chat/completions"),
    # Zhipu BigModel: at most 50,000 requests and 100 MB per file; lines name /v4/chat/completions.
    "zhipu": Limits(50_000, 100 * MB, "24h", "/v4/chat/completions"),
    # Baidu Qianfan: at most 5,000 requests and 1 GB per file, a window of 1h to 672h; lines name
    # /v2/chat/completions. Billed at 40% of real-time inference.
    "qianfan": Limits(5_000, 1024 * MB, "24h", "/v2/chat/completions"),
    # SiliconFlow: at most 5,000 lines and 1 GB per file; a window of 24h to 336h.
    "siliconflow": Limits(5_000, 1024 * MB, "24h", "/v1/chat/completions"),
    # Moonshot (Kimi): at most 100 MB per file, a window of 12h to 7d; no count documented.
    "moonshot": Limits(50_000, 100 * MB, "24h", "/v1/chat/completions"),
    # Together AI (https://docs.together.ai/docs/inference/batch/overview, "Rate limits"): up to
    # 50,000 requests per batch and 100 MB per input file; the window "defaults to 24h and cannot
    # be changed". (Up to 30B tokens enqueued per model: far above any study, so no budget is set.)
    "together": Limits(50_000, 100 * MB, "24h", "/v1/chat/completions"),
    # Volcengine Ark's batch chat route is sent one request at a time (`sync`): no files.
    "ark": Limits(50_000, 200 * MB, "24h", "/v1/chat/completions"),
    # Anthropic Message Batches: at most 100,000 requests or 256 MB per batch, requests inline (no
    # line names a URL; the path is the batch route's). The window is fixed at 24 h.
    "anthropic": Limits(100_000, 256 * MB, "24h", "/v1/messages/batches"),
    # Gemini Batch Mode: an uploaded JSONL file of at most 2 GB (the File API's limit); no count is
    # documented, so the same 100,000 as Anthropic's keeps one file's results a manageable size.
    "google": Limits(100_000, 2048 * MB, "24h", ":batchGenerateContent"),
}


# Hosts of the profiles above, for a bare name whose base URL is set by hand.
_HOSTS = {
    "api.mistral.ai": "mistral",
    "api.groq.com": "groq",
    "bigmodel.cn": "zhipu",
    "qianfan.baidubce.com": "qianfan",
    "siliconflow": "siliconflow",
    "moonshot": "moonshot",
    "volces.com": "ark",
}


def guess_profile(base_url: str) -> str:
    """The profile a base URL most likely needs; `generic` when nothing is recognised."""
    host = base_url.lower()
    if "api.openai.com" in host:
        return "openai"
    if ".openai.azure.com" in host or "/openai/v1" in host:
        return "azure"
    if "dashscope" in host or "maas.aliyuncs.com" in host:
        return "dashscope"
    for needle, profile in _HOSTS.items():
        if needle in host:
            return profile
    return "generic"


def resolve_limits(
    profile: str | None,
    base_url: str,
    max_requests: int | None = None,
    max_bytes: int | None = None,
    completion_window: str | None = None,
    endpoint: str | None = None,
) -> Limits:
    name = profile or guess_profile(base_url)
    if name not in PROFILES:
        raise ConfigError(f"unknown provider profile {name!r}; known: {', '.join(PROFILES)}")
    base = PROFILES[name]
    return Limits(
        max_requests=max_requests or base.max_requests,
        max_bytes=max_bytes or base.max_bytes,
        completion_window=completion_window or base.completion_window,
        endpoint=endpoint or base.endpoint,
        enqueued_tokens=base.enqueued_tokens,
        file_expiry=base.file_expiry,
        delete_files=base.delete_files,
    )


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

    @property
    def where(self) -> str:
        """The endpoint as messages name it: role, model (when qualified) and URL."""
        model = f" ({self.model})" if self.model else ""
        return f"{self.role} role{model} at {redact_url(self.base_url)}"

    def require_key(self) -> str:
        """The key, for a provider client: registered for redaction first, so that no echo of it
        is ever printed or stored, whatever variable it came from."""
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
