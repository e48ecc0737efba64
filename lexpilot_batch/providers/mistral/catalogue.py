"""Mistral's API model names, for `bodies.model_names`, bundled from Mistral's own documentation
source (mistralai/platform-docs-public at 222f4ba, 2026-08-21: `src/schema/models/models/*.ts`,
each model's `identifiers.apiNames`): every model whose `status` is not `Retired` (GA, public
preview, deprecated but still served), its chat models only (no embedding, OCR, moderation,
transcription or speech model: a batch of chat requests cannot use them).
"""

from __future__ import annotations

from lexpilot_batch.providers.spec import Catalogue

CATALOGUE = Catalogue(
    source="mistralai/platform-docs-public src/schema/models/models/*.ts (apiNames, not Retired) at 222f4ba",
    taken="2026-12-05",
    names=frozenset(
        {
            "codestral-2508",
            "codestral-latest",
            "devstral-2512",
            "devstral-latest",
            "devstral-medium-2507",
            "devstral-medium-latest",
            "devstral-small-2507",
            "devstral-small-latest",
            "labs-devstral-small-2512",
            "labs-leanstral-1-5",
            "labs-mistral-small-creative",
            "magistral-medium-2509",
            "magistral-medium-latest",
            "magistral-small-2509",
            "magistral-small-latest",
            "ministral-14b-2512",
            "ministral-14b-latest",
            "ministral-3b-2410",
            "ministral-3b-2512",
            "ministral-3b-latest",
            "ministral-8b-2410",
            "ministral-8b-2512",
            "ministral-8b-latest",
            "mistral-large-2411",
            "mistral-large-2512",
            "mistral-large-latest",
            "mistral-medium-2505",
            "mistral-medium-2508",
            "mistral-medium-3",
            "mistral-medium-3-5",
            "mistral-medium-latest",
            "mistral-small-2506",
            "mistral-small-2603",
            "mistral-small-latest",
            "open-mistral-nemo",
            "open-mistral-nemo-2407",
            "pixtral-12b-2409",
            "pixtral-large-2411",
            "pixtral-large-latest",
            "voxtral-mini-2507",
            "voxtral-mini-2602",
            "voxtral-mini-latest",
            "voxtral-small-2507",
            "voxtral-small-latest",
            "zai-glm-5-2",
        }
    ),
)
