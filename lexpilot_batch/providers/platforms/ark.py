"""Volcengine Ark (Doubao): no Files + Batches API, but a batch chat route,
`POST /api/v3/batch/chat/completions`, answered at batch inference's quotas
(https://www.volcengine.com/docs/82379/1449576): sent one by one through `sync`, the base URL ending
in /batch so that its chat completions are that route. The model is the batch inference endpoint's
id (`ep-bi-...`). Its chat completions switch thinking with `thinking: {"type": "enabled",
"disabled" or "auto"}` (the Volcengine Ark SDK's batch chat `Completions.create` and
`completion_create_params`, `volcengine-ark-runtime`).

A request there may wait as long as Ark's own SDK lets it: its batch chat `Completions.create`
keeps one deadline, the client's timeout (`_constants.DEFAULT_TIMEOUT_SECONDS`, 600 s), and sends
a request again on 408, 409, 429 and 5xx with waits doubling from 0.5 s up to 8 s
(`INITIAL_RETRY_DELAY`, `MAX_RETRY_DELAY`) until that deadline: 600 s a request, and as many
retries as 8-second waits fit in it (`registry.chat_policy`; the command's `--timeout` if longer).
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
    chat_timeout=600.0,
    chat_retries=75,  # 600 s / 8 s
)
