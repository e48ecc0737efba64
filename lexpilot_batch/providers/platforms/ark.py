"""Volcengine Ark (Doubao): no Files + Batches API, but a batch chat route,
`POST /api/v3/batch/chat/completions`, answered at batch inference's quotas
(https://www.volcengine.com/docs/82379/1449576): sent one by one through `sync`, the base URL ending
in /batch so that its chat completions are that route. The model is the batch inference endpoint's
id (`ep-bi-...`). Its chat completions switch thinking with `thinking: {"type": "enabled",
"disabled" or "auto"}` (the Volcengine Ark SDK's batch chat `Completions.create` and
`completion_create_params`, `volcengine-ark-runtime`).
"""

from __future__ import annotations

from lexpilot_batch.providers.openai.platforms import Platform
from lexpilot_batch.providers.spec import Limits, Provider

RULES = Platform(
    "Volcengine Ark",
    "the Volcengine Ark SDK's batch chat Completions.create (volcengine-ark-runtime)",
    thinking_types=("enabled", "disabled", "auto"),
)

PROVIDER = Provider(
    "ark",
    "Volcengine Ark (Doubao) batch chat",
    "openai",
    "https://ark.cn-beijing.volces.com/api/v3/batch",
    "ARK_BASE_URL",
    "ARK_API_KEY",
    backend="sync",
    batch_api=False,
    limits=Limits(),  # sent one request at a time (`sync`): no files
    hosts=("volces.com",),
    contract=RULES.check,
    thinking="thinking",
    thinking_example='thinking={"type": "disabled"}',
)
