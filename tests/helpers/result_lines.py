"""A result line as the judge reads it, for the tests of each API's result lines: a custom_id of a
workspace (`TAG`), an answer the LCA label parser takes, and `judge_line`'s verdict on a line."""

from __future__ import annotations

from lexpilot_batch.engine.answers import judge_line
from lexpilot_batch.providers.ids import custom_id, id_tag, request_check

TAG = id_tag("workspace-1")


CID = custom_id("0a1b2c3d", 4, "lca.u.cls", 1, request_check(TAG, b"{}"))


ANSWER = '{"label": "clarification"}'


def judged(line: dict) -> tuple:
    """(ok, value, kind, usage, error) of `line` read as an LCA label."""
    ok, text, value, error, kind, usage = judge_line(line, "lca_label", 0)
    return ok, value, kind, usage, error
