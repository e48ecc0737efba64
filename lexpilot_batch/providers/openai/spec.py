"""OpenAI's Files + Batches and Chat Completions, declared once (`providers.spec`): the `openai/`
prefix, and `openai-api/<service>/` for any OpenAI-compatible service of your own. Every platform
that copies this API (Azure, DashScope, Groq, ...) is one file of `providers/platforms/` over it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.bodies.schema import chat_sample
from lexpilot_batch.providers.cache_layout import KEY
from lexpilot_batch.providers.openai import contract, dialect, families, lines
from lexpilot_batch.providers.routing.endpoints import DEFAULT_BASE_URL
from lexpilot_batch.providers.spec import FORCED, HOME, MB, ApiSpec, Catalogue, FlexTier, Limits, ModelNames, Provider

NAME = "openai"


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend
    from lexpilot_batch.providers.openai.chat import OpenAIChat

    return OpenAIBatchBackend, OpenAIChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    return contract.problems(body, first_party=first_party, reasoning=reasoning)


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=chat_sample,
    load=_load,
    dialect=dialect.MAX_TOKENS,
    families=families.FAMILIES,
    names=ModelNames("OpenAI's API", lab="OpenAI"),
    # OpenAI's Flex processing: `service_tier: "flex"` on Chat Completions, "priced at Batch API
    # rates"; the models its pricing page lists under Flex (`routing.flex`).
    flex=FlexTier(
        "service_tier",
        (
            (
                r"(gpt-5(\.\d+)?(-mini|-nano)?|o3|o4-mini)(-\d{4}-\d{2}-\d{2})?",
                "platform.openai.com/docs/pricing (Flex)",
            ),
        ),
    ),
    openai_lines=True,
    bare=True,
)

PROVIDERS = (
    # No profile sets `enqueued_tokens`: OpenAI's quota depends on the usage tier and the model,
    # and it documents no one value to assume.
    Provider(
        "openai",
        "OpenAI",
        NAME,
        DEFAULT_BASE_URL,
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        limits=Limits(50_000, 200 * MB, "24h", "/v1/chat/completions"),
        hosts=("api.openai.com",),
        dialect=dialect.OPENAI,
        first_party=True,
        names=NAME,
        flex=HOME,
        cache=lambda model: KEY,
        catalogue=Catalogue(
            "the openai SDK's ChatModel literal (openai.types.ChatModel)",
            "installed",
            sdk=("openai.types", "ChatModel", None),
        ),
    ),
    # openai-api/<service>/<model>: any OpenAI-compatible service (vLLM, a proxy), its URL and key in
    # <SERVICE>_BASE_URL and <SERVICE>_API_KEY; its limits guessed from the URL. Flex only when
    # forced: it may be a gateway to a provider that has it.
    Provider(
        "openai-api",
        "an OpenAI-compatible service",
        NAME,
        None,
        "{SERVICE}_BASE_URL",
        "{SERVICE}_API_KEY",
        flex=FORCED,
        generic=True,
    ),
)
