"""Bedrock batch inference output lines, read as OpenAI batch output lines (`providers.results`).

A job writes one line per record (https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference-results.html,
taken 2026-12-06): `{"recordId", "modelInput", "modelOutput"}`, `modelOutput` the model's
`InvokeModel` response body (for Claude, Anthropic's Message: read as a Message Batches success is,
`anthropic.results`), or, where inference failed, `"error": {"errorCode": <HTTP status>,
"errorMessage"}` in its place. The record id is mapped back to ours (`bedrock.ids.our_id`), or left
as it is when it is not this workspace's. The `sync` backend writes the same shape (`bedrock.chat`).
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers import results as outputs
from lexpilot_batch.providers.anthropic import results as anthropic
from lexpilot_batch.providers.bedrock.ids import our_id


def result(line: dict[str, Any], tag: str) -> dict[str, Any]:
    """One output line of a Bedrock job as an OpenAI batch output line."""
    raw_id = line.get("recordId")
    ours = our_id(raw_id, tag) if isinstance(raw_id, str) else None
    custom_id = ours if ours is not None else raw_id
    output = line.get("modelOutput")
    if isinstance(output, dict):
        read = anthropic.result({"custom_id": "", "result": {"type": "succeeded", "message": output}}, tag)
        return {**read, "custom_id": custom_id}
    error = line.get("error")
    if isinstance(error, dict):
        code = error.get("errorCode")
        status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else 500
        return outputs.failed(custom_id, status, f"bedrock_{status}", error.get("errorMessage"))
    return outputs.never_run(custom_id, "unreadable_result", "a Bedrock output line with neither modelOutput nor error")
