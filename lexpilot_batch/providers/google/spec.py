"""Gemini Batch Mode and generateContent, declared once (`providers.spec`): the `google/` prefix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.google import catalogue, contract, dialect, families, lines, results
from lexpilot_batch.providers.spec import LISTED, MB, ApiSpec, Extra, FlexTier, Limits, ModelNames, Provider

NAME = "google"
EXTRA = Extra("google.genai", "google", "Gemini")
# An uploaded JSONL file of at most 2 GB (the File API's limit); no count is documented, so the
# same 100,000 as Anthropic's keeps one file's results a manageable size.
LIMITS = Limits(100_000, 2048 * MB, "24h", ":batchGenerateContent")


def _load() -> tuple[Any, Any]:
    from lexpilot_batch.providers.google.batch import GoogleBatchBackend
    from lexpilot_batch.providers.google.chat import GeminiChat

    return GoogleBatchBackend, GeminiChat


def _contract(model: str, body: Mapping[str, Any], first_party: bool, reasoning: bool | None) -> list[Any]:
    return contract.problems(body, model)


API = ApiSpec(
    name=NAME,
    lines=lines.SHAPE,
    contract=_contract,
    sample_body=lines.sample_body,
    load=_load,
    dialect=dialect.GOOGLE,
    read_results=lambda tag: results.result,
    families=families.FAMILIES,
    names=ModelNames(
        "the Gemini API",
        lab="Google",
        sim_hint="Gemini and Gemma models (a simulated one is gemini-sim)",
        resource_prefix="models/",
        # Gemma models are served by the Gemini API too (its models page); no family row names them.
        also=r"gemma-.*",
    ),
    # Gemini's Flex inference: `serviceTier: "flex"` in the generateContent request body (its REST
    # name: the `google-genai` SDK sends `GenerateContentConfig.service_tier` so,
    # `models._GenerateContentConfig_to_mldev`, and the request contract knows no other).
    flex=FlexTier("serviceTier", ((r"gemini-(3|3\.\d+)-[a-z0-9.-]+", "ai.google.dev/gemini-api/docs/flex-inference"),)),
    extra=EXTRA,
    simulated_native=True,
    chat_names_model=True,
)

PROVIDERS = (
    Provider(
        "google",
        "Gemini Batch Mode",
        NAME,
        "https://generativelanguage.googleapis.com",
        "GOOGLE_GEMINI_BASE_URL",  # the variable the google-genai SDK itself reads
        "GOOGLE_API_KEY",
        limits=LIMITS,
        names=NAME,
        flex=LISTED,
        catalogue=catalogue.CATALOGUE,
    ),
)
