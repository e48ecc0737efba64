"""A batch input line of Claude on Vertex AI: `{"custom_id", "request": {"anthropic_version":
"vertex-2023-10-16", "messages", ...fields}}`, Anthropic's Messages body without `model` (the job
names it).

The shape is Google's ("Batch predictions with Anthropic Claude models", Prepare input:
https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/batch, taken
2026-12-06): "The input ... must follow the Anthropic Claude API Schema JSON format", its example
`{"custom_id": "request-1", "request": {"messages": [...], "anthropic_version":
"vertex-2023-10-16", "max_tokens": 50}}`, `custom_id` "An ID for each request to match the input
with the output". The workspace file is uploaded as it is: its lines are already Vertex's. The id
is ours mapped as Anthropic's Message Batches map it (`anthropic.ids`: `[a-zA-Z0-9_-]{1,64}`,
after the workspace's tag): Google documents no pattern for it, and this is the narrowest a Claude
request id is known to need (an assumption docs/providers.md states). The same `request` is the
`rawPredict` body of the `sync` backend (`vertex_anthropic.chat`).

`providers.lines` frames every request line from `empty`: the line with an empty id and an empty
prompt, whose prompt's place is `SLOT`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.anthropic.ids import ANTHROPIC_ID
from lexpilot_batch.providers.bodies.schema import PLACEHOLDER
from lexpilot_batch.providers.spec import LineShape

ID_KEY = "custom_id"  # the line's first field: its id
SLOT = '"content":""'  # the empty prompt in `empty`'s JSON
VERSION = "vertex-2023-10-16"  # the `anthropic_version` Claude's bodies carry on Vertex AI


def empty(model: str, url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The line with an empty id and an empty prompt; `fields` are the body's other fields."""
    request = {"anthropic_version": VERSION, "messages": [{"role": "user", "content": ""}], **fields}
    return {"custom_id": "", "request": request}


def sample_body(model: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A line's `request` as every line of a role sends it, with a placeholder message."""
    return {"anthropic_version": VERSION, "messages": [{"role": "user", "content": PLACEHOLDER}], **fields}


SHAPE = LineShape(ID_KEY, SLOT, empty, "request", frozenset({"custom_id", "request"}), id_pattern=ANTHROPIC_ID)
