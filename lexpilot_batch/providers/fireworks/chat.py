"""Fireworks' synchronous call, for the `sync` backend and `--tail-sync`: OpenAI's chat completions
(https://docs.fireworks.ai/api-reference/post-chatcompletions), the line's body with the model added:
a batch line names none (`fireworks.lines`). Where the `fireworks-ai` SDK (1.2.30,
`resources/chat/completions.py`) sends it: `https://api.fireworks.ai/inference/v1/chat/completions`
at its default host, `{FIREWORKS_BASE_URL}/v1/chat/completions` at any other."""

from __future__ import annotations

from typing import Any

import openai

from lexpilot_batch.providers.fireworks.batch import DEFAULT_HOST, host_of
from lexpilot_batch.providers.openai.chat import OpenAIChat


def chat_base(base_url: str) -> str:
    """The chat completions' base URL for `FIREWORKS_BASE_URL` (module docstring)."""
    host = host_of(base_url)
    return host + ("/inference/v1" if host == DEFAULT_HOST else "/v1")


class FireworksChat(OpenAIChat):
    def new_client(self) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=chat_base(self.endpoint.base_url),
            api_key=self.endpoint.require_key(),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def models(self) -> list[str] | None:
        """None: Fireworks lists its model library per account (`GET /v1/accounts/fireworks/models`,
        the SDK's `models.list`), hundreds of models a page, not an OpenAI `GET /models`."""
        return None

    def payload(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        return {"model": self.model, **super().payload(line, where)}
