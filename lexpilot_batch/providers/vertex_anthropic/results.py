"""Claude-on-Vertex batch result lines (`predictions.jsonl`), read as OpenAI batch output lines
(`providers.results`).

Google's page says what a row of a Claude job's output holds (https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/batch,
taken 2026-12-06): the input's columns (`custom_id`, `request`) and the two it reserves, "response(JSON)
and status". It shows no output line; read here as Vertex's Gemini rows are (`vertex.results`):
`status` empty for a request answered, `response` then Claude's Message as `rawPredict` answers it
(read as a Message Batches success is, `anthropic.results`); a non-empty `status` is the row's
failure (`vertex.results.row_failed`). The `sync` backend's lines are Message Batches' own
(`{"custom_id", "result"}`, `anthropic.chat`), read as Anthropic's. The id is mapped back to ours
(`anthropic.ids.our_id`), or left as it is when it is not this workspace's.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers import results as outputs
from lexpilot_batch.providers.anthropic import results as anthropic
from lexpilot_batch.providers.anthropic.ids import our_id
from lexpilot_batch.providers.vertex.results import row_failed


def result(line: dict[str, Any], tag: str) -> dict[str, Any]:
    """One output line of a Claude job on Vertex AI (or of its synchronous call) as an OpenAI batch output line."""
    if isinstance(line.get("result"), dict):  # the sync backend's line: Message Batches' shape
        return anthropic.result(line, tag)
    raw = line.get("custom_id")
    ours = our_id(raw, tag) if isinstance(raw, str) else None
    custom_id = ours if ours is not None else raw
    failed = row_failed(custom_id, line.get("status"))
    if failed is not None:
        return failed
    response = line.get("response")
    if isinstance(response, dict):
        read = anthropic.result({"custom_id": "", "result": {"type": "succeeded", "message": response}}, tag)
        return {**read, "custom_id": custom_id}
    return outputs.never_run(
        custom_id, "unreadable_result", "a Vertex AI output row with neither a response nor a status"
    )
