"""Request lines: a request's batch input line, byte for byte, in the line format of each API
shape (`spec.ApiSpec.lines`, declared in each API's folder), carrying its id (`providers.ids`).

A line is exactly `json.dumps` of the request (compact, UTF-8, newline-ended), built from cached
pieces: compiling writes every request of every wave, and most of a case's prompts are the same
messages. The shapes:

| api | a line | its id |
| --- | --- | --- |
| `openai` | `{"custom_id", "method": "POST", "url", "body": {"model", "messages", ...fields}}` | the custom_id |
| `anthropic` | `{"custom_id", "params": {"model", "messages", ...fields}}`: one Message Batches request | the custom_id mapped into `^[a-zA-Z0-9_-]{1,64}$` with the workspace's tag (`ids.line_id`) |
| `mistral` | `{"custom_id", "body": {"model", "messages", ...fields}}`: a Mistral batch request (the job names endpoint and model) | the custom_id |
| `together` | `{"custom_id", "body": {"model", "messages", ...fields}}`: a Together batch request (the job names the endpoint) | the custom_id |
| `google` | `{"key", "request": {"contents": [{"role": "user", "parts": [{"text"}]}], ...fields}}`: Gemini's batch input line (the model is named by the create call) | the custom_id |
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import lru_cache

from lexpilot_batch.benchmark.prompts import Prompt
from lexpilot_batch.providers import cache_layout as prefixes
from lexpilot_batch.providers.registry import APIS, BARE, api_spec

BARE_API = BARE.name  # the shape of a bare name's lines (OpenAI's), the default of every function below


def line_id(cid: str, api: str, tag: str = "") -> str:
    """The id a request's line carries in `api`'s shape (`ValueError` if the shape cannot hold it)."""
    return api_spec(api).line_id(cid, tag)


def our_id(mapped: str, api: str, tag: str | None = None) -> str | None:
    """The custom_id a line id stands for (`line_id` reversed); None when it is no id of ours: not
    mapped by `line_id`, or (with `tag`) by another workspace's."""
    return api_spec(api).our_id(mapped, tag)


def any_our_id(mapped: str) -> str | None:
    """The custom_id a line id of any API's shape stands for, whichever workspace mapped it: an id
    mapped by another workspace stays mapped in a result line (`engine.ingest`)."""
    for api in APIS.values():
        found = api.our_id(mapped, None)
        if found is not None and found != mapped:
            return found
    return None


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class Pieces(dict[str, bytes]):
    """Prompt pieces (`prompts.Prompt.parts`) JSON-escaped and UTF-8 encoded, each once, with the
    SHA-256 of each encoding (`digests`, for `line_fingerprint`).

    Emptied when it holds `limit` bytes: the compiler goes case by case, so what it needs again is
    the current case's messages and the templates' literal text.
    """

    def __init__(self, limit: int = 8 << 20) -> None:
        super().__init__()
        self.limit, self.size = limit, 0
        self.digests: dict[str, bytes] = {}

    def __missing__(self, piece: str) -> bytes:
        encoded = _JSON.encode(piece)[1:-1].encode("utf-8")
        if self.size + len(encoded) > self.limit:
            self.clear()
            self.digests.clear()
            self.size = 0
        self[piece] = encoded
        self.digests[piece] = hashlib.sha256(encoded).digest()
        self.size += len(encoded)
        return encoded


def _id_start(api: str) -> str:
    """A line of `api`'s shape up to its id: the id is its first field."""
    return "{" + _JSON.encode(api_spec(api).lines.id_key) + ":"


def _shape(api: str, model: str, url: str, fields: dict) -> tuple[dict, str]:
    """A line of `api`'s shape with an empty id and an empty prompt; the prompt's slot."""
    shape = api_spec(api).lines
    return shape.empty(model, url, fields), shape.slot


@lru_cache(maxsize=256)
def _line_frame(model: str, url: str, fields: str, api: str = BARE_API) -> tuple[bytes, bytes]:
    """A request line's bytes after its id up to its prompt, and after its prompt.

    `fields` is the JSON object of the body's fields besides `model` and `messages`
    (`bodies.request.RoleRequest.fields`), in the order they are sent.
    """
    line, slot = _shape(api, model, url, json.loads(fields))
    start = _id_start(api) + '""'
    # Every quote inside a JSON string is escaped, and only the body's other fields (after the
    # prompt) can hold a `"content":""` (`"text":""`) of their own: the first unescaped one is the slot.
    head, _, tail = json.dumps(line, ensure_ascii=False, separators=(",", ":")).partition(slot)
    middle = head[len(start) :] + slot[:-1]
    return middle.encode("utf-8"), f'"{tail}\n'.encode()


@lru_cache(maxsize=256)
def _keyed_frame(model: str, url: str, fields: str, api: str) -> tuple[bytes, bytes, bytes]:
    """`_line_frame` of a body that also sends `prompt_cache_key`: (middle, end up to the key's
    value, end after it), so that a line's key costs no frame of its own."""
    keyed = json.dumps({**json.loads(fields), "prompt_cache_key": _HOLE}, ensure_ascii=False, separators=(",", ":"))
    middle, end = _line_frame(model, url, keyed, api)
    before, _, after = end.partition(_HOLE_JSON)
    return middle, before, after


