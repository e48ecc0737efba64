"""A Mistral batch input line: `{"custom_id", "body": {"model", "messages", ...fields}}`.

Mistral's Batch API documentation (https://docs.mistral.ai/capabilities/batch, "Prepare and
Upload your Batch") gives each line a `custom_id` and the `body` the endpoint would be sent, with
no `method` or `url`: the endpoint and the model are named when the job is created. The model is
kept in the body too ("optional when you specify the model at job creation time"), so that the
same line is also a complete `POST /v1/chat/completions` for the `sync` backend. The `mistralai`
SDK's `BatchRequest` (`custom_id`, `body`) is the same shape.

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
