"""Request lines: the custom_id of a request and its batch input line, byte for byte, in the
line format of each API shape (`registry.Provider.api`).

A line is exactly `json.dumps` of the request (compact, UTF-8, newline-ended), built from cached
pieces: compiling writes every request of every wave, and most of a case's prompts are the same
messages. The shapes:

| api | a line | its id |
| --- | --- | --- |
| `openai` | `{"custom_id", "method": "POST", "url", "body": {"model", "messages", ...fields}}` | the custom_id |
| `anthropic` | `{"custom_id", "params": {"model", "messages", ...fields}}`: one Message Batches request | the custom_id mapped into `^[a-zA-Z0-9_-]{1,64}$` with the workspace's tag (`line_id`) |
| `google` | `{"key", "request": {"contents": [{"role": "user", "parts": [{"text"}]}], ...fields}}`: Gemini's batch input line (the model is named by the create call) | the custom_id |

A custom_id names the request and vouches for it: `<run key>-<case>-<step>-<attempt>-<tag><hash>`,
e.g. `1a2b3c4d-17-lca.u.gen-1-9f8e7d6c0a1b2c3d`. The run key (`runs.run_key`) and the rest of the
stem make it unique in the workspace; the check (`request_check`) is the workspace's tag (`id_tag`,
8 hex digits of its random id) and the request's hash (8 hex digits of the SHA-256 of its line after
the id: model, prompt and every field as sent). A result line answers the request whose custom_id
it carries exactly, so an answer from another workspace (same run ids, other cases), from an earlier
compile of the same step or for another prompt is never applied (`ingest`). Requests compiled before
ids carried a check keep their ids (`id_parts` is None for them).
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from typing import NamedTuple

from lexpilot_batch.prompts import Prompt

OPENAI, ANTHROPIC, GOOGLE = "openai", "anthropic", "google"


def custom_id(run_key: str, case_idx: int, step: str, attempt: int, check: str) -> str:
    """Short, ASCII, unique in the workspace: run, case, step (task and variant inside), attempt, and
    the check that ties it to its workspace and its request (`request_check`)."""
    return f"{run_key}-{case_idx}-{step}-{attempt}-{check}"


def request_check(tag: str, body: bytes) -> str:
    """The end of a request's custom_id: the workspace's tag, then 8 hex digits of the SHA-256 of
    `body`, the request's line after its id (`line_body`)."""
    return tag + hashlib.sha256(body).hexdigest()[:8]


class IdParts(NamedTuple):
    stem: str  # run key, case, step, attempt
    tag: str  # the workspace's (`id_tag`)
    digest: str  # of the request's line (`request_check`)


_CHECKED = re.compile(r"(.+)-([0-9a-f]{8})([0-9a-f]{8})")


def id_parts(cid: str) -> IdParts | None:
    """What a custom_id of ours says; None for an id without a check (compiled before ids carried
    one, or not ours at all)."""
    match = _CHECKED.fullmatch(cid)
    return IdParts(*match.groups()) if match else None


def id_stem(cid: str) -> str:
    """The custom_id without its check: the same for a request in every workspace and every compile."""
    parts = id_parts(cid)
    return cid if parts is None else parts.stem


# --- the id a line carries ------------------------------------------------------------------------
#
# Anthropic's custom_ids must match `^[a-zA-Z0-9_-]{1,64}$`; ours hold dots (`lca.u.gen`). The map is
# reversible: letters, digits and `-` stay, `.` becomes `__`, any other character `_` and two hex
# digits per UTF-8 byte (`_` itself is `_5f`). It starts with the workspace's tag (8 hex digits):
# Message Batches carry no metadata, so a batch's results are told ours by their ids
# (`batches`: adopting a batch without a tag).

TAG_LENGTH = 8
ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_HEX = frozenset("0123456789abcdef")


def id_tag(workspace_id: str) -> str:
    """The workspace's tag in the ids of its Anthropic requests."""
    return hashlib.sha256(workspace_id.encode("utf-8")).hexdigest()[:TAG_LENGTH]


