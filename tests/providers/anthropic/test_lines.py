"""Anthropic's lines, pure: custom_ids mapped into its alphabet and back (`providers.anthropic.ids`),
its result lines read as the OpenAI ones `answers` judges (`providers.anthropic.results`), and a
Message Batch's body streamed from its file (`providers.anthropic.batch`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexpilot_batch.engine.answers import INVALID, PERMANENT, REFUSAL, TRANSPORT, UNEXECUTED
from lexpilot_batch.providers.anthropic.ids import ANTHROPIC_ID
from lexpilot_batch.providers.anthropic.results import result as anthropic_result
from lexpilot_batch.providers.ids import custom_id, id_tag, request_check
from lexpilot_batch.providers.lines import line_id, our_id
from tests.helpers.result_lines import ANSWER, CID, TAG
from tests.helpers.result_lines import judged as _judged


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


# --- custom_ids --------------------------------------------------------------------------------------


def _room(cid: str) -> int:
    """Characters the map of `cid` takes (letters, digits and - one, a dot two, others 3 per byte)."""
    return 8 + sum(
        1 if c.isascii() and (c.isalnum() or c == "-") else 2 if c == "." else 3 * len(c.encode()) for c in cid
    )


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=18))
def test_anthropic_ids_are_a_reversible_map_into_its_alphabet(cid):
    if _room(cid) > 64:
        with pytest.raises(ValueError, match="64"):
            line_id(cid, "anthropic", TAG)
        return
    mapped = line_id(cid, "anthropic", TAG)
    assert ANTHROPIC_ID.fullmatch(mapped) and mapped.startswith(TAG)
    assert our_id(mapped, "anthropic", TAG) == cid
    assert our_id(mapped, "anthropic", id_tag("another workspace")) is None  # another workspace's: not ours


def test_the_ids_the_compiler_makes_map_and_other_shapes_keep_theirs():
    check = request_check(TAG, b"the line after its id")
    # The longest kind: dots, digits, a five-digit case (100x the benchmark), an attempt, the check.
    cid = custom_id("0a1b2c3d", 43199, "ljp.int.a3", 12, check)
    mapped = line_id(cid, "anthropic", TAG)
    assert mapped == TAG + "0a1b2c3d-43199-ljp__int__a3-12-" + check and len(mapped) <= 64
    assert line_id(cid, "google") == line_id(cid, "openai") == cid
    with pytest.raises(ValueError, match="64"):
        line_id("x" * 57, "anthropic", TAG)
    assert our_id("not-from-here", "anthropic", TAG) is None and our_id(TAG + "a_zz", "anthropic", TAG) is None


# --- request lines ----------------------------------------------------------------------------------


# --- bodies -----------------------------------------------------------------------------------------


# --- result lines -----------------------------------------------------------------------------------


def _message(content: list[Any], stop: str = "end_turn", **usage: Any) -> dict[str, Any]:
    counted = {"input_tokens": 100, "output_tokens": 50, **usage}
    return {"type": "message", "role": "assistant", "content": content, "stop_reason": stop, "usage": counted}


def _claude(result: dict, cid: str = CID) -> dict:
    return anthropic_result({"custom_id": line_id(cid, "anthropic", TAG), "result": result}, TAG)


def test_an_anthropic_answer_is_its_text_never_its_thinking():
    thinking = {"type": "thinking", "thinking": '{"label": "judgment"} is what I first thought', "signature": "s"}
    usage: dict[str, Any] = {
        "cache_read_input_tokens": 40,
        "cache_creation_input_tokens": 10,
        "output_tokens_details": {"thinking_tokens": 30},
    }
    line = _claude({"type": "succeeded", "message": _message([thinking, {"type": "text", "text": ANSWER}], **usage)})
    assert line["custom_id"] == CID
    assert _judged(line)[:4] == (
        True,
        "clarification",
        None,
        (150, 50, 40, 30, 10, None),
    )  # the 10 written to the cache kept apart
    only_thinking = _claude({"type": "succeeded", "message": _message([thinking])})
    assert _judged(only_thinking)[:3] == (False, None, INVALID)  # empty: the thinking is not the answer


@pytest.mark.parametrize(
    ("result", "kind", "needle"),
    [
        (
            {"type": "succeeded", "message": _message([{"type": "text", "text": '{"la'}], "max_tokens")},
            INVALID,
            "length",
        ),
        ({"type": "succeeded", "message": _message([{"type": "text", "text": "抱歉"}], "refusal")}, REFUSAL, "抱歉"),
        (
            {"type": "succeeded", "message": _message([{"type": "text", "text": ANSWER}], "pause_turn")},
            INVALID,
            "length",
        ),
        (
            {
                "type": "errored",
                "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}},
            },
            PERMANENT,
            "HTTP 400",
        ),
        (
            {
                "type": "errored",
                "error": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            },
            TRANSPORT,
            "HTTP 529",
        ),
        (
            {"type": "errored", "error": {"type": "error", "error": {"type": "api_error", "message": "boom"}}},
            TRANSPORT,
            "HTTP 500",
        ),
        (
            {"type": "errored", "error": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}},
            UNEXECUTED,
            "HTTP 429",
        ),
        ({"type": "canceled"}, UNEXECUTED, "batch_cancelled"),
        ({"type": "expired"}, UNEXECUTED, "batch_expired"),
        ({"type": "strange"}, TRANSPORT, "unknown type"),
    ],
)
def test_every_anthropic_outcome_is_one_of_ours(result, kind, needle):
    ok, _value, got, _usage, error = _judged(_claude(result))
    assert (ok, got) == (False, kind) and needle in error


@pytest.mark.parametrize("ending", [b"\n", b""])
def test_a_message_batch_body_is_streamed_from_the_file_as_its_json_array(tmp_path, ending):
    from lexpilot_batch.providers.anthropic.batch import _body_length, _requests_body

    lines = [_dumps({"custom_id": f"c{i}", "params": {"x": "案" * (i % 900), "y": "\n"}}) for i in range(3000)]
    path = tmp_path / "f.jsonl"
    path.write_bytes(("\n".join(lines)).encode() + ending)  # several megabytes: read in chunks
    body = b"".join(_requests_body(path))
    assert json.loads(body) == {"requests": [json.loads(line) for line in lines]}
    assert _body_length(path) == len(body)  # sent as its Content-Length: not chunked
