"""Vertex AI batch prediction of Gemini models, declared once (`providers.spec`): the `vertex/`
prefix, `vertex/<model>` (`vertex/gemini-2.5-flash`, sent as `publishers/google/models/<model>`).

Its lines are Gemini's (`google.lines`: `{"key", "request": GenerateContentRequest}`, the body
held to Gemini's contract and families), made Vertex's at upload (`vertex.batch.vertex_lines`:
the key moved into the request's labels, which Vertex echoes in its output). Its SDK is the one
Google now names for Gemini on Vertex AI, `google-genai` with `vertexai=True` (the `google`
extra): google-cloud-aiplatform's generative modules (`vertexai.generative_models`,
`vertexai.batch_prediction`) are deprecated in its favour (docs/providers.md#vertex-ai).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.google import catalogue, contract, dialect, lines
from lexpilot_batch.providers.spec import MB, ApiSpec, Extra, Limits, Provider
from lexpilot_batch.providers.vertex import ids, results

NAME = "vertex"
EXTRA = Extra("google.genai", "google", "Vertex AI")
API_VERSION = "v1"  # batchPredictionJobs and generateContent are GA there (google-genai's default is v1beta1)
# Per job, taken 2026-12-06: an input file of at most 1 GB, a job queued up to 72 hours and aiming
# to finish within 24 hours of starting (the Gemini embedding batch page, "built on Gemini Batch
# Inference": docs.cloud.google.com/gemini-enterprise-agent-platform/models/embeddings/
# batch-prediction-genai-embeddings); 200,000 requests per job from a secondary source (GMI Cloud's
# guide to its Vertex-backed Gemini batches, docs.gmicloud.ai: "Max 1GB file size, max 200K
# requests"): the Gemini guide's own "Quotas and limits" section was not in what could be read.
# Gemini jobs beyond 8 at once are queued (Vertex's batch prediction quotas page).
LIMITS = Limits(200_000, 1000 * MB, "72h", "batchPredictionJobs")


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.vertex.batch import VertexBatchBackend
    from lexpilot_batch.providers.vertex.chat import VertexChat

    return VertexBatchBackend, VertexChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    return contract.problems(body, model)


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=lines.sample_body,
    load=_load,
    dialect=dialect.GOOGLE,
    read_results=lambda tag: lambda line: results.result(line, tag),
    line_id=ids.line_id,
    our_id=ids.our_id,
    extra=EXTRA,
    simulated_native=True,
    chat_names_model=True,
)

PROVIDERS = (
    Provider(
        "vertex",
        "Vertex AI batch prediction",
        NAME,
        "https://aiplatform.googleapis.com",  # unchanged: google-genai picks the location's endpoint
        "GOOGLE_VERTEX_BASE_URL",
        # Credentials are Application Default Credentials, found by google-auth (`vertex.settings`);
        # an access token in this variable (Terraform's google provider's name for one) is used
        # instead where it is set, and redacted wherever it is echoed.
        "GOOGLE_OAUTH_ACCESS_TOKEN",
        limits=LIMITS,
        hosts=("aiplatform.googleapis.com",),
        names="google",  # Gemini's models, by the Gemini API's rules and list
        catalogue=catalogue.CATALOGUE,
        keyless=True,
    ),
)
