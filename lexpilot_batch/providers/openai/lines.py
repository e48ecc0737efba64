"""An OpenAI batch input line: `{"custom_id", "method": "POST", "url", "body": {"model", "messages", ...fields}}`.

`providers.lines` frames every request line from `empty`: the line with an empty id and an empty
prompt, whose prompt's place is `SLOT`. `CHAT_URLS` are the urls a line may name: OpenAI's, Azure's
v1 API's (Azure OpenAI "Global Batch" how-to: `"url": "/chat/completions"`; the dated API versions'
`/v1/chat/completions`), Zhipu BigModel's `/v4/...` and Baidu Qianfan's `/v2/...` (their batch
documentation).
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers.spec import LineShape

ID_KEY = "custom_id"  # the line's first field: its id
SLOT = '"content":""'  # the empty prompt in `empty`'s JSON


def empty(model: str, url: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The line with an empty id and an empty prompt; `fields` are the body's other fields."""
    body = {"model": model, "messages": [{"role": "user", "content": ""}], **fields}
    return {"custom_id": "", "method": "POST", "url": url, "body": body}


CHAT_URLS = frozenset({"/v1/chat/completions", "/chat/completions", "/v4/chat/completions", "/v2/chat/completions"})
SHAPE = LineShape(
    ID_KEY, SLOT, empty, "body", frozenset({"custom_id", "method", "url", "body"}), method_url=True, urls=CHAT_URLS
)
