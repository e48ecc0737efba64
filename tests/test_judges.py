"""Validation of model outputs: reasoning stripped, judge JSON parsed strictly (SPEC §4)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexpilot_batch.judges import (
    MalformedOutput,
    parse_dcg_decision,
    parse_lca_label,
    parse_text,
    parse_verdicts,
    strip_reasoning,
)

# --- strip_reasoning ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "answer"),
    [
        ("直接回答。", "直接回答。"),
        ("<think>先想一想。\n再想。</think>\n\n正式回答。", "正式回答。"),
        ("<think></think>回答", "回答"),
        ("  <think>a</think> 回答 <think>b</think> ", "回答"),
        # The opening tag was in the prompt (chat templates that force thinking): only the text
        # after the closing tag is the answer.
        ("我先分析一下案情……</think>\n\n正式回答。", "正式回答。"),
        ("<think>", ""),
        ("<think>想到一半", ""),
        ('  \n<think>想到一半 {"label": "judgment"}', ""),
        ("<think>a</think><think>想到一半", ""),
        ("", ""),
    ],
)
def test_strip_reasoning(raw: str, answer: str) -> None:
    assert strip_reasoning(raw) == answer


@settings(max_examples=60, deadline=None)
@given(
    thought=st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=40),
    answer=st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=40),
)
def test_strip_reasoning_never_keeps_the_thought(thought: str, answer: str) -> None:
    marker = "〈THOUGHT〉"
    result = strip_reasoning(f"<think>{marker}{thought}</think>{answer}")
    assert marker not in result
    assert result == answer.strip()
    assert strip_reasoning(f"<think>{marker}{thought}") == ""


# --- judge JSON: accepted shapes ----------------------------------------------------------------

WRAPPINGS = [
    pytest.param("{obj}", id="plain"),
    pytest.param("  \n{obj}\n", id="whitespace"),
    pytest.param("```json\n{obj}\n```", id="fenced-json"),
    pytest.param("```\n{obj}\n```", id="fenced"),
    pytest.param("结论如下：\n```json\n{obj}\n```\n以上。", id="fenced-in-prose"),
    pytest.param("<think>用户在问什么？应当输出 JSON。</think>\n{obj}", id="after-think"),
    pytest.param("<think>思考</think>```json\n{obj}\n```", id="fenced-after-think"),
    pytest.param("根据分析，我的回答是 {obj} 。", id="prose"),
    pytest.param("分析完毕。\n\n{obj}\n\n希望有帮助。", id="prose-lines"),
]


def wrap(template: str, obj: dict) -> str:
    return template.replace("{obj}", json.dumps(obj, ensure_ascii=False))


@pytest.mark.parametrize("template", WRAPPINGS)
@pytest.mark.parametrize("label", ["judgment", "clarification"])
def test_parse_lca_label_accepts(template: str, label: str) -> None:
    assert parse_lca_label(wrap(template, {"label": label})) == label


@pytest.mark.parametrize("template", WRAPPINGS)
@pytest.mark.parametrize("decision", ["是", "否"])
def test_parse_dcg_decision_accepts(template: str, decision: str) -> None:
    assert parse_dcg_decision(wrap(template, {"decision": decision})) == decision


@pytest.mark.parametrize("template", WRAPPINGS)
def test_parse_verdicts_accepts(template: str) -> None:
    verdicts = ["部分支持", "驳回", "支持"]
    assert parse_verdicts(wrap(template, {"verdicts": verdicts}), 3) == verdicts


def test_extra_keys_are_ignored() -> None:
    assert parse_lca_label('{"label": "judgment", "reason": "给出了结论"}') == "judgment"


def test_answer_after_an_orphan_closing_tag_is_parsed_not_the_thought() -> None:
    raw = '先看 {"label": "judgment"} 是否合适……</think>\n{"label": "clarification"}'
    assert parse_lca_label(raw) == "clarification"


@settings(max_examples=40, deadline=None)
@given(
    verdicts=st.lists(st.sampled_from(["支持", "部分支持", "驳回"]), min_size=1, max_size=8),
    prose=st.sampled_from(["", "结论：", "好的，\n"]),
)
def test_parse_verdicts_keeps_order(verdicts: list[str], prose: str) -> None:
    raw = prose + json.dumps({"verdicts": verdicts}, ensure_ascii=False)
    assert parse_verdicts(raw, len(verdicts)) == verdicts


# --- judge JSON: rejected -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ('{"label": "judgement"}', "label"),
        ('{"label": "Judgment"}', "label"),
        ('{"label": "判断"}', "label"),
        ('{"label": null}', "label"),
        ('{"lable": "judgment"}', "label"),
        ("{}", "label"),
        ('["judgment"]', "no JSON object"),
        ("judgment", "no JSON object"),
        ("", "no JSON object"),
        ('{"label": "judgment"', "no JSON object"),
        ('<think>{"label": "judgment"}</think>', "no JSON object"),
        ('<think>{"label": "judgment"}</think>我认为这是澄清。', "no JSON object"),
        ('<think>{"label": "judgment"}', "no JSON object"),
        ('以为是 {"label": "judgment"} 吧</think>没有结论。', "no JSON object"),
    ],
)
def test_parse_lca_label_rejects(raw: str, needle: str) -> None:
    with pytest.raises(MalformedOutput) as info:
        parse_lca_label(raw)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ('{"decision": "是的"}', "decision"),
        ('{"decision": "yes"}', "decision"),
        ('{"decision": true}', "decision"),
        ('{"answer": "是"}', "decision"),
        ("是", "no JSON object"),
        ('<think>{"decision": "是"}</think>', "no JSON object"),
        ('<think>{"decision": "是"}</think>\n否', "no JSON object"),
    ],
)
def test_parse_dcg_decision_rejects(raw: str, needle: str) -> None:
    with pytest.raises(MalformedOutput) as info:
        parse_dcg_decision(raw)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("raw", "n_claims", "needle"),
    [
        ('{"verdicts": ["支持", "驳回"]}', 3, "expected 3 verdicts"),
        ('{"verdicts": ["支持", "驳回", "支持", "支持"]}', 3, "got 4"),
        ('{"verdicts": []}', 1, "expected 1 verdicts"),
        ('{"verdicts": ["支持", "同意"]}', 2, "verdicts.1"),
        ('{"verdicts": "支持"}', 1, "verdicts"),
        ('{"verdict": ["支持"]}', 1, "verdicts"),
        ('["支持", "驳回"]', 2, "no JSON object"),
        ("支持，驳回", 2, "no JSON object"),
        ('<think>{"verdicts": ["支持", "驳回"]}</think>', 2, "no JSON object"),
        ('<think>{"verdicts": ["支持", "驳回"]}</think>第一项支持，第二项驳回。', 2, "no JSON object"),
    ],
)
def test_parse_verdicts_rejects(raw: str, n_claims: int, needle: str) -> None:
    with pytest.raises(MalformedOutput) as info:
        parse_verdicts(raw, n_claims)
    assert needle in str(info.value)


def test_think_json_is_not_taken_when_the_answer_has_another() -> None:
    raw = '<think>草稿 {"label": "judgment"}</think>\n```json\n{"label": "clarification"}\n```'
    assert parse_lca_label(raw) == "clarification"
    raw = '<think>{"verdicts": ["支持", "支持"]}</think>{"verdicts": ["驳回", "部分支持"]}'
    assert parse_verdicts(raw, 2) == ["驳回", "部分支持"]


def test_malformed_message_shows_the_output() -> None:
    with pytest.raises(MalformedOutput, match="没有任何结构"):
        parse_lca_label("这段回复没有任何结构")


def test_malformed_output_is_a_value_error() -> None:
    # The engine catches it as a retryable validation failure.
    assert issubclass(MalformedOutput, ValueError)


# --- generated texts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "answer"),
    [
        ("您好，请问有借条吗？", "您好，请问有借条吗？"),
        ("  \n您好。\n", "您好。"),
        ("<think>该问借条。</think>请问有借条吗？", "请问有借条吗？"),
        ("该问借条。</think>请问有借条吗？", "请问有借条吗？"),
    ],
)
def test_parse_text_accepts(raw: str, answer: str) -> None:
    assert parse_text(raw) == answer


@pytest.mark.parametrize(
    "raw", ["", "   ", "\n\t \n", "<think>想了很多</think>", "<think>想了很多</think>  \n", "<think>没想完"]
)
def test_parse_text_rejects_empty(raw: str) -> None:
    with pytest.raises(MalformedOutput, match="empty"):
        parse_text(raw)