def line_id(cid: str, api: str, tag: str = "") -> str:
    """The id a request's line carries in `api`'s shape (`ValueError` if Anthropic's cannot hold it)."""
    if api != ANTHROPIC:
        return cid
    out = [tag]
    for ch in cid:
        if ch in _KEPT:
            out.append(ch)
        elif ch == ".":
            out.append("__")
        else:
            out.extend(f"_{b:02x}" for b in ch.encode("utf-8"))
    mapped = "".join(out)
    if len(tag) != TAG_LENGTH or not ANTHROPIC_ID.fullmatch(mapped):
        raise ValueError(f"custom_id {cid!r} cannot be mapped into Anthropic's 64 characters")
    return mapped


def our_id(mapped: str, api: str, tag: str | None = None) -> str | None:
    """The custom_id a line id stands for (`line_id` reversed); None when it is no id of ours: not
    mapped by `line_id`, or (with `tag`) by another workspace's."""
    if api != ANTHROPIC:
        return mapped
    if len(mapped) < TAG_LENGTH or (tag is not None and mapped[:TAG_LENGTH] != tag):
        return None
    raw = bytearray()
    text = mapped[TAG_LENGTH:]
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in _KEPT:
            raw += ch.encode("ascii")
            i += 1
        elif ch == "_" and text[i + 1 : i + 2] == "_":
            raw += b"."
            i += 2
        elif ch == "_" and len(text) >= i + 3 and set(text[i + 1 : i + 3]) <= _HEX:
            raw.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


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


def _id_start(api: str) -> str:
    """A line of `api`'s shape up to its id: the id is its first field."""
    return '{"key":' if api == GOOGLE else '{"custom_id":'


def _shape(api: str, model: str, url: str, fields: dict) -> tuple[dict, str]:
    """A line of `api`'s shape with an empty id and an empty prompt; the prompt's slot."""
    if api == ANTHROPIC:
        params = {"model": model, "messages": [{"role": "user", "content": ""}], **fields}
        return {"custom_id": "", "params": params}, '"content":""'
    if api == GOOGLE:
        request = {"contents": [{"role": "user", "parts": [{"text": ""}]}], **fields}
        return {"key": "", "request": request}, '"text":""'
    body = {"model": model, "messages": [{"role": "user", "content": ""}], **fields}
    return {"custom_id": "", "method": "POST", "url": url, "body": body}, '"content":""'


@lru_cache(maxsize=256)
def _line_frame(model: str, url: str, fields: str, api: str = OPENAI) -> tuple[bytes, bytes]:
    """A request line's bytes after its id up to its prompt, and after its prompt.

    `fields` is the JSON object of the body's fields besides `model` and `messages`
    (`dialects.RoleRequest.fields`), in the order they are sent.
    """
    line, slot = _shape(api, model, url, json.loads(fields))
    start = _id_start(api) + '""'
    # Every quote inside a JSON string is escaped, and only the body's other fields (after the
    # prompt) can hold a `"content":""` (`"text":""`) of their own: the first unescaped one is the slot.
    head, _, tail = json.dumps(line, ensure_ascii=False, separators=(",", ":")).partition(slot)
    middle = head[len(start) :] + slot[:-1]
    return middle.encode("utf-8"), f'"{tail}\n'.encode()


def line_body(model: str, prompt: str, fields: str, url: str, pieces: Pieces | None = None, api: str = OPENAI) -> bytes:
    """A batch input line of `api`'s shape after its id: everything the request sends.

    `fields` is the JSON object text of the body's other fields. The prompt is encoded piece by
    piece through `pieces`, which a caller keeps across the prompts of a case: most of their text
    is the same messages.
    """
    middle, end = _line_frame(model, url, fields, api)
    pieces = Pieces() if pieces is None else pieces
    parts = prompt.parts if isinstance(prompt, Prompt) else (prompt,)
    return b"".join((middle, *[pieces[part] for part in parts], end))


def line_head(cid: str, api: str = OPENAI, tag: str = "") -> bytes:
    """A batch input line of `api`'s shape up to the end of its id, `line_id(cid, api, tag)`."""
    return (_id_start(api) + _JSON.encode(line_id(cid, api, tag))).encode("utf-8")


def request_line(
    cid: str,
    model: str,
    prompt: str,
    fields: str,
    url: str,
    pieces: Pieces | None = None,
    api: str = OPENAI,
    tag: str = "",
) -> bytes:
    """One batch input line of `api`'s shape, byte for byte `json.dumps` of it (compact, UTF-8,
    newline-ended), carrying `line_id(cid, api, tag)` (`line_head`, then `line_body`)."""
    return line_head(cid, api, tag) + line_body(model, prompt, fields, url, pieces, api)
