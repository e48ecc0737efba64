"""Claude on Vertex AI, declared once (`providers.spec`): the `vertex-anthropic/` prefix,
`vertex-anthropic/<model id>` (`vertex-anthropic/claude-sonnet-4-5@20250929`, sent as
`publishers/anthropic/models/<model id>`: the publisher and model of Vertex AI's own resource name).

A prefix of its own, beside `vertex/` (Gemini): a prefix decides one API shape (its lines, body
dialect, contract and results), and Claude's on Vertex are Anthropic's Messages
(`{"custom_id", "request"}` lines, `lines`), Gemini's GenerateContent. Both share Vertex AI's
project, location, bucket and credentials (`vertex.settings`: the same variables), its
`batchPredictionJobs` through `google-genai`'s Vertex client and Cloud Storage (`batch`, a variant
of `vertex.batch`), and the job listing. The synchronous call is `rawPredict` through the official
`anthropic` SDK's `AnthropicVertex` (`chat`): both SDKs are needed, the `google` and `anthropic`
extras (`BOTH`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.providers.anthropic import dialect, ids
from lexpilot_batch.providers.anthropic.spec import EXTRA as ANTHROPIC_SDK
from lexpilot_batch.providers.spec import MB, ApiSpec, Extra, Limits, Provider
from lexpilot_batch.providers.vertex.spec import EXTRA as GENAI_SDK
from lexpilot_batch.providers.vertex_anthropic import contract, lines, results

NAME = "vertex_anthropic"
PUBLISHED = "publishers/anthropic/models/"  # a Claude model's resource name on Vertex AI, before its id


@dataclass(frozen=True)
class BothExtras(Extra):
    """google-genai for the jobs, the anthropic SDK for the call: what to install is whichever is missing."""

    also: Extra = ANTHROPIC_SDK

    def problem(self) -> str | None:
        return super().problem() or self.also.problem()


EXTRA = BothExtras(GENAI_SDK.module, GENAI_SDK.extra, "Claude on Vertex AI")
# Per job, taken 2026-12-06: Vertex AI batch prediction's (`vertex.spec.LIMITS`: an input file of at
# most 1 GB, a job queued up to 72 hours); the Claude page (https://cloud.google.com/vertex-ai/
# generative-ai/docs/partner-models/claude/batch) names no request or size limit of its own, only
# "By default, the number of concurrent batch requests that you can make in a single project is 4".
# No request count per Claude job is documented: 100,000 is a choice, not a documented limit (Anthropic's
# own Message Batches' bound, below the 200,000 a secondary source gives Gemini's jobs).
LIMITS = Limits(100_000, 1000 * MB, "72h", "batchPredictionJobs")


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.vertex_anthropic.batch import VertexClaudeBatchBackend
    from lexpilot_batch.providers.vertex_anthropic.chat import VertexClaudeChat

    return VertexClaudeBatchBackend, VertexClaudeChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    return contract.problems(model, body)


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=lines.sample_body,
    load=_load,
    dialect=dialect.ANTHROPIC,
    read_results=lambda tag: lambda line: results.result(line, tag),
    line_id=ids.line_id,
    our_id=ids.our_id,
    extra=EXTRA,
    simulated_native=True,
    chat_names_model=True,  # a line names no model: the job, or rawPredict's URL, does
)

PROVIDERS = (
    Provider(
        "vertex-anthropic",
        "Claude on Vertex AI batch prediction",
        NAME,
        "https://aiplatform.googleapis.com",  # unchanged: the SDKs pick the location's endpoint
        "GOOGLE_VERTEX_BASE_URL",  # Vertex's variables (`vertex.settings`), shared with Gemini's
        "GOOGLE_OAUTH_ACCESS_TOKEN",  # optional: Application Default Credentials otherwise; redacted where echoed
        limits=LIMITS,  # (no `hosts`: a bare name's URL on aiplatform.googleapis.com is Gemini's profile)
        keyless=True,
    ),
)
