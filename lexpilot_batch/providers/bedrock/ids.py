"""Bedrock's record ids: the batch input guide writes a `recordId` as an "alphanumeric string"
(https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference-data.html, taken 2026-12-06;
older versions of the page said "11 character alphanumeric string", its example is `CALL0000001`),
and our request ids hold `-` and `.`.

The map is reversible and alphanumeric: letters and digits stay but `X`, and every other character
(`X` itself too) becomes `X` and two upper-case hex digits per UTF-8 byte (`-` is `X2D`). It starts
with the workspace's tag (8 hex digits), as an Anthropic id does (`anthropic.ids`): a result line is
told ours by its id.
"""

from __future__ import annotations

import re

from lexpilot_batch.providers.ids import TAG_LENGTH, unescape

RECORD_ID = re.compile(r"[A-Za-z0-9]+")
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWYZabcdefghijklmnopqrstuvwxyz0123456789")  # no X
_HEX = frozenset("0123456789ABCDEF")


def line_id(cid: str, tag: str) -> str:
    """`cid` as a Bedrock record id, after the workspace's `tag` (`ValueError` if it cannot be held)."""
    if len(tag) != TAG_LENGTH or not RECORD_ID.fullmatch(tag):
        raise ValueError(f"custom_id {cid!r}: the workspace tag {tag!r} is no {TAG_LENGTH}-character alphanumeric tag")
    out = [tag]
    for ch in cid:
        out.append(ch if ch in _KEPT else "".join(f"X{b:02X}" for b in ch.encode("utf-8")))
    return "".join(out)


def our_id(mapped: str, tag: str | None = None) -> str | None:
    """The custom_id a record id stands for (`line_id` reversed); None when it is no id of ours: not
    mapped by `line_id`, or (with `tag`) by another workspace's."""
    if len(mapped) < TAG_LENGTH or (tag is not None and mapped[:TAG_LENGTH] != tag):
        return None
    return unescape(mapped[TAG_LENGTH:], _KEPT, _HEX, "X")
