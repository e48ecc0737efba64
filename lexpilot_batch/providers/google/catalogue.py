"""The Gemini API's model codes, for `bodies.model_names`, bundled from two published lists: the
Gemini API's models page (https://ai.google.dev/gemini-api/docs/models, "Model variants", as its
stored versions list them) with the batch guide's example model
(https://ai.google.dev/gemini-api/docs/batch-api: `gemini-3-flash-preview`), and the model tables
of the installed `google-genai` 3.6.1 (`_local_tokenizer_loader.py`: the models it counts tokens
for). Embedding, image, speech and live models are left out: a batch of chat requests cannot use
them. `models/NAME` is read as NAME (the API's resource name).
"""

from __future__ import annotations

from lexpilot_batch.providers.spec import Catalogue

CATALOGUE = Catalogue(
    source="ai.google.dev/gemini-api/docs/models and docs/batch-api; google-genai 3.6.1 _local_tokenizer_loader.py",
    taken="2026-12-05",
    names=frozenset(
        {
            # the models page
            "gemini-2.5-pro",
            "gemini-2.5-flash",
            "gemini-2.5-flash-lite",
            "gemini-2.5-flash-preview-04-17",
            "gemini-2.5-flash-preview-05-20",
            "gemini-2.5-pro-preview-05-06",
            "gemini-2.5-pro-preview-03-25",
            "gemini-2.5-pro-exp-03-25",
            "gemini-2.0-flash",
            "gemini-2.0-flash-lite",
            "gemini-2.0-flash-lite-preview-02-05",
            "gemini-1.5-flash",
            "gemini-1.5-flash-8b",
            "gemini-1.5-pro",
            # the batch guide
            "gemini-3-flash-preview",
            # google-genai 3.6.1's tables
            "gemini-2.5-pro-preview-06-05",
            "gemini-2.5-flash-lite-preview-06-17",
            "gemini-2.0-flash-001",
            "gemini-2.0-flash-lite-001",
            "gemini-3-pro-preview",
            "gemini-3.5-flash",
            "gemini-3.1-flash-lite",
            "gemini-3.1-pro-preview",
        }
    ),
)
