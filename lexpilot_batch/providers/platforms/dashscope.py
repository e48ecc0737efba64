"""Alibaba Model Studio (DashScope), OpenAI-compatible mode: Files + Batches under
`.../compatible-mode/v1`, whose models include the seed's DeepSeek judge and User Model in batch."""

from __future__ import annotations

from lexpilot_batch.providers.spec import MB, Limits, Provider

PROVIDER = Provider(
    "dashscope",
    "Alibaba Model Studio (DashScope)",
    "openai",
    "https://dashscope.aliyuncs.com/compatible-mode/v1",
    "DASHSCOPE_BASE_URL",
    "DASHSCOPE_API_KEY",
    limits=Limits(50_000, 500 * MB, "24h", "/v1/chat/completions"),
    hosts=("dashscope", "maas.aliyuncs.com"),
    thinking="enable_thinking",
    thinking_example="enable_thinking=false",
)
