"""The providers a model name can name, and how a name is read.

A model name may start with a provider prefix, the convention of inspect_ai: `openai/gpt-4o-mini`,
`azure/<deployment>`, `dashscope/qwen-plus`, `deepseek/deepseek-chat`, `mistral/`, `groq/`,
`zhipu/`, `qianfan/`, `siliconflow/`, `moonshot/`, `ark/`, `together/` (docs/providers.md has the table), or the generic
`openai-api/<service>/<model>` for any OpenAI-compatible service (its URL and key in
`<SERVICE>_BASE_URL` and `<SERVICE>_API_KEY`). The prefix decides the endpoint, the key variable,
the backend, the limits profile and the request body dialect; the provider is sent the part after
the prefix. A name without a known prefix (`gpt-4o-mini`, or a Hugging Face id such as
`Qwen/Qwen2.5-7B-Instruct`) is *bare*: its role's environment variables decide where it goes, and
its requests are what they always were.

A provider is a row of `PROVIDERS`. Its `api` names the shape of its API, which decides the
backend class that talks to it (`providers.session`), the request line format (`request_lines`)
and how its result lines read (`providers.results`): `openai` for most, `anthropic` (Message
Batches) and `google` (Gemini Batch Mode) for two native batch APIs, whose SDKs are optional
extras (`lexpilot-batch[anthropic]`, `lexpilot-batch[google]`), and `mistral` (Mistral's batch
jobs) and `together` (Together AI's batch jobs), both reached through the `openai` SDK's HTTP client:
no extra.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.apis import OPENAI, Api, Backend
from lexpilot_batch.providers.endpoints import DEFAULT_BASE_URL

OPENAI_API = "openai-api"  # the generic prefix: openai-api/<service>/<model>


@dataclass(frozen=True)
class Provider:
    """One provider prefix and everything it decides."""

    prefix: str
    title: str
    base_url: str | None  # the default endpoint; None: it must be set (`url_var`)
    url_var: str  # overrides the endpoint; `{SERVICE}` is the service of openai-api/<service>/
    key_var: str  # the variable holding the API key
    backend: Backend  # the default backend: batch where the provider has a Batch API, sync where not
    batch_api: bool
    profile: str | None  # limits profile (config.PROFILES); None: guessed from the base URL
    dialect: str  # request body dialect (providers.dialects)
    api: Api = OPENAI  # the API shape: which backend class sends its requests
    ready: bool = True  # False: reserved for a later version
    chat_api: bool = True  # the endpoint of its batches also answers synchronous calls (`--tail-sync`)
    # The body field its models' thinking is switched with (`--model-arg`), and an example of it;
    # "" where the provider documents none. Another provider's switch is refused (`dialects`).
    thinking: str = ""
    thinking_example: str = ""

    def url_var_for(self, service: str | None) -> str:
        return self.url_var.replace("{SERVICE}", _env_name(service or ""))

    def key_var_for(self, service: str | None) -> str:
        return self.key_var.replace("{SERVICE}", _env_name(service or ""))


PROVIDERS: dict[str, Provider] = {
    p.prefix: p
    for p in (
        Provider(
            "openai",
            "OpenAI",
            DEFAULT_BASE_URL,
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
            "batch",
            True,
            "openai",
            "openai",
        ),
        Provider(
            "azure",
            "Azure OpenAI",
            None,  # https://YOUR-RESOURCE.openai.azure.com/openai/v1: the resource is yours
            "AZURE_OPENAI_BASE_URL",
            "AZURE_OPENAI_API_KEY",
            "batch",
            True,
            "azure",
            "openai",
            chat_api=False,  # a Global Batch deployment runs batches only
        ),
        Provider(
            "dashscope",
            "Alibaba Model Studio (DashScope)",
            "https://dashscope.aliyuncs.com/compatible-mode/v1",
            "DASHSCOPE_BASE_URL",
            "DASHSCOPE_API_KEY",
            "batch",
            True,
            "dashscope",
            "max_tokens",
            thinking="enable_thinking",
            thinking_example="enable_thinking=false",
        ),
        Provider(
            "deepseek",
            "DeepSeek",
            "https://api.deepseek.com/v1",
            "DEEPSEEK_BASE_URL",
            "DEEPSEEK_API_KEY",
            "sync",
            False,
            "generic",
            "max_tokens",
        ),
        Provider(
            "mistral",
            "Mistral Batch API",
            "https://api.mistral.ai/v1",
            "MISTRAL_BASE_URL",
            "MISTRAL_API_KEY",
            "batch",
            True,
            "mistral",
            "max_tokens",
            api="mistral",
        ),
        # Groq's Batch API is OpenAI's (the `groq` SDK's `batches.create`: `/v1/chat/completions`,
        # a window of `24h` to `7d`, metadata; `files.create`: purpose `batch`, at most 100 MB).
        Provider(
            "groq",
            "Groq Batch API",
            "https://api.groq.com/openai/v1",
            "GROQ_BASE_URL",
            "GROQ_API_KEY",
            "batch",
            True,
            "groq",
            "max_tokens",
        ),
        # Zhipu BigModel (GLM): OpenAI-shaped Files + Batches under /api/paas/v4, whose lines name
        # `/v4/chat/completions` (https://docs.bigmodel.cn/cn/guide/tools/batch).
        Provider(
            "zhipu",
            "Zhipu BigModel (GLM)",
            "https://open.bigmodel.cn/api/paas/v4",
            "ZHIPUAI_BASE_URL",
            "ZHIPUAI_API_KEY",  # the variable the `zhipuai` SDK itself reads
            "batch",
            True,
            "zhipu",
            "max_tokens",
            thinking="thinking",
            thinking_example='thinking={"type": "disabled"}',
        ),
        # Baidu Qianfan: OpenAI-shaped Files + Batches under /v2, whose lines name /v2/chat/completions;
        # the account needs BOS object storage (https://cloud.baidu.com/doc/qianfan/s/Oml4r78ea, and
        # `POST /v2/batches`, https://cloud.baidu.com/doc/qianfan-api/s/xmk297s1a).
        Provider(
            "qianfan",
            "Baidu Qianfan",
            "https://qianfan.baidubce.com/v2",
            "QIANFAN_BASE_URL",
            "QIANFAN_API_KEY",
            "batch",
            True,
            "qianfan",
            "max_tokens",
            thinking="enable_thinking",
            thinking_example="enable_thinking=false",
        ),
        # SiliconFlow: OpenAI-shaped Files + Batches (https://docs.siliconflow.cn/cn/userguide/guides/batch).
        Provider(
            "siliconflow",
            "SiliconFlow",
            "https://api.siliconflow.cn/v1",
            "SILICONFLOW_BASE_URL",
            "SILICONFLOW_API_KEY",
            "batch",
            True,
            "siliconflow",
            "max_tokens",
            thinking="enable_thinking",
            thinking_example="enable_thinking=false",
        ),
        # Moonshot (Kimi): OpenAI-shaped Files + Batches (https://platform.kimi.com/docs/api/batch-create).
        Provider(
            "moonshot",
            "Moonshot (Kimi)",
            "https://api.moonshot.cn/v1",
            "MOONSHOT_BASE_URL",
            "MOONSHOT_API_KEY",
            "batch",
            True,
            "moonshot",
            "max_tokens",
        ),
        # Volcengine Ark (Doubao): no Files + Batches API, but a batch chat route,
        # `POST /api/v3/batch/chat/completions`, answered at batch inference's quotas
        # (https://www.volcengine.com/docs/82379/1449576): sent one by one through `sync`, the
        # base URL ending in /batch so that its chat completions are that route. The model is the
        # batch inference endpoint's id (`ep-bi-...`).
        Provider(
            "ark",
            "Volcengine Ark (Doubao) batch chat",
            "https://ark.cn-beijing.volces.com/api/v3/batch",
            "ARK_BASE_URL",
            "ARK_API_KEY",
            "sync",
            False,
            "ark",
            "max_tokens",
            thinking="thinking",
            thinking_example='thinking={"type": "disabled"}',
        ),
        # Together AI's Batch API (providers/together/): files uploaded with purpose `batch-api`,
        # `{custom_id, body}` lines, jobs without metadata (https://docs.together.ai/docs/inference/batch/overview;
        # the `together` SDK's `resources/batches.py`). Its default host is the SDK's, api.together.ai.
        Provider(
            "together",
            "Together AI Batch API",
            "https://api.together.ai/v1",
            "TOGETHER_BASE_URL",  # ends in /v1 here; the SDK's own variable of that name does not
            "TOGETHER_API_KEY",
            "batch",
            True,
            "together",
            "max_tokens",
            api="together",
        ),
        Provider(
            OPENAI_API,
            "an OpenAI-compatible service",
            None,
            "{SERVICE}_BASE_URL",
            "{SERVICE}_API_KEY",
            "batch",
            True,
            None,
            "max_tokens",
        ),
        Provider(
            "anthropic",
            "Anthropic Message Batches",
            "https://api.anthropic.com",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY",
            "batch",
            True,
            "anthropic",
            "anthropic",
            api="anthropic",
        ),
        Provider(
            "google",
            "Gemini Batch Mode",
            "https://generativelanguage.googleapis.com",
            "GOOGLE_GEMINI_BASE_URL",  # the variable the google-genai SDK itself reads
            "GOOGLE_API_KEY",
            "batch",
            True,
            "google",
            "google",
            api="google",
        ),
    )
}

# Prefixes other tools (inspect_ai) know and this one does not: refused, not read as bare names,
# so that `vllm/...` is not silently sent to the role's default endpoint.
FOREIGN_PREFIXES = frozenset(
    {
        "azureai",
        "bedrock",
        "cloudflare",
        "fireworks",
        "goodfire",
        "grok",
        "hf",
        "llama-cpp-python",
        "ollama",
        "openrouter",
        "perplexity",
        "sambanova",
        "sglang",
        "vertex",
        "vllm",
    }
)

# Prefixes of providers whose batch API is documented but not supported here, and why; their
# models can still be sent one by one through their OpenAI-compatible chat completions. (None today:
# Together's, the last one, has its folder, providers/together/.)
NOT_SUPPORTED: dict[str, str] = {}

_SERVICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")


def _env_name(service: str) -> str:
    return service.upper().replace("-", "_")


def known_prefixes() -> str:
    ready = [f"{p}/" if p != OPENAI_API else f"{p}/<service>/" for p, v in PROVIDERS.items() if v.ready]
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
        return f"{OPENAI_API}/{self.service}" if self.service else self.provider.prefix


def _edits(a: str, b: str) -> int:
    """Levenshtein distance with adjacent transpositions (`opneai` is one edit from `openai`)."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            best = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                best = min(best, rows[-2][j - 2] + 1)
            row.append(best)
        rows.append(row)
    return rows[-1][-1]


def near_prefix(head: str) -> str | None:
    """The known prefix `head` is a near miss of (another case, or one or two typing slips in a
    prefix of five letters or more, one in a shorter one), if any."""
    lowered = head.lower()
    for prefix in PROVIDERS:
        if lowered == prefix or _edits(lowered, prefix) <= (2 if len(prefix) >= 5 else 1):
            return prefix
    return None


def parse_model(name: str, option: str = "--model") -> ModelName:
    """What a model name says; `ConfigError` for an unknown or reserved prefix, a near miss of a
    known one, or a name missing a part."""
    head, sep, rest = name.partition("/")
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
                f"{_env_name(head)}_BASE_URL (its /v1 URL) and {_env_name(head)}_API_KEY"
            )
        if sep and head.lower() in FOREIGN_PREFIXES:
            raise ConfigError(
                f"{option} {name}: unknown provider prefix {head + '/'!r}; known prefixes are {known_prefixes()}. "
                f"For another OpenAI-compatible service write openai-api/{head.lower()}/{rest} and set "
                f"{_env_name(head)}_BASE_URL and {_env_name(head)}_API_KEY"
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
    if head == OPENAI_API:
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
