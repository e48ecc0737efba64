"""Our request ids as Vertex AI carries them: in the request's `labels`.

A Vertex batch's output line echoes its request and adds `response` and `status`; it carries no
id of its own (the Gemini batch input of Vertex is `{"request": GenerateContentRequest}`, and
LiteLLM's and Bifrost's Vertex batch clients found the same: BerriAI/litellm#14044,
maximhq/bifrost#4152). The request's `labels` (GenerateContentRequest's "user specified labels",
google-genai `GenerateContentConfig.labels`) are echoed with it, so the id rides there. Label
values hold at most 63 lowercase letters, digits, `_` and `-`, and our ids hold dots: the map is
reversible, as Anthropic's is: lowercase letters, digits and `-` stay, `.` becomes `__`, any other
character `_` and two hex digits per UTF-8 byte (`_` itself is `_5f`).
"""

from __future__ import annotations

import re

from lexpilot_batch.providers.ids import id_parts, unescape

LABEL = "lexpilot_id"  # the label holding a request's id
LABEL_VALUE = re.compile(r"[a-z0-9_-]{1,63}")
_KEPT = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_HEX = frozenset("0123456789abcdef")


def line_id(cid: str, tag: str = "") -> str:
    """`cid` as a label value (`ValueError` if it cannot be held in 63 characters)."""
    out = []
    for ch in cid:
        if ch in _KEPT:
            out.append(ch)
        elif ch == ".":
            out.append("__")
        else:
            out.extend(f"_{b:02x}" for b in ch.encode("utf-8"))
    mapped = "".join(out)
    if not LABEL_VALUE.fullmatch(mapped):
        raise ValueError(f"custom_id {cid!r} cannot be mapped into a Vertex AI label's 63 characters")
    return mapped


def our_id(mapped: str, tag: str | None = None) -> str | None:
    """The custom_id a label value stands for (`line_id` reversed); None when it is no id of ours,
    or (with `tag`) another workspace's."""
    cid = unescape(mapped, _KEPT, _HEX, "_", dot="__")
    if cid is None:
        return None
    if tag is not None:
        parts = id_parts(cid)
        if parts is not None and parts.tag != tag:
            return None
    return cid
