"""A synchronous call on any of the simulated provider's APIs, answered as a batch line is.

OpenAI's chat completions (`api`), Anthropic's Messages (`anthropic_api`) and Gemini's
generateContent (`gemini_api`) each answer one request at once, after its simulated latency
(`latency.chat_seconds`). The client's id of the call (`X-Client-Request-Id`; the sync backend sends
the request line's id) stands for the custom_id of a batch line: the answer, its usage and its
content faults are then drawn exactly as a batch draws them, so a request answers the same whichever
way it travels (`--tail-sync`). Without one, content faults are drawn per call, like the HTTP
faults. Each API's route converts its request to a chat.completions body and the answer back, with
the same functions its batches use.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from lexpilot_batch.simulated import batches, completions
from lexpilot_batch.simulated.errors import bad_request
from lexpilot_batch.simulated.faults import Faults, draw
from lexpilot_batch.simulated.latency import chat_seconds
from lexpilot_batch.simulated.roles import JUDGE_KINDS

HEADER = "X-Client-Request-Id"


def answer(body: Any, client_request_id: str | None, seed: int, faults: Faults) -> dict[str, Any]:
    """The chat.completion for `body`, drawn by the client's id of the call as a batch line's is by
    its custom_id (an Anthropic line id is mapped back to the workspace's by its route first)."""
    if client_request_id is not None and not (0 < len(client_request_id) <= 512 and client_request_id.isascii()):
        raise bad_request(f"{HEADER} must be 1 to 512 ASCII characters.", param=None)
    call = client_request_id or uuid.uuid4().hex
    seconds = chat_seconds(faults, call)
    if seconds:
        time.sleep(seconds)
    key = batches.draw_key(call)
    kind = completions.kind_of(body)
    return completions.complete(
        body,
        seed,
        key=key,
        sample=batches.sample_key(client_request_id) if client_request_id else "",
        truncate=draw(faults.seed, "truncate", key) < faults.truncate,
        malformed=kind in JUDGE_KINDS and draw(faults.seed, "malformed", key) < faults.malformed_judge,
        empty=draw(faults.seed, "empty_content", key) < faults.empty_content,
        filtered=draw(faults.seed, "content_filter", key) < faults.content_filter,
        refused=draw(faults.seed, "refusal", key) < faults.refusal,
    )
