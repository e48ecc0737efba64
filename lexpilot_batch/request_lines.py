"""Request lines: the custom_id of a request and its batch input line, byte for byte.

A line is exactly `json.dumps` of the request (compact, UTF-8, newline-ended), built from cached
pieces: compiling writes every request of every wave, and most of a case's prompts are the same
messages.
"""

from __future__ import annotations

import json
from functools import lru_cache

from lexpilot_batch.prompts import Prompt


def custom_id(run_key: str, case_idx: int, step: str, attempt: int) -> str:
    """Short, ASCII, unique in the workspace: run, case, step (task and variant inside) and attempt."""
    return f"{run_key}-{case_idx}-{step}-{attempt}"


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class Pieces(dict[str, bytes]):
    """Prompt pieces (`prompts.Prompt.parts`) JSON-escaped and UTF-8 encoded, each once.

    Emptied when it holds `limit` bytes: the compiler goes case by case, so what it needs again is
    the current case's messages and the templates' literal text.
    """

    def __init__(self, limit: int = 8 << 20) -> None:
        super().__init__()
        self.limit, self.size = limit, 0

    def __missing__(self, piece: str) -> bytes:
        encoded = _JSON.encode(piece)[1:-1].encode("utf-8")
        if self.size + len(encoded) > self.limit:
            self.clear()
            self.size = 0
        self[piece] = encoded
        self.size += len(encoded)
        return encoded


_START, _CONTENT = '{"custom_id":""', '"content":""'


@lru_cache(maxsize=256)
def _line_frame(model: str, url: str, fields: str) -> tuple[bytes, bytes]:
    """A request line's bytes after its custom_id up to its prompt, and after its prompt.

    `fields` is the JSON object of the body's fields besides `model` and `messages`
    (`dialects.RoleRequest.fields`), in the order they are sent.
    """
    body = {"model": model, "messages": [{"role": "user", "content": ""}], **json.loads(fields)}
    line = {"custom_id": "", "method": "POST", "url": url, "body": body}
    # Every quote inside a JSON string is escaped, and only the body's other fields (after the
    # messages) can hold a `"content":""` of their own: the first unescaped one is the slot.
    head, _, tail = json.dumps(line, ensure_ascii=False, separators=(",", ":")).partition(_CONTENT)
    return (head[len(_START) :] + '"content":"').encode("utf-8"), f'"{tail}\n'.encode()


def request_line(cid: str, model: str, prompt: str, fields: str, url: str, pieces: Pieces | None = None) -> bytes:
    """One batch input line, byte for byte `json.dumps` of it (compact, UTF-8, newline-ended).

    `fields` is the JSON object text of the body's other fields. The prompt is encoded piece by
    piece through `pieces`, which a caller keeps across the prompts of a case: most of their text
    is the same messages.
    """
    middle, end = _line_frame(model, url, fields)
    pieces = Pieces() if pieces is None else pieces
    parts = prompt.parts if isinstance(prompt, Prompt) else (prompt,)
    start = '{"custom_id":' + _JSON.encode(cid)
    return b"".join((start.encode("utf-8"), middle, *[pieces[part] for part in parts], end))
