"""A Fireworks batch input line: `{"custom_id", "body": {"messages", ...fields}}`, the body without
its model.

Fireworks' batch guide (https://docs.fireworks.ai/guides/batch-inference, "Getting Started", taken
2026-12-06) asks for a JSONL dataset whose every line holds a `custom_id` ("unique") and a `body`
("request parameters"), "OpenAI Batch API compatible format with custom_id (unique id) and body
fields", and its example lines name no model: the job does (`model` of
`POST /v1/accounts/{account_id}/batchInferenceJobs`; the `fireworks-ai` SDK's
`BatchInferenceJobCreateParams`). So the line leaves it out, and the synchronous call names it
(`fireworks.chat`, `spec.ApiSpec.chat_names_model`). No length or alphabet of a custom_id is
documented; ours have at most 64 characters of `[A-Za-z0-9_-]` (`providers.ids`) and are sent as they are.

`providers.lines` frames every request line from `empty`: the line with an empty id and an empty
prompt, whose prompt's place is `SLOT`.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.spec import LineShape

ID_KEY = "custom_id"
SLOT = '"content":""'


def empty(model: str, url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The line with an empty id and an empty prompt; `fields` are the body's other fields."""
    return {"custom_id": "", "body": {"messages": [{"role": "user", "content": ""}], **fields}}


SHAPE = LineShape(ID_KEY, SLOT, empty, "body", frozenset({"custom_id", "body"}))
