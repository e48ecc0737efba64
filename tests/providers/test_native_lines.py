"""The native batch APIs' lines, pure: custom_ids mapped into Anthropic's alphabet and back, request
lines in each API's shape, result lines read as the OpenAI ones `answers` judges, and the bodies
each dialect sends."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexpilot_batch.benchmark.prompts import Prompt
from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine.answers import INVALID, PERMANENT, REFUSAL, TRANSPORT, UNEXECUTED, judge_line
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.anthropic.ids import ANTHROPIC_ID
from lexpilot_batch.providers.anthropic.results import result as anthropic_result
from lexpilot_batch.providers.bodies.contract import check_role_body
from lexpilot_batch.providers.bodies.request import role_request
from lexpilot_batch.providers.google.results import result as google_result
from lexpilot_batch.providers.ids import custom_id, id_tag, request_check
from lexpilot_batch.providers.lines import line_id, our_id, request_line
from lexpilot_batch.providers.prefixes import parse_model

TAG = id_tag("workspace-1")


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

_texts = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20)


@settings(max_examples=150, deadline=None)
@given(
    cid=_texts.filter(lambda c: len(c.encode()) < 15),
    model=_texts,
    parts=st.lists(_texts, max_size=5),
    t=st.floats(0, 1),
)
def test_native_lines_are_json_dumps_of_the_native_request(cid, model, parts, t):
    prompt = Prompt(parts)
    anthropic = {"max_tokens": 8192, "temperature": t, "thinking": {"type": "enabled", "content": ""}}
    line = request_line(cid, model, prompt, _dumps(anthropic), "/v1/messages/batches", None, "anthropic", TAG)
    params = {"model": model, "messages": [{"role": "user", "content": str(prompt)}], **anthropic}
    assert line == (_dumps({"custom_id": line_id(cid, "anthropic", TAG), "params": params}) + "\n").encode()
    google = {"generationConfig": {"temperature": t, "maxOutputTokens": 8192}, "x": {"text": ""}}
    line = request_line(cid, model, prompt, _dumps(google), ":batchGenerateContent", None, "google")
    request = {"contents": [{"role": "user", "parts": [{"text": str(prompt)}]}], **google}
    assert line == (_dumps({"key": cid, "request": request}) + "\n").encode()


# --- bodies -----------------------------------------------------------------------------------------


def test_each_dialect_carries_the_settings_where_its_api_reads_them():
    claude = role_request("eval", parse_model("anthropic/claude-sonnet-4-5"), Settings())
    # No temperature for Claude: the installed SDK's types have none (issue 25, item 7).
    assert claude.body == {"max_tokens": 8192} and claude.model == "claude-sonnet-4-5"
    assert claude.not_applied == ("temperature",)
    gemini = role_request("judge", parse_model("google/gemini-2.5-flash"), Settings())
    assert gemini.body == {"generationConfig": {"temperature": 0.1, "maxOutputTokens": 8192}}
    assert gemini.not_applied == ()
    # A generationConfig argument is merged field by field; null removes one.
    args = {"generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}, "temperature": None}}
    thinking = role_request("eval", parse_model("google/gemini-2.5-flash"), Settings(), args=args)
    assert thinking.body == {"generationConfig": {"maxOutputTokens": 8192, "thinkingConfig": {"thinkingBudget": 1024}}}
    assert thinking.not_applied == ("temperature",)
    # Extended thinking: only without a temperature (the contract refuses one, `test_contracts`).
    budget = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    ok = role_request("eval", parse_model("anthropic/claude-sonnet-4-5"), Settings(), args=budget)
    assert ok.body == {"max_tokens": 8192, "thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert ok.not_applied == ("temperature",)
    hot = role_request(
        "eval", parse_model("anthropic/claude-sonnet-4-5"), Settings(), args={**budget, "temperature": 0.7}
    )
    with pytest.raises(ConfigError, match="temperature=null"):
        check_role_body("eval", parse_model("anthropic/claude-sonnet-4-5"), hot.body)
    bare = role_request("eval", parse_model("anthropic/claude-x"), Settings(), args={"max_tokens": None})
    with pytest.raises(ConfigError, match="max_tokens"):
        check_role_body("eval", parse_model("anthropic/claude-x"), bare.body)


# --- result lines -----------------------------------------------------------------------------------

CID = custom_id("0a1b2c3d", 4, "lca.u.cls", 1, request_check(TAG, b"{}"))
ANSWER = '{"label": "clarification"}'


def _judged(line: dict) -> tuple:
    ok, text, value, error, kind, usage = judge_line(line, "lca_label", 0)
    return ok, value, kind, usage, error


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
        (150, 50, 40, 30, 10),
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


def _gemini(response: dict | None = None, **extra) -> dict:
    line = {"key": CID, **extra}
    if response is not None:
        line["response"] = response
    return google_result(line)


def _candidate(parts: list, reason: str = "STOP") -> dict:
    meta = {
        "promptTokenCount": 120,
        "candidatesTokenCount": 20,
        "thoughtsTokenCount": 70,
        "cachedContentTokenCount": 64,
    }
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": reason}],
        "usageMetadata": meta,
    }


def test_a_gemini_answer_is_its_parts_never_its_thoughts():
    line = _gemini(_candidate([{"text": '{"label": "judgment"}', "thought": True}, {"text": ANSWER}]))
    assert line["custom_id"] == CID
    assert _judged(line)[:4] == (True, "clarification", None, (120, 90, 64, 70, 0))
    assert _judged(_gemini(_candidate([{"text": ANSWER, "thought": True}])))[:3] == (False, None, INVALID)


@pytest.mark.parametrize(
    ("line", "kind", "needle"),
    [
        (_gemini(_candidate([{"text": '{"la'}], "MAX_TOKENS")), INVALID, "length"),
        (_gemini(_candidate([{"text": "部分"}], "SAFETY")), INVALID, "content_filter"),
        (_gemini(_candidate([{"text": "部分"}], "MODEL_ARMOR")), INVALID, "content_filter"),
        (_gemini(_candidate([{"text": "部分"}], "IMAGE_RECITATION")), INVALID, "content_filter"),
        (_gemini({"promptFeedback": {"blockReason": "SAFETY"}}), INVALID, "content_filter"),
        (_gemini(error={"code": 3, "message": "bad", "status": "INVALID_ARGUMENT"}), PERMANENT, "HTTP 400"),
        (_gemini(status={"code": 13, "message": "internal", "status": "INTERNAL"}), TRANSPORT, "HTTP 500"),
        (_gemini(status={"code": 8, "message": "quota", "status": "RESOURCE_EXHAUSTED"}), UNEXECUTED, "HTTP 429"),
        (_gemini(error={"code": 1, "message": "cancelled"}), UNEXECUTED, "batch_cancelled"),
        (_gemini(), TRANSPORT, "no response"),
    ],
)
def test_every_gemini_outcome_is_one_of_ours(line, kind, needle):
    ok, _value, got, _usage, error = _judged(line)
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
