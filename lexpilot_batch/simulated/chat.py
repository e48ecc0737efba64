"""A synchronous call on any of the simulated provider's APIs, answered as a batch line is.

OpenAI's chat completions (`apis.openai`, and Together's), Anthropic's Messages (`apis.anthropic`)
and Gemini's generateContent (`apis.gemini`) each answer one request at once, after its simulated latency
(`latency.chat_seconds`). The client's id of the call (`X-Client-Request-Id`; the sync backend sends
the request line's id) stands for the custom_id of a batch line: the answer, its usage and its
content faults are then drawn exactly as a batch draws them, so a request answers the same whichever
way it travels (`--tail-sync`). Without one, content faults are drawn per call, like the HTTP
faults. Each API's route converts its request to a chat.completions body and the answer back, with
the same functions its batches use.

The flex tier: a body with `service_tier: "flex"` (OpenAI's Chat Completions field, and the
generateContent request's, `providers.routing.flex`) takes `flex_latency` instead of `sync_latency`, may be
refused 429 "resource unavailable" (the `flex_429` fault, drawn per call: OpenAI charges nothing for
such a refusal and advises backing off), and answers exactly what the standard tier or a batch
answers, its `service_tier` field saying "flex" as OpenAI's does. Another tier's value is refused
400, as OpenAI refuses a value outside its `Literal`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from lexpilot_batch.simulated import batches, completions
from lexpilot_batch.simulated.caching import PrefixCache
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.faults import Faults, draw
from lexpilot_batch.simulated.latency import chat_seconds
from lexpilot_batch.simulated.roles import JUDGE_KINDS

HEADER = "X-Client-Request-Id"
FLEX = "flex"
# `service_tier` values of OpenAI's SDK (`CompletionCreateParamsBase.service_tier`).
TIERS = ("auto", "default", "flex", "scale", "priority")


def answer(
    body: Any,
    client_request_id: str | None,
    seed: int,
    faults: Faults,
    roll: Callable[..., float],
    prefixes: PrefixCache | None = None,
) -> dict[str, Any]:
    """The chat.completion for `body`, drawn by the client's id of the call as a batch line's is by
    its custom_id (an Anthropic line id is mapped back to the workspace's by its route first). Its
    cached tokens are what `prefixes` (the provider's store) holds of it; the prefixes it leaves
    are persisted at once (`caching.PrefixCache.append_sync`). `roll` draws the per-call faults
    (the server's seeded generator, never the `random` module's shared one)."""
    if client_request_id is not None and not (0 < len(client_request_id) <= 512 and client_request_id.isascii()):
        raise bad_request(f"{HEADER} must be 1 to 512 ASCII characters.", param=None)
    call = client_request_id or uuid.uuid4().hex
    flex = isinstance(body, dict) and "service_tier" in body
    if flex:
        tier = body["service_tier"]
        if tier is not None and tier not in TIERS:  # null: none given (Ark's SDK sends every field)
            raise bad_request(f"Invalid value for 'service_tier': {tier!r}.", param="service_tier")
        flex = tier == FLEX
        body = {k: v for k, v in body.items() if k != "service_tier"}  # the tier never changes the answer
        if flex and faults.flex_429 and roll("flex_429", "chat") < faults.flex_429:
            raise ApiError(
                429,
                "Resource unavailable: flex processing has not enough capacity for this request now; "
                "retry later or use the default tier.",
                type="resource_unavailable",
                code="resource_unavailable",
                headers={"retry-after-ms": str(int(faults.retry_after * 1000))},
            )
    seconds = chat_seconds(faults, call, flex)
    if seconds:
        time.sleep(seconds)
    key = batches.draw_key(call)
    kind = completions.kind_of(body)
    new: list[bytes] = []
    answer = completions.complete(
        body,
        seed,
        key=key,
        sample=batches.sample_key(client_request_id) if client_request_id else "",
        truncate=draw(faults.seed, "truncate", key) < faults.truncate,
        malformed=kind in JUDGE_KINDS and draw(faults.seed, "malformed", key) < faults.malformed_judge,
        empty=draw(faults.seed, "empty_content", key) < faults.empty_content,
        filtered=draw(faults.seed, "content_filter", key) < faults.content_filter,
        refused=draw(faults.seed, "refusal", key) < faults.refusal,
        prefixes=prefixes,
        new_prefixes=new,
    )
    if prefixes is not None:
        prefixes.append_sync(new)
    if flex:
        answer["service_tier"] = FLEX
    return answer


def on_flex(answer: Any) -> bool:
    """Whether a chat completion says it ran on the flex tier (its `service_tier`)."""
    return isinstance(answer, dict) and answer.get("service_tier") == FLEX
