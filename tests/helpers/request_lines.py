"""A provider's request line as `prepare` compiles it (the evaluated model's body, one custom_id of a
workspace), for the tests of each provider's lines; and the keys an SDK's request type declares."""

from __future__ import annotations

import json
from typing import Any

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.providers.bodies.request import role_request
from lexpilot_batch.providers.ids import custom_id, id_tag, request_check
from lexpilot_batch.providers.lines import request_line
from lexpilot_batch.providers.prefixes import parse_model

TAG = id_tag("workspace-1")


PROMPT = "请根据以下案情作答：原告诉称……"


def provider_line(model: str, api: str, url: str = "/v1/chat/completions") -> dict[str, Any]:
    """The evaluated model's line for `model` in `api`'s shape, parsed (checked to be one line)."""
    request = role_request("eval", parse_model(model), Settings())
    cid = custom_id("0a1b2c3d", 4, "dcg.t1", 1, request_check(TAG, request.fields.encode("utf-8")))
    raw = request_line(cid, request.model, PROMPT, request.fields, url, api=api, tag=TAG)
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    return json.loads(raw)


def sdk_keys(tp: Any) -> set[str]:
    """The keys an SDK's request type (a TypedDict) declares."""
    import typing

    return set(typing.get_type_hints(tp))
