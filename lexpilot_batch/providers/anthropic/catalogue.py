"""The Claude model ids Anthropic publishes, for `bodies.model_names`: the installed `anthropic`
SDK's `Model` literal (read when checked), and every id that literal held in the SDK's history
(anthropic-sdk-python, `src/anthropic/types/model.py`, its 25 versions up to commit 009b035 of
2026-08-08): newer versions drop ids the API may still serve. An id the API has retired since is
refused by the API, not here.
"""

from __future__ import annotations

from lexpilot_batch.providers.spec import Catalogue

CATALOGUE = Catalogue(
    source="the anthropic SDK's Model literal (installed, and anthropic-sdk-python src/anthropic/types/model.py "
    "up to 009b035)",
    taken="2026-12-05",
    names=frozenset(
        {
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
        }
    ),
    sdk=("anthropic.types", "Model", None),
)
