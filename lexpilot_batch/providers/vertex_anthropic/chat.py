"""Claude on Vertex AI's synchronous call, `publishers/anthropic/models/{model}:rawPredict` under the
project and location (`vertex.settings`), with a line's `request`, through the official `anthropic`
SDK's Vertex client (`AnthropicVertex`, `AsyncAnthropicVertex`: its `POST /v1/messages` becomes that
route, the model moved from the body into the URL and `anthropic_version` "vertex-2023-10-16" kept),
for the `sync` backend: `--tail-sync N` and preflight.

The client is handed what `vertex.settings` finds, as Gemini's on Vertex is: the project, the
location as its region, Application Default Credentials (or the access token of the key variable;
the simulated provider's fixed one), and `GOOGLE_VERTEX_BASE_URL` + `/v1` where that is set (a
proxy, the simulated provider). Its answers are saved as Anthropic's call saves them
(`anthropic.chat`: `{"custom_id", "result"}`), which `vertex_anthropic.results` reads too.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.anthropic.chat import AnthropicChat
from lexpilot_batch.providers.anthropic.spec import EXTRA as ANTHROPIC_SDK
from lexpilot_batch.providers.errors import Failure
from lexpilot_batch.providers.sync.call import damaged_line
from lexpilot_batch.providers.vertex import settings
from lexpilot_batch.providers.vertex.errors import failure_of as vertex_failure
from lexpilot_batch.providers.vertex.spec import EXTRA as GENAI_SDK


class VertexClaudeChat(AnthropicChat):
    """`:rawPredict` (through `AnthropicVertex`) with a line's `request`."""

    def _options(self) -> dict[str, Any]:
        where = settings.settings_of(self.endpoint)
        options: dict[str, Any] = {
            "region": where.location,
            "project_id": where.project,
            "credentials": settings.credentials(self.endpoint),
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }
        if where.vertex_url is not None:
            options["base_url"] = where.vertex_url.rstrip("/") + "/v1"
        return options

    def new_client(self) -> Any:
        self.sdk = ANTHROPIC_SDK.require()
        self.genai_errors = GENAI_SDK.require("google.genai.errors")
        return self.sdk.AnthropicVertex(**self._options())

    def new_async_client(self) -> Any:
        return self.sdk.AsyncAnthropicVertex(**self._options())

    def models(self) -> list[str] | None:
        """None: Vertex AI lists no Anthropic publisher models to a project (Model Garden is a console page)."""
        return None

    def payload(self, line: dict[str, Any], where: str) -> dict[str, Any]:
        """The line's `request` with the model, which the SDK moves into the URL."""
        request = line.get("request")
        if not isinstance(request, dict):
            raise damaged_line(where, "a custom_id and a request object")
        return {**request, "model": self.model}

    def model_of(self, payload: dict[str, Any]) -> str:
        return self.model

    def failure(self, exc: BaseException) -> Failure | None:
        """The `anthropic` SDK's failures (`anthropic.errors`), then what the SDK lets through from
        google-auth, which it asks for a token: a refused refresh (401), its transport's errors."""
        return super().failure(exc) or vertex_failure(self.genai_errors, exc)
