"""The model lists the providers publish, as the simulated provider reads them (`names`), each
with where and when it was read: where an SDK carries no list of its own, and the ids an SDK's
list has dropped while the API may still serve them. The product keeps its own reading of these
sources (`providers.<api>` catalogues); a test compares the two, so that a slip in one shows."""

from __future__ import annotations

from typing import NamedTuple


class Published(NamedTuple):
    source: str
    taken: str
    names: frozenset[str]


# anthropic-sdk-python, src/anthropic/types/model.py: every id of `Model` in its 25 versions up to
# commit 009b035 (2026-08-08); the installed SDK's own `Model` literal is read beside it.
ANTHROPIC = Published(
    "anthropic-sdk-python src/anthropic/types/model.py, its history up to 009b035",
    "2026-12-05",
    frozenset(
        [
            "claude-2.0",
            "claude-2.1",
            "claude-3-5-haiku-20241022",
            "claude-3-5-haiku-latest",
            "claude-3-5-sonnet-20240620",
            "claude-3-5-sonnet-20241022",
            "claude-3-5-sonnet-latest",
            "claude-3-7-sonnet-20250219",
            "claude-3-7-sonnet-latest",
            "claude-3-haiku-20240307",
            "claude-3-opus-20240229",
            "claude-3-opus-latest",
            "claude-3-sonnet-20240229",
            "claude-4-opus-20250514",
            "claude-4-sonnet-20250514",
            "claude-fable-5",
            "claude-haiku-4-5",
            "claude-haiku-4-5-20251001",
            "claude-instant-1.2",
            "claude-mythos-5",
            "claude-mythos-preview",
            "claude-opus-4-0",
            "claude-opus-4-1",
            "claude-opus-4-1-20250805",
            "claude-opus-4-20250514",
            "claude-opus-4-5",
            "claude-opus-4-5-20251101",
            "claude-opus-4-6",
            "claude-opus-4-7",
            "claude-opus-4-8",
            "claude-opus-5",
            "claude-sonnet-4-0",
            "claude-sonnet-4-20250514",
            "claude-sonnet-4-5",
            "claude-sonnet-4-5-20250929",
            "claude-sonnet-4-6",
            "claude-sonnet-5",
        ]
    ),
)

# The Gemini API's models page (https://ai.google.dev/gemini-api/docs/models, "Model variants", in
# its stored versions) and its batch guide's example (docs/batch-api); the installed google-genai's
# own model tables are read beside it (`names.gemini`).
GEMINI = Published(
    "ai.google.dev/gemini-api/docs/models and docs/batch-api",
    "2026-12-05",
    frozenset(
        [
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
            "gemini-3-flash-preview",
        ]
    ),
)

# mistralai/platform-docs-public at 222f4ba (2026-08-21), src/schema/models/models/*.ts: the
# `identifiers.apiNames` of every model whose `status` is not `Retired`.
MISTRAL = Published(
    "mistralai/platform-docs-public src/schema/models/models/*.ts at 222f4ba",
    "2026-12-05",
    frozenset(
        [
            "codestral-2508",
            "codestral-embed",
            "codestral-embed-2505",
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
            "mistral-embed",
            "mistral-embed-2312",
            "mistral-large-2411",
            "mistral-large-2512",
            "mistral-large-latest",
            "mistral-medium-2505",
            "mistral-medium-2508",
            "mistral-medium-3",
            "mistral-medium-3-5",
            "mistral-medium-latest",
            "mistral-moderation-2411",
            "mistral-moderation-2603",
            "mistral-ocr-2503",
            "mistral-ocr-2505",
            "mistral-ocr-2512",
            "mistral-ocr-4",
            "mistral-ocr-4-0",
            "mistral-ocr-4-1",
            "mistral-ocr-latest",
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
        ]
    ),
)

# BigModel's model pages of its GLM-4 and GLM-4.5 series (docs.bigmodel.cn/cn/guide/models/text/glm-4
# and /glm-4.5), the model codes as its API takes them.
ZHIPU = Published(
    "docs.bigmodel.cn/cn/guide/models/text/glm-4 and glm-4.5",
    "2026-12-05",
    frozenset(
        [
            "glm-4-plus",
            "glm-4-air-250414",
            "glm-4-airx",
            "glm-4-flashx-250414",
            "glm-4-flash-250414",
            "glm-4-flash",
            "glm-4.5",
            "glm-4.5-air",
            "glm-4.5-x",
            "glm-4.5-airx",
            "glm-4.5-flash",
        ]
    ),
)
