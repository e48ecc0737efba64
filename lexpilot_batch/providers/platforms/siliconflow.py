"""SiliconFlow: OpenAI-shaped Files + Batches, at most 5,000 lines and 1 GB per file, a window of 24 h
to 336 h (https://docs.siliconflow.cn/cn/userguide/guides/batch). Its chat completions take
`enable_thinking` (a boolean), `thinking_budget` (128 to 32,768), `min_p` (at most 1) and
`reasoning_effort` high or max (docs.siliconflow.cn/docs/api/chat-completions-post).
"""

from __future__ import annotations

from lexpilot_batch.providers.openai.platforms import Platform
from lexpilot_batch.providers.spec import MB, Limits, Provider

RULES = Platform(
    "SiliconFlow",
    "docs.siliconflow.cn/docs/api/chat-completions-post",
    booleans=("enable_thinking",),
    integers={"thinking_budget": (128, 32_768)},
    numbers={"min_p": (None, 1)},
    choices={"reasoning_effort": ("high", "max")},
)

PROVIDER = Provider(
    "siliconflow",
    "SiliconFlow",
    "openai",
    "https://api.siliconflow.cn/v1",
    "SILICONFLOW_BASE_URL",
    "SILICONFLOW_API_KEY",
    limits=Limits(5_000, 1024 * MB, "24h", "/v1/chat/completions"),
    hosts=("siliconflow",),
    contract=RULES.check,
    thinking="enable_thinking",
    thinking_example="enable_thinking=false",
)
