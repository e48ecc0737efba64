"""Anthropic's request ids: Message Batches take `^[a-zA-Z0-9_-]{1,64}$`, and ours hold dots.

The map is reversible: letters, digits and `-` stay, `.` becomes `__`, any other character `_` and
two hex digits per UTF-8 byte (`_` itself is `_5f`). It starts with the workspace's tag (8 hex
digits): Message Batches carry no metadata, so a batch's results are told ours by their ids
(`engine.recovery`: adopting a batch without a tag).
"""

from __future__ import annotations

import re

from lexpilot_batch.providers.ids import TAG_LENGTH, unescape

ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_HEX = frozenset("0123456789abcdef")


def line_id(cid: str, tag: str) -> str:
    """`cid` as a Message Batches request's id, after the workspace's `tag` (`ValueError` if it cannot be held)."""
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


def our_id(mapped: str, tag: str | None = None) -> str | None:
    """The custom_id a Message Batches id stands for (`line_id` reversed); None when it is no id of
    ours: not mapped by `line_id`, or (with `tag`) by another workspace's."""
    if len(mapped) < TAG_LENGTH or (tag is not None and mapped[:TAG_LENGTH] != tag):
        return None
    return unescape(mapped[TAG_LENGTH:], _KEPT, _HEX, "_", dot="__")
