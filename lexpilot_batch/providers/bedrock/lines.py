"""A Bedrock batch inference record: `{"recordId", "modelInput": {"anthropic_version", "messages", ...fields}}`.

Each line of a job's input file is a record id and the model's own `InvokeModel` body
(https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference-data.html, taken 2026-12-06):
for Claude, Anthropic's Messages body with `anthropic_version` "bedrock-2023-05-31" and no `model`
(the job names it; https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-request-response.html).
The id is ours mapped to letters and digits (`bedrock.ids`). The same line is the `InvokeModel`
body of the `sync` backend (`bedrock.chat`).

`providers.lines` frames every request line from `empty`: the line with an empty id and an empty
prompt, whose prompt's place is `SLOT`.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.bedrock.ids import RECORD_ID
from lexpilot_batch.providers.spec import LineShape

ID_KEY = "recordId"  # the line's first field: its id
SLOT = '"content":""'  # the empty prompt in `empty`'s JSON
VERSION = "bedrock-2023-05-31"  # the `anthropic_version` Bedrock's Claude bodies carry


def empty(model: str, url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The line with an empty id and an empty prompt; `fields` are the body's other fields."""
    body = {"anthropic_version": VERSION, "messages": [{"role": "user", "content": ""}], **fields}
    return {"recordId": "", "modelInput": body}


SHAPE = LineShape(ID_KEY, SLOT, empty, "modelInput", frozenset({"recordId", "modelInput"}), id_pattern=RECORD_ID)
