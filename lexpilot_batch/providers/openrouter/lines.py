"""An OpenRouter batch request: `{"custom_id", "body": {"model", "messages", ...fields}}`.

OpenRouter's Batch API takes its requests inline, as the `requests` array of the create call's JSON
body (https://openrouter.ai/docs/batch-quickstart: "You submit requests as an inline JSON
`requests` array. You don't upload a JSONL file"), each a `custom_id` and the `body` the batch's
`endpoint` would be sent (the official SDKs' `Request`: `custom_id`, `body`;
https://openrouter.ai/docs/client-sdks/python/components/request, taken 2026-12-06). The workspace
keeps them as a file of one request per line, sent as that array. The body keeps the model, so the
same line is also a complete `POST /chat/completions` for the `sync` backend.

`providers.lines` frames every request line from `empty`: the line with an empty id and an empty
prompt, whose prompt's place is `SLOT`.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.spec import LineShape

ID_KEY = "custom_id"  # the line's first field: its id
SLOT = '"content":""'  # the empty prompt in `empty`'s JSON


def empty(model: str, url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The line with an empty id and an empty prompt; `fields` are the body's other fields."""
    body = {"model": model, "messages": [{"role": "user", "content": ""}], **fields}
    return {"custom_id": "", "body": body}


SHAPE = LineShape(ID_KEY, SLOT, empty, "body", frozenset({"custom_id", "body"}))
