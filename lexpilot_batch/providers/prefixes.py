"""The provider prefix of a model name, and how a name is read.

A model name may start with a provider prefix, the convention of inspect_ai: `openai/gpt-4o-mini`,
`azure/<deployment>`, `dashscope/qwen-plus`, `deepseek/deepseek-chat` (every prefix the registry
holds, `registry.PROVIDERS`; docs/providers.md has the table), or the generic
`openai-api/<service>/<model>` for any OpenAI-compatible service (its URL and key in
`<SERVICE>_BASE_URL` and `<SERVICE>_API_KEY`). The prefix decides the endpoint, the key variable,
the backend, the limits profile and the request body dialect (`spec.Provider`); the provider is
sent the part after the prefix. A name without a known prefix (`gpt-4o-mini`, or a Hugging Face
id such as `Qwen/Qwen2.5-7B-Instruct`) is *bare*: its role's environment variables decide where it
goes, and its requests are what they always were.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.bodies.schema import edit_distance
from lexpilot_batch.providers.registry import PROVIDERS
from lexpilot_batch.providers.spec import Provider, env_name

# Prefixes other tools (inspect_ai) know and this one does not: refused, not read as bare names,
# so that `vllm/...` is not silently sent to the role's default endpoint.
FOREIGN_PREFIXES = frozenset(
    {
        "azureai",
        "cloudflare",
        "goodfire",
        "hf",
        "llama-cpp-python",
        "ollama",
        "perplexity",
        "sambanova",
        "sglang",
        "vllm",
    }
)

# inspect_ai's spellings of providers this tool knows under another prefix: named, not refused blind.
SAME_AS = {"grok": "xai"}

# Prefixes of providers whose batch API is documented but not supported here, and why; their
# models can still be sent one by one through their OpenAI-compatible chat completions. (None today:
# Together's, the last one, has its folder, providers/together/.)
NOT_SUPPORTED: dict[str, str] = {}

_SERVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")


def known_prefixes() -> str:
    ready = [f"{p}/" if not v.generic else f"{p}/<service>/" for p, v in PROVIDERS.items() if v.ready]
    later = [f"{p}/" for p, v in PROVIDERS.items() if not v.ready]
    return ", ".join(ready) + (f" ({' and '.join(later)} are reserved, not yet supported)" if later else "")


@dataclass(frozen=True)
class ModelName:
    """A model name as given (`name`, how runs are registered) and what it says."""

    name: str
    sent: str  # what the provider is sent as `model`: the part after the prefix
    provider: Provider | None = None  # None: a bare name
    service: str | None = None  # the <service> of openai-api/<service>/<model>

    @property
    def key(self) -> str | None:
        """The provider key a manifest records: `openai`, `openai-api/sima`; None for a bare name."""
        if self.provider is None:
            return None
        return f"{self.provider.prefix}/{self.service}" if self.service else self.provider.prefix


def near_prefix(head: str) -> str | None:
    """The known prefix `head` is a near miss of (another case, or one or two typing slips in a
    prefix of five letters or more, one in a shorter one), if any."""
    lowered = head.lower()
    for prefix in PROVIDERS:
        if lowered == prefix or edit_distance(lowered, prefix) <= (2 if len(prefix) >= 5 else 1):
            return prefix
    return None


def parse_model(name: str, option: str = "--model") -> ModelName:
    """What a model name says; `ConfigError` for an unknown or reserved prefix, a near miss of a
    known one, or a name missing a part."""
    head, sep, rest = name.partition("/")
    if sep and head.lower() in SAME_AS:
        ours = SAME_AS[head.lower()]
        raise ConfigError(
            f"{option} {name}: {head}/ is inspect_ai's prefix for these models; here it is {ours}/: write {ours}/{rest}"
        )
    near = near_prefix(head) if sep and head not in PROVIDERS and head.lower() not in FOREIGN_PREFIXES else None
    if near is not None:
        raise ConfigError(
            f"{option} {name}: unknown provider prefix {head + '/'!r}: did you mean {near + '/'!r} "
            f"({near}/{rest})? Known prefixes are {known_prefixes()}. A Hugging Face-style id that only "
            f"looks like one is sent as it is with openai-api/<service>/{name} (the endpoint that serves it)"
        )
    if not sep or head not in PROVIDERS:
        if sep and head.lower() in NOT_SUPPORTED:
            raise ConfigError(
                f"{option} {name}: {NOT_SUPPORTED[head.lower()]}. Send its models one by one through its chat "
                f"completions: openai-api/{head.lower()}/{rest} with --<role>-backend sync, "
                f"{env_name(head)}_BASE_URL (its /v1 URL) and {env_name(head)}_API_KEY"
            )
        if sep and head.lower() in FOREIGN_PREFIXES:
            raise ConfigError(
                f"{option} {name}: unknown provider prefix {head + '/'!r}; known prefixes are {known_prefixes()}. "
                f"For another OpenAI-compatible service write openai-api/{head.lower()}/{rest} and set "
                f"{env_name(head)}_BASE_URL and {env_name(head)}_API_KEY"
            )
        return ModelName(name, name)
    provider = PROVIDERS[head]
    if not provider.ready:
        raise ConfigError(
            f"{option} {name}: the {head}/ prefix is reserved for {provider.title} and not supported yet; "
            f"known prefixes are {known_prefixes()}. A model id that only starts with {head}/ (a Hugging Face id "
            f"served by vLLM) is sent as it is with openai-api/<service>/{name}"
        )
    service = None
    if provider.generic:
        service, sep, rest = rest.partition("/")
        if not sep or not _SERVICE.fullmatch(service):
            raise ConfigError(
                f"{option} {name}: write openai-api/<service>/<model>, where <service> (letters, digits, - and _) "
                "names the variables <SERVICE>_BASE_URL and <SERVICE>_API_KEY"
            )
    if not rest.strip():
        raise ConfigError(f"{option} {name}: no model name after the {name[: len(name) - len(rest)]} prefix")
    return ModelName(name, rest, provider, service)


def provider_of(key: str) -> tuple[Provider, str | None]:
    """The provider and service of a key recorded in a manifest (`ModelName.key`)."""
    head, _, service = key.partition("/")
    if head not in PROVIDERS:
        raise ConfigError(f"provider {key!r} recorded in a run's manifest is unknown to this version")
    return PROVIDERS[head], service or None
