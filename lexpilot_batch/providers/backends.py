"""Each API shape's batch backend and synchronous call: the one table a new API shape adds its row to.

The native APIs' SDKs are optional extras, imported when a backend or a call of theirs is built.
"""

from __future__ import annotations

from collections.abc import Callable

from lexpilot_batch.providers.apis import ANTHROPIC, GOOGLE, MISTRAL, OPENAI, TOGETHER
from lexpilot_batch.providers.base import BatchBackend
from lexpilot_batch.providers.chat import ChatCall
from lexpilot_batch.providers.endpoints import Endpoint, Limits
from lexpilot_batch.providers.extras import sdk_problem


def _openai() -> tuple[type[BatchBackend], type[ChatCall]]:
    from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend
    from lexpilot_batch.providers.openai.chat import OpenAIChat

    return OpenAIBatchBackend, OpenAIChat


def _anthropic() -> tuple[type[BatchBackend], type[ChatCall]]:
    from lexpilot_batch.providers.anthropic.batch import AnthropicBatchBackend
    from lexpilot_batch.providers.anthropic.chat import AnthropicChat

    return AnthropicBatchBackend, AnthropicChat


def _google() -> tuple[type[BatchBackend], type[ChatCall]]:
    from lexpilot_batch.providers.google.batch import GoogleBatchBackend
    from lexpilot_batch.providers.google.chat import GeminiChat

    return GoogleBatchBackend, GeminiChat


def _mistral() -> tuple[type[BatchBackend], type[ChatCall]]:
    from lexpilot_batch.providers.mistral.batch import MistralBatchBackend
    from lexpilot_batch.providers.openai.chat import OpenAIChat  # Mistral's chat completions are OpenAI's shape

    return MistralBatchBackend, OpenAIChat


def _together() -> tuple[type[BatchBackend], type[ChatCall]]:
    from lexpilot_batch.providers.openai.chat import OpenAIChat  # Together's chat completions are OpenAI's shape
    from lexpilot_batch.providers.together.batch import TogetherBatchBackend

    return TogetherBatchBackend, OpenAIChat


# The optional SDKs of the native APIs: (module, the extra installing it, the provider's name).
SDKS: dict[str, tuple[str, str, str]] = {
    ANTHROPIC: ("anthropic", "anthropic", "Anthropic"),
    GOOGLE: ("google.genai", "google", "Gemini"),
}


def missing_sdk(api: str) -> str | None:
    """What to install for `api`'s requests to be sent, when its SDK is missing or older than its
    extra asks (`extras.sdk_problem`); None when it is fine, or needs none. Looked up, not
    imported: `prepare` asks before anything is compiled."""
    if api not in SDKS:
        return None
    return sdk_problem(*SDKS[api])


API_CLASSES: dict[str, Callable[[], tuple[type[BatchBackend], type[ChatCall]]]] = {
    OPENAI: _openai,
    ANTHROPIC: _anthropic,
    GOOGLE: _google,
    MISTRAL: _mistral,
    TOGETHER: _together,
}


def batch_backend(api: str, endpoint: Endpoint, limits: Limits, timeout: float) -> BatchBackend:
    """The batch backend of `api`'s shape at `endpoint`."""
    backend_class, _ = API_CLASSES[api]()
    return backend_class(endpoint, limits, timeout=timeout)  # type: ignore[call-arg]


def chat_call(api: str, endpoint: Endpoint, timeout: float, max_retries: int, model: str = "") -> ChatCall:
    """The synchronous call of `api`'s shape (`registry.Provider.api`) at `endpoint`."""
    _, call_class = API_CLASSES[api]()
    return call_class(endpoint, timeout, max_retries, model)
