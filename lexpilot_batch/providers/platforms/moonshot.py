"""Moonshot (Kimi): OpenAI-shaped Files + Batches (https://platform.kimi.com/docs/api/batch-create),
at most 100 MB per file, a window of 12 h to 7 d, no request count documented. Its chat completions
take a temperature of 0 to 1 (Moonshot's chat reference as issue 45 read it; the defaults of the
models overview, 0.0 to 1.0 by family, lie within it), `n` 1 to 5, and switch thinking with
`thinking: {"type": "enabled" or "disabled"}`; Kimi K2.5 and K2.6 take no temperature, `top_p`,
`presence_penalty` or `frequency_penalty` (fixed by Moonshot) and `n` 1 only
(platform.kimi.com/docs/api/models-overview).
"""

from __future__ import annotations

from lexpilot_batch.providers.openai.platforms import Fixed, Platform
from lexpilot_batch.providers.spec import MB, Limits, Provider

RULES = Platform(
    "Moonshot (Kimi)",
    "platform.kimi.com/docs/api/models-overview",
    temperature=(0, 1),
    n=(1, 5),
    thinking_types=("enabled", "disabled"),
    fixed=(
        Fixed(
            r"kimi-k2\.[56](?:-.*)?",
            "Kimi K2.5 and K2.6",
            ("temperature", "top_p", "presence_penalty", "frequency_penalty", "n"),
        ),
    ),
)

PROVIDER = Provider(
    "moonshot",
    "Moonshot (Kimi)",
    "openai",
    "https://api.moonshot.cn/v1",
    "MOONSHOT_BASE_URL",
    "MOONSHOT_API_KEY",
    limits=Limits(50_000, 100 * MB, "24h", "/v1/chat/completions"),
    hosts=("moonshot",),
    contract=RULES.check,
)
