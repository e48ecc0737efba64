"""A Together batch input line: `{"custom_id", "body": {"model", "messages", ...fields}}`.

Together's batch documentation (https://docs.together.ai/docs/inference/batch/tutorial, "Prepare a
JSONL input file"; https://docs.together.ai/docs/batch-inference) gives each line two fields: a
`custom_id` ("Unique identifier for tracking (max 64 chars)") and the `body` the endpoint would be
sent, with no `method` or `url` (the job names its endpoint when it is created). Together's own
example script reads the same shape (`togethercomputer/skills`,
`skills/together-batch-inference/scripts/batch_workflow.py`). The body keeps the model, so the same
line is also a complete `POST /v1/chat/completions` for the `sync` backend. Our custom_ids have at
most 64 characters (`providers.ids`), so they are sent as they are.

`providers.lines` frames every request line from `empty`: the line with an empty id and an empty
prompt, whose prompt's place is `SLOT`.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.spec import LineShape

ID_KEY = "custom_id"  # the line's first field: its id
SLOT = '"content":""'  # the empty prompt in `empty`'s JSON
MAX_ID = 64  # characters of a custom_id (the tutorial's input file table)


def empty(model: str, url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The line with an empty id and an empty prompt; `fields` are the body's other fields."""
    body = {"model": model, "messages": [{"role": "user", "content": ""}], **fields}
    return {"custom_id": "", "body": body}


SHAPE = LineShape(ID_KEY, SLOT, empty, "body", frozenset({"custom_id", "body"}))
