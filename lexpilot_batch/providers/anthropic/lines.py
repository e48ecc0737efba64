"""A Message Batches request: `{"custom_id", "params": {"model", "messages", ...fields}}` (no url: the batch route's).

`providers.lines` frames every request line from `empty`: the line with an empty id and an empty
prompt, whose prompt's place is `SLOT`.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.anthropic.ids import ANTHROPIC_ID
from lexpilot_batch.providers.spec import LineShape

ID_KEY = "custom_id"  # the line's first field: its id
SLOT = '"content":""'  # the empty prompt in `empty`'s JSON


def empty(model: str, url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The line with an empty id and an empty prompt; `fields` are the body's other fields."""
    params = {"model": model, "messages": [{"role": "user", "content": ""}], **fields}
    return {"custom_id": "", "params": params}


SHAPE = LineShape(ID_KEY, SLOT, empty, "params", frozenset({"custom_id", "params"}), id_pattern=ANTHROPIC_ID)
