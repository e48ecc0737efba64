"""Baidu Qianfan: OpenAI-shaped Files + Batches under `/v2`, whose lines name `/v2/chat/completions`,
at most 5,000 requests and 1 GB per file, a window of 1 h to 672 h, billed at 40% of real-time
inference; the account needs BOS object storage (https://cloud.baidu.com/doc/qianfan/s/Oml4r78ea,
and `POST /v2/batches`, https://cloud.baidu.com/doc/qianfan-api/s/xmk297s1a). Its chat completions
switch thinking with `enable_thinking`, a boolean (chat completions v2 reference).
"""

from __future__ import annotations

from lexpilot_batch.providers.openai.platforms import Platform
from lexpilot_batch.providers.spec import MB, Limits, Provider

RULES = Platform(
    "Baidu Qianfan",
    "Qianfan chat completions v2 reference (cloud.baidu.com/doc/qianfan-api)",
    booleans=("enable_thinking",),
)

PROVIDER = Provider(
    "qianfan",
    "Baidu Qianfan",
    "openai",
    "https://qianfan.baidubce.com/v2",
    "QIANFAN_BASE_URL",
    "QIANFAN_API_KEY",
    limits=Limits(5_000, 1024 * MB, "24h", "/v2/chat/completions"),
    hosts=("qianfan.baidubce.com",),
    contract=RULES.check,
    thinking="enable_thinking",
    thinking_example="enable_thinking=false",
)
