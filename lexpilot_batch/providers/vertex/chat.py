"""Vertex AI's synchronous call for `vertex/` models: `publishers/google/models/{model}:generateContent`
under the project and location (`settings`), with a batch line's request, through the
`google-genai` SDK's Vertex client; Gemini's call (`google.chat.GeminiChat`) otherwise, its
answers saved as the lines a Gemini batch holds (`{"key", "response"}`, `{"key", "error"}`),
which `vertex.results` reads too.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.google.chat import GeminiChat
from lexpilot_batch.providers.google.client import MAX_DELAY, RETRY_DELAY
from lexpilot_batch.providers.vertex import settings
from lexpilot_batch.providers.vertex.errors import failure_of
from lexpilot_batch.providers.vertex.spec import API_VERSION, EXTRA


class VertexChat(GeminiChat):
    """`publishers/google/models/{model}:generateContent` with a batch line's request."""

    def _sdk_client(self) -> Any:
        """google-genai's Vertex client, for the call and its asynchronous side alike (`GeminiChat`
        sends both through the client's low-level request)."""
        genai = EXTRA.require()
        self.errors = EXTRA.require("google.genai.errors")
        types = EXTRA.require("google.genai.types")
        where = settings.settings_of(self.endpoint)
        retry = types.HttpRetryOptions(
            attempts=self.max_retries + 1, initial_delay=RETRY_DELAY, jitter=RETRY_DELAY, max_delay=MAX_DELAY
        )
        options = types.HttpOptions(
            base_url=where.vertex_url, api_version=API_VERSION, timeout=int(self.timeout * 1000), retry_options=retry
        )
        return genai.Client(
            vertexai=True,
            project=where.project,
            location=where.location,
            credentials=settings.credentials(self.endpoint),
            http_options=options,
        )

    def models(self) -> list[str] | None:
        """Google's publisher models (`models.list(query_base=True)`: `GET publishers/google/models`)."""
        listed = self.client.models.list(config={"query_base": True})
        return [str(m.name or "").rsplit("/", 1)[-1] for m in listed]

    def path(self) -> str:
        return f"publishers/google/models/{self.model}:generateContent"

    def failure(self, exc: BaseException) -> Failure | None:
        return failure_of(self.errors, exc)
