"""The id of a request, and the id its line carries in each API's shape.

A custom_id names the request and vouches for it: `<run key>-<case>-<step>-<attempt>-<tag><hash>`,
e.g. `1a2b3c4d-17-lca.u.gen-1-9f8e7d6c0a1b2c3d`. The run key (`study.runs.run_key`) and the rest of
the stem make it unique in the workspace; the check (`request_check`) is the workspace's tag
(`id_tag`, 8 hex digits of its random id) and the request's hash (8 hex digits of the SHA-256 of its
line's fingerprint, `lines.line_fingerprint`: the digests of its frame (model, url, every field as
sent) and of each piece of its prompt, so that any change to a byte of the line changes it). A result line answers the request whose
custom_id it carries exactly, so an answer from another workspace (same run ids, other cases), from
an earlier compile of the same step or for another prompt is never applied (`engine.ingest`).
Requests compiled before ids carried a check keep their ids (`id_parts` is None for them).

A line carries the custom_id itself, but in Anthropic's shape, whose ids must match
`^[a-zA-Z0-9_-]{1,64}$`: there it is mapped (`providers.anthropic.ids`, `lines.line_id`).
"""

from __future__ import annotations

import hashlib
import re
from typing import NamedTuple

TAG_LENGTH = 8  # hex digits of the workspace's tag (`id_tag`)


def custom_id(run_key: str, case_idx: int, step: str, attempt: int, check: str) -> str:
    """Short, ASCII, unique in the workspace: run, case, step (task and variant inside), attempt, and
    the check that ties it to its workspace and its request (`request_check`)."""
    return f"{run_key}-{case_idx}-{step}-{attempt}-{check}"


def request_check(tag: str, body: bytes) -> str:
    """The end of a request's custom_id: the workspace's tag, then 8 hex digits of the SHA-256 of
    `body`: what stands for the request's line after its id (the compiler gives its fingerprint,
    `lines.line_fingerprint`)."""
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


def id_tag(workspace_id: str) -> str:
    """The workspace's tag in the ids of its Anthropic requests."""
    return hashlib.sha256(workspace_id.encode("utf-8")).hexdigest()[:TAG_LENGTH]


def unescape(text: str, kept: frozenset[str], hexdigits: frozenset[str], escape: str, dot: str = "") -> str | None:
    """The text a provider-safe id stands for, reversing the mapping of the APIs whose ids take few
    characters (Anthropic's, Bedrock's record ids, Vertex's labels): a `kept` character as itself,
    `escape` and two of `hexdigits` as that byte, `dot` (where given) as "."; None for anything else
    or bytes that are no UTF-8: no id of ours."""
    raw = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in kept:
            raw += ch.encode("ascii")
            i += 1
        elif dot and text.startswith(dot, i):
            raw += b"."
            i += len(dot)
        elif ch == escape and len(text) >= i + 3 and set(text[i + 1 : i + 3]) <= hexdigits:
            raw.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
