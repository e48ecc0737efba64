"""An xAI batch request as the workspace keeps it: `{"custom_id", "body": {"model", "messages", ...fields}}`.

xAI's Batch API takes its requests inline, added to a batch created before them: `POST
/v1/batches/{batch_id}/requests` `{"batch_requests": [{"batch_request_id", "batch_request":
{"chat_get_completion": <a chat completions body>}}]}` (https://docs.x.ai/developers/advanced-api-usage/batch-api,
"Step 2: Add requests to the batch", taken 2026-12-06). The workspace keeps one request per line in
the shape every OpenAI-shaped API's lines share, the id first and the chat completions body (with
its model) under `body`, so that the same line is also a complete `POST /v1/chat/completions` for
the `sync` backend; `xai.batch` wraps each as the add call's item when it sends the file. No length
or alphabet of a `batch_request_id` is documented; ours have at most 64 characters of
`[A-Za-z0-9_-]` (`providers.ids`) and are sent as they are.

`providers.lines` frames every request line from `empty`: the line with an empty id and an empty
prompt, whose prompt's place is `SLOT`.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.spec import LineShape

ID_KEY = "custom_id"  # the line's first field: its id, sent as the request's `batch_request_id`
SLOT = '"content":""'  # the empty prompt in `empty`'s JSON


def empty(model: str, url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The line with an empty id and an empty prompt; `fields` are the body's other fields."""
    return {"custom_id": "", "body": {"model": model, "messages": [{"role": "user", "content": ""}], **fields}}


SHAPE = LineShape(ID_KEY, SLOT, empty, "body", frozenset({"custom_id", "body"}))
