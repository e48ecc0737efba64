"""Validation of model outputs: reasoning stripped, judge JSON parsed strictly (SPEC §4)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexpilot_batch.benchmark.judges import (
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


# --- reasoning judges: several JSON objects in one output ----------------------------------------

# DeepSeek-R1 with its thinking in <think> tags: the format it was asked for, quoted while thinking.
R1_TAGGED = """<think>
好的，我需要判断这条律师回复是直接给出法律判断，还是在向当事人澄清事实。输出格式是 {"label": "judgment"} 或 {"label": "clarification"}。
回复里问了"是否有借条或转账记录"，没有给出结论。所以应当是澄清。
</think>

{"label": "clarification"}"""

# DeepSeek-R1 served without the tags (thinking in plain text), a fenced example before the answer.
R1_UNTAGGED = """嗯，用户让我判断这条回复的性质。要求的输出格式示例：
```json
{"label": "judgment"}
```
或者 {"label": "clarification"}。

看这条回复：律师问了"借款是否约定了还款期限"，没有给出任何结论，只是在补充事实，所以属于澄清。

```json
{"label": "clarification"}
```"""

# o-series style: plain-text analysis in English, an illustrative object, then the final answer.
O_SERIES = """**Analysis.** The assistant's reply asks the client whether the loan was documented.

For reference, a direct judgment would be labelled like this:

```json
{"label": "judgment"}
```

Here, however, the reply gives no conclusion and only requests a missing fact, so the answer is:

```json
{"label": "clarification"}
```
"""

O_SERIES_VERDICTS = """The response addresses three claims. The required shape is {"verdicts": ["支持", "驳回", "支持"]}, \
one label per claim in order.

1. 偿还本金: the response says the court will support it only in part.
2. 支付利息: rejected.
3. 诉讼费: supported.

Final answer: {"verdicts": ["部分支持", "驳回", "支持"]}."""

R1_UNTAGGED_DCG = """先看追问是否指向争议焦点"借贷关系是否成立"。示例输出 {"decision": "否"} 表示不相关。
这个追问直接问了借条和转账记录，正是关键事实，所以相关。
{"decision": "是"}"""


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        pytest.param(R1_TAGGED, "clarification", id="r1-tagged"),
        pytest.param(R1_UNTAGGED, "clarification", id="r1-untagged-fenced-example-first"),
        pytest.param(O_SERIES, "clarification", id="o-series-plain-text"),
        # The objects agree: which one is final does not matter.
        pytest.param(
            '结论：{"label": "judgment"}。复核后仍为 {"label": "judgment"}，以上。', "judgment", id="agreeing"
        ),
    ],
)
def test_the_final_answer_of_a_reasoning_judge_is_taken(raw: str, label: str) -> None:
    assert parse_lca_label(raw) == label


def test_the_final_verdicts_and_decision_of_a_reasoning_judge_are_taken() -> None:
    assert parse_verdicts(O_SERIES_VERDICTS, 3) == ["部分支持", "驳回", "支持"]
    assert parse_dcg_decision(R1_UNTAGGED_DCG) == "是"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            '{"label": "judgment"}\n\n不过也可以理解为 {"label": "clarification"}，取决于如何看待。', id="hedged"
        ),
        pytest.param(R1_UNTAGGED + "\n\n希望以上分析对您有帮助。", id="prose-after-the-last-object"),
        pytest.param('{"label": "clarification"} 或 {"label": "judgment"} 都有道理', id="either"),
    ],
)
def test_disagreeing_objects_with_no_clear_final_one_are_malformed(raw: str) -> None:
    with pytest.raises(MalformedOutput, match="disagree"):
        parse_lca_label(raw)


def test_the_final_object_is_validated_even_when_an_earlier_one_is_valid() -> None:
    with pytest.raises(MalformedOutput, match="label"):
        parse_lca_label('示例 {"label": "judgment"}\n\n{"label": "判断"}')


def test_an_output_of_braces_is_refused_quickly() -> None:
    with pytest.raises(MalformedOutput):
        parse_lca_label("{" * 100_000)
    with pytest.raises(MalformedOutput):
        parse_lca_label('{"a": ' * 5_000 + "1")
