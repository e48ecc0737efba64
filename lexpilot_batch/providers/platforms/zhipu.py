"""Zhipu BigModel (GLM): OpenAI-shaped Files + Batches under `/api/paas/v4`, whose lines name
`/v4/chat/completions`, at most 50,000 requests and 100 MB per file
(https://docs.bigmodel.cn/cn/guide/tools/batch). Its chat completions switch thinking with
`thinking: {"type": "enabled" or "disabled"}`, keep temperature and `top_p` within 0 to 1 and take
`do_sample`, a boolean (docs.bigmodel.cn "核心参数", concept-param; the `zhipuai` SDK's
`chat.completions.create`).
"""

from __future__ import annotations

from lexpilot_batch.providers.openai.platforms import Platform
from lexpilot_batch.providers.spec import MB, Catalogue, Limits, Provider

RULES = Platform(
    "Zhipu BigModel",
    "docs.bigmodel.cn concept-param; the zhipuai SDK's chat.completions.create",
    temperature=(0, 1),
    top_p=(0, 1),
    thinking_types=("enabled", "disabled"),
    booleans=("do_sample",),
)

PROVIDER = Provider(
    "zhipu",
    "Zhipu BigModel (GLM)",
    "openai",
    "https://open.bigmodel.cn/api/paas/v4",
    "ZHIPUAI_BASE_URL",
    "ZHIPUAI_API_KEY",  # the variable the `zhipuai` SDK itself reads
    limits=Limits(50_000, 100 * MB, "24h", "/v4/chat/completions"),
    hosts=("bigmodel.cn",),
    contract=RULES.check,
    thinking="thinking",
    thinking_example='thinking={"type": "disabled"}',
    # The model codes of BigModel's model pages for its GLM-4 and GLM-4.5 series
    # (docs.bigmodel.cn/cn/guide/models/text/glm-4 and /glm-4.5); a later series (GLM-4.6 on) is
    # not in a page read here: --allow-model zhipu/NAME.
    catalogue=Catalogue(
        "docs.bigmodel.cn/cn/guide/models/text/glm-4 and glm-4.5",
        "2026-12-05",
        frozenset(
            {
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
            }
        ),
    ),
)
