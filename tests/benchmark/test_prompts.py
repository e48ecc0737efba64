"""The prompt templates and their fillers: history rendering, isolation, overrides (SPEC §4)."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.prompts import (
    DCG_JUDGE,
    DEFAULT_TEMPLATES,
    EXTRACT_VERDICTS,
    FORCE_ASK,
    FORCE_JUDGE,
    LCA_CLASSIFY,
    LEXAWN,
    SLOTS,
    USER_MODEL,
)
from lexpilot_batch.data import Case, KeyDetails, Message, load_dataset
from lexpilot_batch.errors import DataError
from lexpilot_batch.util import resources

# Seven messages, each with a marker no template contains, so positions can be compared.
HISTORY_7 = [
    Message(role="user", content="〈M0〉我借给邻居三万元，他不还。"),
    Message(role="assistant", content="〈M1〉请问有没有借条？"),
    Message(role="user", content="〈M2〉有借条，是他亲手写的。"),
    Message(role="assistant", content="〈M3〉借条上约定了还款日期吗？"),
    Message(role="user", content="〈M4〉约定去年年底还。"),
    Message(role="assistant", content="〈M5〉您催讨过吗？有没有记录？"),
    Message(role="user", content="〈M6〉微信上催过好几次。"),
]
EXPECTED_LINES = [f"{'User' if m.role == 'user' else 'Assistant'}: {m.content}" for m in HISTORY_7]

FOCAL_POINTS = ["借贷关系是否成立", "逾期利息如何计算"]
KEY_DETAILS_DICT: dict[str, str | list[str]] = {
    "借贷关系是否成立": ["借条载明借款三万元并由被告签名按印", "款项于2022年5月通过支付宝转账交付"],
    "逾期利息如何计算": "借条未约定利息。被告曾于2023年1月书面承诺按年利率百分之四赔偿逾期损失",
}
KEY_DETAILS_LIST = ["借条载明借款三万元并由被告签名按印", "款项于2022年5月通过支付宝转账交付"]
KEY_DETAILS_STR = "借条未约定利息；被告曾于2023年1月书面承诺按年利率百分之四赔偿逾期损失"
CLAIMS = ["判令被告偿还借款本金三万元", "判令被告支付逾期利息", "判令被告承担本案诉讼费用"]


def fill_all(name: str, templates: dict[str, str] | None = None) -> str:
    """Template `name` filled through its public builder, with HISTORY_7 wherever a history goes."""
    t = DEFAULT_TEMPLATES if templates is None else templates
    builders: dict[str, Callable[[], str]] = {
        LEXAWN: lambda: prompts.lexawn_prompt(HISTORY_7, t),
        FORCE_ASK: lambda: prompts.force_ask_prompt(HISTORY_7, t),
        FORCE_JUDGE: lambda: prompts.force_judge_prompt(HISTORY_7, t),
        LCA_CLASSIFY: lambda: prompts.lca_classify_prompt(HISTORY_7, "〈RESPONSE〉", t),
        DCG_JUDGE: lambda: prompts.dcg_judge_prompt(HISTORY_7, "〈QUESTION〉", FOCAL_POINTS, KEY_DETAILS_DICT, t),
        USER_MODEL: lambda: prompts.user_model_prompt(HISTORY_7, FOCAL_POINTS, KEY_DETAILS_DICT, t),
        EXTRACT_VERDICTS: lambda: prompts.extract_verdicts_prompt(CLAIMS, "〈RESPONSE〉", t),
    }
    assert set(builders) == set(DEFAULT_TEMPLATES), "a template has no builder in this test"
    return builders[name]()


def assert_in_order(text: str, needles: Sequence[str]) -> None:
    positions = []
    for needle in needles:
        assert needle in text, f"{needle!r} missing from prompt"
        positions.append(text.index(needle))
    assert positions == sorted(positions), f"out of order: {list(zip(needles, positions, strict=False))}"


def key_detail_fragments(key_details: KeyDetails) -> set[str]:
    """Every detail string / list item, and every sentence of one, that is at least 6 long."""
    if isinstance(key_details, str):
        values = [key_details]
    elif isinstance(key_details, list):
        values = list(key_details)
    else:
        values = []
        for focal, details in key_details.items():
            values.append(focal)
            values.extend([details] if isinstance(details, str) else details)
    fragments: set[str] = set()
    for value in values:
        fragments.add(value.strip())
        fragments.update(s.strip() for s in re.split(r"[。！？；;!?\n]", value))
    return {f for f in fragments if len(f) >= 6}


# --- the defaults -------------------------------------------------------------------------------


def test_default_templates_have_exactly_their_slots() -> None:
    assert set(DEFAULT_TEMPLATES) == set(SLOTS)
    for name, text in DEFAULT_TEMPLATES.items():
        assert prompts.template_slots(text) == set(SLOTS[name]), name
    # The evaluated model's templates have a history slot and nothing else.
    for name in (LEXAWN, FORCE_ASK, FORCE_JUDGE):
        assert SLOTS[name] == {"history"}
    assert SLOTS[EXTRACT_VERDICTS] == {"claims", "response"}


def test_default_templates_load_through_their_own_validation(tmp_path: Path) -> None:
    path = tmp_path / "all.json"
    path.write_text(json.dumps(DEFAULT_TEMPLATES, ensure_ascii=False), encoding="utf-8")
    assert prompts.load_templates(path) == DEFAULT_TEMPLATES


@pytest.mark.parametrize(
    ("name", "example"),
    [
        (LCA_CLASSIFY, '{"label": "judgment"}'),
        (LCA_CLASSIFY, '{"label": "clarification"}'),
        (DCG_JUDGE, '{"decision": "是"}'),
        (DCG_JUDGE, '{"decision": "否"}'),
        (EXTRACT_VERDICTS, '{"verdicts": ["支持", "驳回", ...]}'),
    ],
)
def test_json_examples_render_with_single_braces(name: str, example: str) -> None:
    filled = fill_all(name)
    assert example in filled
    assert "{{" not in filled and "}}" not in filled


# --- history rendering --------------------------------------------------------------------------


def test_render_history_keeps_every_message_in_order() -> None:
    assert prompts.render_history(HISTORY_7) == "\n".join(EXPECTED_LINES)


@pytest.mark.parametrize("name", sorted(n for n, s in SLOTS.items() if "history" in s))
def test_every_history_message_is_in_the_history_block(name: str) -> None:
    filled = fill_all(name)
    match = re.search(r"<对话历史>(.*?)</对话历史>", filled, re.DOTALL)
    assert match, f"{name}: no <对话历史> block"
    block = match.group(1)
    assert_in_order(block, EXPECTED_LINES)
    # Each message appears exactly once, and only inside the block.
    for line in EXPECTED_LINES:
        assert filled.count(line) == 1, f"{name}: {line!r} repeated or outside the block"
    # Nothing else but the lines (and surrounding newlines) is in the block.
    assert block.strip() == "\n".join(EXPECTED_LINES)
    assert block.count("User: ") == 4 and block.count("Assistant: ") == 3


def test_history_with_braces_and_newlines_is_kept_verbatim() -> None:
    history = [
        Message(role="user", content='合同写着{"违约金": 5000}和{history}，\n第二行'),
        Message(role="assistant", content="收到。"),
        Message(role="user", content="还有{0}和}{。"),
    ]
    filled = prompts.lexawn_prompt(history)
    assert prompts.render_history(history) in filled


# --- isolation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("builder", [prompts.lexawn_prompt, prompts.force_ask_prompt, prompts.force_judge_prompt])
def test_eval_builders_take_only_a_history(builder: Callable[..., str]) -> None:
    params = inspect.signature(builder).parameters
    assert list(params) == ["history", "templates"]
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params.values()), "no *args/**kwargs"


def test_extractor_takes_claims_and_response_only() -> None:
    params = inspect.signature(prompts.extract_verdicts_prompt).parameters
    assert list(params) == ["claims", "response", "templates"]
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params.values())
    assert not any(re.search(r"verdict|result_dict|gold|label", p) for p in params)


def _isolation_check(cases: Iterable[Case]) -> int:
    """Scan every eval prompt of every case; return how many fragments the control found."""
    found_in_judges = 0
    for case in cases:
        secrets = key_detail_fragments(case.key_details)
        focal = [p for p in case.focal_points if p.strip()]
        assert secrets, f"case {case.case_id}: no key detail fragment of length >= 6"
        history = case.underspecified_history
        eval_prompts = {
            "lexawn": prompts.lexawn_prompt(history),
            "force_ask": prompts.force_ask_prompt(history),
            "force_judge": prompts.force_judge_prompt(history),
        }
        for name, text in eval_prompts.items():
            for secret in [*secrets, *focal]:
                assert secret not in text, f"case {case.case_id}: {name} prompt leaks {secret!r}"
        # Whichever history they get, eval prompts hold the template and the history, nothing more.
        for h in (case.underspecified_history, case.complete_history):
            rendered = prompts.render_history(h)
            assert prompts.lexawn_prompt(h) == DEFAULT_TEMPLATES[LEXAWN].replace("{history}", rendered)
            assert prompts.force_ask_prompt(h) == DEFAULT_TEMPLATES[FORCE_ASK].replace("{history}", rendered)
            assert prompts.force_judge_prompt(h) == DEFAULT_TEMPLATES[FORCE_JUDGE].replace("{history}", rendered)
        # Positive control: the same scan finds every detail in the prompts that must hold them.
        judge = prompts.dcg_judge_prompt(history, "请问有借条吗？", case.focal_points, case.key_details)
        user = prompts.user_model_prompt(history, case.focal_points, case.key_details)
        for text in (judge, user):
            for secret in [*secrets, *focal]:
                assert secret in text, f"case {case.case_id}: {secret!r} missing from judge prompt"
                found_in_judges += 1
    return found_in_judges


def _in_code_case(key_details: KeyDetails) -> Case:
    return Case(
        case_number="测试-1",
        cause_of_action="民间借贷纠纷",
        plaintiff_type="自然人",
        focal_point=FOCAL_POINTS,
        key_details=key_details,
        result_dict={c: "支持" for c in CLAIMS},
        complete_history=[
            Message(role="user", content="邻居借了我三万元，" + KEY_DETAILS_LIST[0] + "。"),
            Message(role="assistant", content="请问是怎么付款的？"),
            Message(role="user", content=KEY_DETAILS_LIST[1] + "。"),
        ],
        underspecified_history=HISTORY_7,
    )


@pytest.mark.parametrize("key_details", [KEY_DETAILS_DICT, KEY_DETAILS_LIST, KEY_DETAILS_STR])
def test_eval_prompts_hold_no_key_detail_in_code_case(key_details: KeyDetails) -> None:
    assert _isolation_check([_in_code_case(key_details)]) > 0


def test_isolation_scan_detects_a_leak() -> None:
    # If a detail were in the history the model sees, the scan must say so.
    case = _in_code_case(KEY_DETAILS_LIST)
    leaky = case.model_copy(update={"underspecified_history": case.complete_history})
    with pytest.raises(AssertionError, match="leaks"):
        _isolation_check([leaky])


def test_eval_prompts_hold_no_key_detail_bundled_sample() -> None:
    if not resources.sample_dataset().exists():
        pytest.skip("data/sample_cases.json not written yet; the in-code case test still runs")
    dataset = load_dataset(None)
    assert len(dataset) > 0
    assert _isolation_check(dataset) > 0


# --- hidden facts and claims ----------------------------------------------------------------------


@pytest.mark.parametrize("key_details", [KEY_DETAILS_DICT, KEY_DETAILS_LIST, KEY_DETAILS_STR])
def test_render_key_details_keeps_every_detail(key_details: KeyDetails) -> None:
    rendered = prompts.render_key_details(key_details)
    if isinstance(key_details, str):
        expected = [key_details]
    elif isinstance(key_details, list):
        expected = key_details
    else:
        expected = []
        for focal, details in key_details.items():
            expected += [focal, *([details] if isinstance(details, str) else details)]
    assert_in_order(rendered, expected)


def test_render_key_details_dict_groups_details_under_their_focal_point() -> None:
    rendered = prompts.render_key_details(KEY_DETAILS_DICT)
    first, second = rendered.split("【逾期利息如何计算】")
    assert "【借贷关系是否成立】" in first
    assert all(d in first for d in KEY_DETAILS_DICT["借贷关系是否成立"])
    detail = KEY_DETAILS_DICT["逾期利息如何计算"]
    assert isinstance(detail, str)
    assert detail in second


def test_render_claims_keeps_claim_order() -> None:
    assert (
        prompts.render_claims(CLAIMS)
        == "1. 判令被告偿还借款本金三万元\n2. 判令被告支付逾期利息\n3. 判令被告承担本案诉讼费用"
    )
    reversed_claims = list(reversed(CLAIMS))
    assert_in_order(prompts.render_claims(reversed_claims), reversed_claims)
    filled = prompts.extract_verdicts_prompt(reversed_claims, "〈RESPONSE〉")
    assert_in_order(filled, reversed_claims)
    assert "〈RESPONSE〉" in filled


def test_focal_points_are_numbered_in_order() -> None:
    assert prompts.render_focal_points(FOCAL_POINTS) == "1. 借贷关系是否成立\n2. 逾期利息如何计算"


# --- overrides ----------------------------------------------------------------------------------


def write(tmp_path: Path, data: object, name: str = "prompts.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_load_templates_none_gives_the_defaults() -> None:
    loaded = prompts.load_templates(None)
    assert loaded == DEFAULT_TEMPLATES
    loaded[LEXAWN] = "changed {history}"
    assert DEFAULT_TEMPLATES[LEXAWN] != "changed {history}", "defaults must not be shared mutable"


def test_override_replaces_only_the_named_template(tmp_path: Path) -> None:
    text = "请以律师身份回复：\n<对话历史>\n{history}\n</对话历史>"
    loaded = prompts.load_templates(write(tmp_path, {FORCE_ASK: text}))
    assert loaded[FORCE_ASK] == text
    assert {k: v for k, v in loaded.items() if k != FORCE_ASK} == {
        k: v for k, v in DEFAULT_TEMPLATES.items() if k != FORCE_ASK
    }
    filled = prompts.force_ask_prompt(HISTORY_7, loaded)
    assert filled == text.replace("{history}", "\n".join(EXPECTED_LINES))
    # Other builders still use the defaults.
    assert prompts.lexawn_prompt(HISTORY_7, loaded) == prompts.lexawn_prompt(HISTORY_7)


def test_literal_braces_in_an_override(tmp_path: Path) -> None:
    text = '历史：{history}\n回复：{response}\n只输出 {{"label": "judgment"}}'
    loaded = prompts.load_templates(write(tmp_path, {LCA_CLASSIFY: text}))
    filled = prompts.lca_classify_prompt(HISTORY_7, "好的", loaded)
    assert filled.endswith('只输出 {"label": "judgment"}')


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        ({LEXAWN: "没有历史槽"}, [LEXAWN, "missing", "{history}"]),
        ({DCG_JUDGE: "{history}{question}{focal_points}"}, [DCG_JUDGE, "missing", "{key_details}"]),
        ({FORCE_JUDGE: "{history} {key_details}"}, [FORCE_JUDGE, "unknown slot", "{key_details}"]),
        ({LEXAWN: "{history} {focal_points}"}, [LEXAWN, "unknown slot", "{focal_points}"]),
        ({EXTRACT_VERDICTS: "{claims}{response}{verdicts}"}, [EXTRACT_VERDICTS, "unknown slot", "{verdicts}"]),
        ({"lexawm": "{history}"}, ["lexawm", "unknown template", LEXAWN]),
        ({LEXAWN: ""}, [LEXAWN, "non-empty"]),
        ({LEXAWN: "   \n"}, [LEXAWN, "non-empty"]),
        ({LEXAWN: 42}, [LEXAWN, "non-empty string"]),
        ({LEXAWN: "{history"}, [LEXAWN, "braces"]),
        ({LEXAWN: "{history} }"}, [LEXAWN, "braces"]),
        ({LEXAWN: '{history} 输出 {"a": 1}'}, [LEXAWN, '{"a"']),
    ],
)
def test_invalid_override_names_template_and_slot(
    tmp_path: Path, overrides: dict[str, object], needles: list[str]
) -> None:
    path = write(tmp_path, overrides)
    with pytest.raises(DataError) as info:
        prompts.load_templates(path)
    message = str(info.value)
    assert str(path) in message
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"


def test_every_problem_of_a_file_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, {LEXAWN: "x", FORCE_ASK: "{history}{case}", "nope": "{history}"})
    with pytest.raises(DataError) as info:
        prompts.load_templates(path)
    assert len(info.value.problems) == 3


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b'["{history}"]', "JSON object"),
        (b'"{history}"', "JSON object"),
        (b"null", "JSON object"),
        (b"", "JSON"),
        (b'{"lexawn": "{history}"', "JSON"),
        ('{"lexawn": "你好{history}"}'.encode("gbk"), "UTF-8"),
        (b"\xff\xfe\x00\x00", "UTF-8"),
    ],
)
def test_unreadable_file_raises_data_error(tmp_path: Path, raw: bytes, needle: str) -> None:
    path = tmp_path / "prompts.json"
    path.write_bytes(raw)
    with pytest.raises(DataError) as info:
        prompts.load_templates(path)
    assert str(path) in str(info.value)
    assert needle in str(info.value)


def test_missing_file_raises_data_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(DataError, match="not found"):
        prompts.load_templates(path)


def test_folder_raises_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        prompts.load_templates(tmp_path)
    assert str(tmp_path) in str(info.value)


@pytest.mark.parametrize("slot", ["{history!r}", "{history:>20}", "{history!x}", "{history:zz}"])
def test_conversions_and_format_specs_are_refused(tmp_path: Path, slot: str) -> None:
    # Either they crash when filled (`!x`, `:zz`) or they silently change the history text.
    path = write(tmp_path, {LEXAWN: f"对话：{slot}"})
    with pytest.raises(DataError) as info:
        prompts.load_templates(path)
    assert LEXAWN in str(info.value) and "history" in str(info.value)


def test_a_valid_override_can_always_be_filled(tmp_path: Path) -> None:
    overrides = {
        name: "前言 " + " ".join("{" + s + "}" for s in sorted(slots)) + " {{}}" for name, slots in SLOTS.items()
    }
    loaded = prompts.load_templates(write(tmp_path, overrides))
    for name in SLOTS:
        filled = fill_all(name, loaded)
        assert filled.startswith("前言 ") and filled.endswith(" {}")


def test_utf8_bom_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({LEXAWN: "请回复：{history}"}, ensure_ascii=False).encode())
    assert prompts.load_templates(path)[LEXAWN] == "请回复：{history}"


# --- hash ---------------------------------------------------------------------------------------


def test_templates_hash_is_stable_and_changes_with_any_template(tmp_path: Path) -> None:
    base = prompts.templates_hash(DEFAULT_TEMPLATES)
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert prompts.templates_hash(dict(DEFAULT_TEMPLATES)) == base
    assert prompts.templates_hash(dict(reversed(list(DEFAULT_TEMPLATES.items())))) == base
    assert prompts.templates_hash(prompts.load_templates(None)) == base
    seen = {base}
    for name in DEFAULT_TEMPLATES:
        changed = dict(DEFAULT_TEMPLATES)
        changed[name] = changed[name] + " "
        seen.add(prompts.templates_hash(changed))
    assert len(seen) == 1 + len(DEFAULT_TEMPLATES)
    # Through a file: the same text gives the same hash, a different one another.
    same = prompts.load_templates(write(tmp_path, {LEXAWN: DEFAULT_TEMPLATES[LEXAWN]}, "same.json"))
    other = prompts.load_templates(write(tmp_path, {LEXAWN: "回复：{history}"}, "other.json"))
    assert prompts.templates_hash(same) == base
    assert prompts.templates_hash(other) != base


# --- prompts keep their pieces ------------------------------------------------------------------

_texts = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40)
_messages = st.lists(st.builds(Message, role=st.sampled_from(["user", "assistant"]), content=_texts), max_size=6)


@settings(max_examples=200, deadline=None)
@given(history=_messages, response=_texts, override=_texts)
def test_prompts_equal_str_format_and_their_pieces_join_to_them(history, response, override) -> None:
    """Every builder equals `template.format` on the rendered history, for any text, in the
    default templates and in an override with arbitrary literal text (braces doubled)."""
    literal = override.replace("{", "{{").replace("}", "}}")
    for templates in (DEFAULT_TEMPLATES, {**DEFAULT_TEMPLATES, LEXAWN: literal + "{history}" + literal}):
        rendered = prompts.render_history(history)
        built = [
            (prompts.lexawn_prompt(history, templates), templates[LEXAWN].format(history=rendered)),
            (
                prompts.lca_classify_prompt(history, response, templates),
                templates[LCA_CLASSIFY].format(history=rendered, response=response),
            ),
            (
                prompts.extract_verdicts_prompt([response, "请求"], response, templates),
                templates[EXTRACT_VERDICTS].format(claims=prompts.render_claims([response, "请求"]), response=response),
            ),
        ]
        for prompt, expected in built:
            assert prompt == expected
            assert isinstance(prompt, prompts.Prompt) and "".join(prompt.parts) == expected


def test_a_prompts_file_that_is_not_json_points_to_the_section_that_exists(tmp_path) -> None:
    """Issue 48 point 8: the error pointed to a README section 'Prompts' that does not exist."""
    from pathlib import Path

    from lexpilot_batch.errors import DataError

    path = tmp_path / "prompts.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError) as refused:
        prompts.load_templates(path)
    doc, section = "docs/dataset.md", "The prompts"
    assert f"see {doc}, '{section}'" in str(refused.value)
    text = (Path(__file__).parents[2] / doc).read_text(encoding="utf-8")
    assert f"\n## {section}\n" in text