_HOLE = "\x00"
_HOLE_JSON = json.dumps(_HOLE).encode()[1:-1]


def line_body(
    model: str,
    prompt: str,
    fields: str,
    url: str,
    pieces: Pieces | None = None,
    api: str = BARE_API,
    cache: str | None = None,
    case: str = "",
) -> bytes:
    """A batch input line of `api`'s shape after its id: everything the request sends.

    `fields` is the JSON object text of the body's other fields. The prompt is encoded piece by
    piece through `pieces`, which a caller keeps across the prompts of a case: most of their text
    is the same messages. `cache` is the run's cache layout for the role (`bodies.request.cache_layout`), `case`
    the case it is for (a `prompt_cache_key` is per case and template).
    """
    return line_fingerprint(model, prompt, fields, url, pieces, api, cache, case)[0]


def line_fingerprint(
    model: str,
    prompt: str,
    fields: str,
    url: str,
    pieces: Pieces | None = None,
    api: str = BARE_API,
    cache: str | None = None,
    case: str = "",
) -> tuple[bytes, bytes]:
    """`line_body`, and what its check is taken of (`ids.request_check`): the SHA-256 of each
    segment the body is joined from, in order (the frame's parts, a cache key or marker, each piece
    of the prompt).

    The digests fix every segment's bytes, so any change to a byte of the body changes the
    fingerprint, as a hash of the body itself would; but each prompt piece is hashed once where it
    first appears (`Pieces.digests`), so a case's history, repeated in each of its prompts and
    waves, is hashed once rather than in every request, and the fingerprint (32 bytes a segment) is
    short enough to hash holding the GIL while the file-writing thread runs.
    """
    pieces = Pieces() if pieces is None else pieces
    parts = prompt.parts if isinstance(prompt, Prompt) else (prompt,)
    out: list[bytes] = []
    fingerprint: list[bytes] = []
    digests = pieces.digests

    def raw(*segments: bytes) -> None:
        for segment in segments:
            out.append(segment)
            fingerprint.append(_digest(segment))

    def text(of: Iterable[str]) -> None:
        for part in of:
            out.append(pieces[part])  # (a miss puts the piece and its digest in)
            fingerprint.append(digests[part])

    floor = prefixes.breakpoint_floor(cache)
    shared = prompt.shared if isinstance(prompt, Prompt) else 0
    if cache == prefixes.KEY:
        middle, before, after = _keyed_frame(model, url, fields, api)
        key = prefixes.cache_key(case, prompt.head if isinstance(prompt, Prompt) else "").encode()
        raw(middle)
        text(parts)
        raw(before, key, after)
    elif floor is not None and shared and sum(len(p) for p in parts[:shared]) >= floor:
        middle, between, end = prefixes.split_content(*_line_frame(model, url, fields, api))
        breaks = prompt.breaks if isinstance(prompt, Prompt) else ()
        raw(middle)
        for i, part in enumerate(parts[:shared]):
            if i in breaks:
                raw(prefixes.NEXT_BLOCK)
            text((part,))
        rest = [part for part in parts[shared:] if part]
        if not rest:  # an empty text block is refused: the shared part is the whole prompt
            raw(prefixes.whole_marked(end))
        else:
            raw(between)
            text(rest)
            raw(end)
    else:
        middle, end = _line_frame(model, url, fields, api)
        raw(middle)
        text(parts)
        raw(end)
    return b"".join(out), b"".join(fingerprint)


_DIGESTS: dict[bytes, bytes] = {}  # of a line's frames and markers: a few hundred distinct ones


def _digest(segment: bytes) -> bytes:
    found = _DIGESTS.get(segment)
    if found is None:
        if len(_DIGESTS) > 4096:  # (a key is per case and template: dropped now and then)
            _DIGESTS.clear()
        found = _DIGESTS[segment] = hashlib.sha256(segment).digest()
    return found


def line_head(cid: str, api: str = BARE_API, tag: str = "") -> bytes:
    """A batch input line of `api`'s shape up to the end of its id, `line_id(cid, api, tag)`."""
    return (_id_start(api) + _JSON.encode(line_id(cid, api, tag))).encode("utf-8")


def request_line(
    cid: str,
    model: str,
    prompt: str,
    fields: str,
    url: str,
    pieces: Pieces | None = None,
    api: str = BARE_API,
    tag: str = "",
    cache: str | None = None,
    case: str = "",
) -> bytes:
    """One batch input line of `api`'s shape, byte for byte `json.dumps` of it (compact, UTF-8,
    newline-ended), carrying `line_id(cid, api, tag)` (`line_head`, then `line_body`)."""
    return line_head(cid, api, tag) + line_body(model, prompt, fields, url, pieces, api, cache, case)
