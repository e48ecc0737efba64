"""A Gemini batch input line: `{"key", "request": {"contents": [{"role": "user", "parts": [{"text"}]}], ...fields}}`
(the model is named by the create call, not the line).

`providers.lines` frames every request line from `empty`: the line with an empty id and an empty
prompt, whose prompt's place is `SLOT`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.bodies.schema import PLACEHOLDER
from lexpilot_batch.providers.spec import LineShape

ID_KEY = "key"  # the line's first field: its id
SLOT = '"text":""'  # the empty prompt in `empty`'s JSON


def empty(model: str, url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The line with an empty id and an empty prompt; `fields` are the body's other fields."""
    request = {"contents": [{"role": "user", "parts": [{"text": ""}]}], **fields}
    return {"key": "", "request": request}


SHAPE = LineShape(ID_KEY, SLOT, empty, "request", frozenset({"key", "request", "metadata"}))


def sample_body(model: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A generateContent request with a placeholder message: no model (the batch's create call names it)."""
    return {"contents": [{"role": "user", "parts": [{"text": PLACEHOLDER}]}], **fields}
