"""The dataset loader: every schema rule of SPEC §3, the categories file, the summary, the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.data import (
    HISTORY_FIELDS,
    MAX_PROBLEMS,
    Case,
    Dataset,
    Message,
    dump_messages,
    load_categories,
    load_dataset,
    validate_file,
)
from lexpilot_batch.data.categories import read_categories
from lexpilot_batch.errors import DataError
from lexpilot_batch.util import resources
from tests.helpers.cases import HISTORY_3, make_case


def write_json(tmp_path: Path, data: Any, name: str = "cases.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def load_error(tmp_path: Path, data: Any) -> str:
    """The text of the DataError that loading `data` raises (the test fails if none is raised)."""
    path = write_json(tmp_path, data)
    with pytest.raises(DataError) as info:
        load_dataset(path)
    return str(info.value)


# --- valid data ------------------------------------------------------------------------------


def test_valid_dataset_loads_every_accepted_shape(tmp_path: Path) -> None:
    cases = [
        make_case(case_number=1, note="kept"),
        make_case(
            case_number="A-2",
            cause_of_action="离婚纠纷",
            focal_point="子女抚养权归属",
            key_details="孩子一直随母亲生活。",
            result_dict={"判令离婚": "支持", "判令孩子由原告抚养": "驳回", "分割财产": "部分支持"},
            complete_history=[{"role": "user", "content": "我想离婚。"}],
            underspecified_history=[{"role": "user", "content": "离婚怎么办？"}],
        ),
        make_case(case_number=3, key_details=["细节一", "细节二"], cause_of_action="信用卡纠纷"),
    ]
    path = write_json(tmp_path, cases)
    dataset = load_dataset(path)

    assert isinstance(dataset, Dataset)
    assert dataset.path == path
    assert dataset.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [c.case_number for c in dataset.cases] == [1, "A-2", 3]
    assert dataset.case_ids == ["1", "A-2", "3"]
    first, second, third = dataset.cases
    assert first.model_extra == {"note": "kept"}
    assert first.focal_points == ["借贷关系是否成立", "利息如何计算"]
    assert first.key_details == cases[0]["key_details"]
    assert second.focal_points == ["子女抚养权归属"]
    assert second.key_details == "孩子一直随母亲生活。"
    assert second.claims == ["判令离婚", "判令孩子由原告抚养", "分割财产"]
    assert list(second.result_dict.values()) == ["支持", "驳回", "部分支持"]
    assert third.key_details == ["细节一", "细节二"]
    assert [m.content for m in first.complete_history] == [m["content"] for m in HISTORY_3]
    assert dataset.class_of(first) == "合同、准合同纠纷"
    assert dataset.class_of(second) == "婚姻家庭、继承纠纷"
    assert dataset.class_of(third) == "合同、准合同纠纷"  # 银行卡纠纷 is a contract dispute
    assert dataset.case(1) is first and dataset.case("A-2") is second


def test_history_aliases_are_normalised(tmp_path: Path) -> None:
    case = make_case()
    case["complete_consultation"] = case.pop("complete_history")
    case["underspecified_consultation"] = case.pop("underspecified_history")
    loaded = load_dataset(write_json(tmp_path, [case])).cases[0]
    assert len(loaded.complete_history) == 3 and len(loaded.underspecified_history) == 3
    assert loaded.model_extra == {}


def test_alias_and_canonical_field_together_is_an_error(tmp_path: Path) -> None:
    case = make_case(complete_consultation=HISTORY_3)
    text = load_error(tmp_path, [case])
    assert "case #1 (case_number 1001)" in text and "complete_consultation" in text


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    body = json.dumps([make_case()], ensure_ascii=False).encode("utf-8")
    path.write_bytes(b"\xef\xbb\xbf" + body)
    assert len(load_dataset(path)) == 1


# --- one violation at a time -----------------------------------------------------------------

Mutator = Callable[[dict[str, Any]], object]


def _set(path: list[Any], value: Any) -> Mutator:
    def mutate(case: dict[str, Any]) -> None:
        target = case
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return mutate


def _append(field: str, message: dict[str, Any]) -> Mutator:
    return lambda case: case[field].append(message)


VIOLATIONS: dict[str, tuple[Mutator, list[str]]] = {
    "roles not alternating": (
        _set(["complete_history", 1, "role"], "user"),
        ["complete_history[1].role", "alternate"],
    ),
    "starts with assistant": (
        _set(["underspecified_history", 0, "role"], "assistant"),
        ["underspecified_history[0].role", "start with a user message"],
    ),
    "ends on assistant": (
        lambda case: [
            case[f].append({"role": "assistant", "content": "还有别的情况吗？"})
            for f in ("complete_history", "underspecified_history")
        ],
        ["complete_history[3].role", "end with a user message"],
    ),
    "unknown role": (
        _set(["complete_history", 2, "role"], "system"),
        ["complete_history[2].role", '"system"', '"user" or "assistant"'],
    ),
    "empty content": (
        _set(["complete_history", 2, "content"], ""),
        ["complete_history[2].content", "is empty"],
    ),
    "whitespace content": (
        _set(["underspecified_history", 1, "content"], " \n\t"),
        ["underspecified_history[1].content", "whitespace only"],
    ),
    "content not a string": (
        _set(["complete_history", 0, "content"], ["a"]),
        ["complete_history[0].content", "is an array"],
    ),
    "message not an object": (
        _set(["complete_history", 0], "我借给朋友五万元"),
        ["complete_history[0]", "is a string"],
    ),
    "message without content": (
        _set(["complete_history", 0], {"role": "user", "text": "x"}),
        ["complete_history[0]", "has no content", "role, text"],
    ),
    "history empty": (
        lambda case: case.update(complete_history=[], underspecified_history=[]),
        ["complete_history", "is empty"],
    ),
    "history not an array": (
        _set(["underspecified_history"], "朋友借钱不还怎么办？"),
        ["underspecified_history", "is a string", "array of {role, content} messages"],
    ),
    "unequal message counts": (
        _set(["underspecified_history"], [{"role": "user", "content": "朋友借钱不还怎么办？"}]),
        ["underspecified_history", "has 1 messages but complete_history has 3"],
    ),
    "bad verdict label": (
        _set(["result_dict", "判令被告支付利息"], "部分驳回"),
        ['result_dict["判令被告支付利息"]', '"部分驳回"', "支持 / 部分支持 / 驳回"],
    ),
    "verdict with spaces": (
        _set(["result_dict", "判令被告支付利息"], " 支持"),
        ['result_dict["判令被告支付利息"]', '" 支持"'],
    ),
    "empty result_dict": (_set(["result_dict"], {}), ["result_dict", "is empty"]),
    "result_dict not an object": (
        _set(["result_dict"], ["支持"]),
        ["result_dict", "is an array"],
    ),
    "empty focal_point": (_set(["focal_point"], "  "), ["focal_point", "whitespace only"]),
    "empty focal_point list": (_set(["focal_point"], []), ["focal_point", "empty array"]),
    "focal_point list item empty": (
        _set(["focal_point", 1], ""),
        ["focal_point[1]", "is empty"],
    ),
    "focal_point a number": (_set(["focal_point"], 3), ["focal_point", "is a number"]),
    "key_details empty": (_set(["key_details"], ""), ["key_details", "is empty"]),
    "key_details empty object": (_set(["key_details"], {}), ["key_details", "empty object"]),
    "key_details value wrong type": (
        _set(["key_details", "利息如何计算"], 6),
        ['key_details["利息如何计算"]', "is a number"],
    ),
    "key_details list item wrong type": (
        _set(["key_details"], ["有借条", None]),
        ["key_details[1]", "is null"],
    ),
    "case_number boolean": (_set(["case_number"], True), ["case #2: case_number: is true"]),
    "case_number empty": (_set(["case_number"], ""), ['case #2: case_number: is ""']),
    "cause_of_action empty": (
        _set(["cause_of_action"], ""),
        ["cause_of_action", "is empty"],
    ),
    "plaintiff_type not a string": (
        _set(["plaintiff_type"], None),
        ["plaintiff_type", "is null"],
    ),
}


@pytest.mark.parametrize("name", list(VIOLATIONS))
def test_each_violation_names_case_and_field(tmp_path: Path, name: str) -> None:
    mutate, fragments = VIOLATIONS[name]
    good = make_case(case_number=7)
    bad = make_case(case_number=1024)
    mutate(bad)
    text = load_error(tmp_path, [good, bad])
    label = "case #2 (case_number 1024)" if not name.startswith("case_number") else "case #2"
    assert label in text
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    assert "case #1 " not in text  # the valid case is not blamed
    assert "Traceback" not in text and "pydantic" not in text


def test_valid_case_passes_the_violation_harness(tmp_path: Path) -> None:
    # Guards the table above: without a mutation, the same two cases load.
    assert len(load_dataset(write_json(tmp_path, [make_case(case_number=7), make_case()]))) == 2


def test_missing_field_lists_the_fields_the_case_has(tmp_path: Path) -> None:
    text = load_error(tmp_path, [make_case(plaintiff_type=..., underspecified_history=...)])
    assert "case #1 (case_number 1001)" in text
    assert "missing fields plaintiff_type, underspecified_history" in text
    assert "underspecified_consultation" in text  # the accepted alias is suggested
    assert (
        "the case has fields: case_number, cause_of_action, focal_point, key_details, "
        "result_dict, complete_history" in text
    )


def test_missing_case_number_names_the_case_by_position(tmp_path: Path) -> None:
    text = load_error(tmp_path, [make_case(), make_case(case_number=...)])
    assert "case #2: missing field case_number" in text


def test_duplicate_case_numbers(tmp_path: Path) -> None:
    numbers: list[int | str] = [12, "12", 12]
    text = load_error(tmp_path, [make_case(case_number=n) for n in numbers])
    assert "case #2 (case_number 12): case_number: duplicates case #1 (case_number 12)" in text
    assert "case #3 (case_number 12): case_number: duplicates case #1" in text


def test_unmapped_causes_are_all_listed_with_their_cases(tmp_path: Path) -> None:
    cases = [
        make_case(case_number=1, cause_of_action="借款纠纷"),
        make_case(case_number=2),
        make_case(case_number=3, cause_of_action="海事纠纷"),
        make_case(case_number=4, cause_of_action="借款纠纷"),
        make_case(case_number=5, cause_of_action="民间借贷纠纷 "),
    ]
    text = load_error(tmp_path, cases)
    assert "3 causes of action are not in the categories mapping" in text
    assert '"借款纠纷": case #1 (case_number 1), case #4 (case_number 4)' in text
    assert '"海事纠纷": case #3 (case_number 3)' in text
    assert '"民间借贷纠纷 " (differs from the mapped "民间借贷纠纷" only in spaces)' in text
    assert "case #2 " not in text
    assert "--categories" in text


def test_duplicate_json_keys_in_result_dict_are_reported(tmp_path: Path) -> None:
    body = json.dumps([make_case()], ensure_ascii=False)
    body = body.replace('"判令被告支付利息": "部分支持"', '"判令被告支付利息": "部分支持", "判令被告支付利息": "驳回"')
    path = tmp_path / "dup.json"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as info:
        load_dataset(path)
    assert 'result_dict: key "判令被告支付利息" appears more than once' in str(info.value)


def test_several_problems_are_reported_at_once(tmp_path: Path) -> None:
    bad_roles = make_case(case_number=2)
    bad_roles["complete_history"][0]["role"] = "assistant"
    cases = [
        make_case(case_number=1, result_dict={"判令还款": "同意"}),
        bad_roles,
        "not a case",
        make_case(case_number=4, cause_of_action="不存在的案由"),
        make_case(case_number=5, focal_point=""),
    ]
    with pytest.raises(DataError) as info:
        load_dataset(write_json(tmp_path, cases))
    text = str(info.value)
    assert 'case #1 (case_number 1): result_dict["判令还款"]' in text
    assert "case #2 (case_number 2): complete_history[0].role" in text
    assert "case #3: is a string" in text
    assert '"不存在的案由": case #4 (case_number 4)' in text
    assert "case #5 (case_number 5): focal_point" in text
    # Case #2 breaks two rules (starts with assistant, two assistants in a row).
    assert "6 problems" in text and "nothing was loaded" in text
    assert len(info.value.problems) == 6


def test_problem_list_is_capped(tmp_path: Path) -> None:
    cases = [make_case(case_number=i, result_dict={}) for i in range(MAX_PROBLEMS + 10)]
    with pytest.raises(DataError) as info:
        load_dataset(write_json(tmp_path, cases))
    assert len(info.value.problems) == MAX_PROBLEMS + 1
    assert info.value.problems[-1] == "… and 10 more problems"
    assert f"{MAX_PROBLEMS + 10} problems" in str(info.value)


# --- whole-file problems ---------------------------------------------------------------------


def _file_error(tmp_path: Path, content: bytes) -> str:
    path = tmp_path / "cases.json"
    path.write_bytes(content)
    with pytest.raises(DataError) as info:
        load_dataset(path)
    text = str(info.value)
    assert str(path) in text
    return text


def test_not_json(tmp_path: Path) -> None:
    text = _file_error(tmp_path, b'[\n  {"case_number": 1,}\n]')
    assert "is not valid JSON" in text and "line 2 column" in text


def test_truncated_json(tmp_path: Path) -> None:
    full = json.dumps([make_case()], ensure_ascii=False, indent=2).encode("utf-8")
    text = _file_error(tmp_path, full[: len(full) // 2])
    assert "truncated" in text and "line " in text


def test_top_level_not_a_list(tmp_path: Path) -> None:
    text = _file_error(tmp_path, json.dumps({"cases": [make_case()]}).encode())
    assert "holds an object at the top level; expected a JSON array" in text


def test_empty_list_and_empty_file(tmp_path: Path) -> None:
    assert "empty array" in _file_error(tmp_path, b"[]")
    assert "is empty" in _file_error(tmp_path, b"  \n")


def test_not_utf8(tmp_path: Path) -> None:
    content = json.dumps([make_case()], ensure_ascii=False).encode("gbk")
    text = _file_error(tmp_path, content)
    assert "is not UTF-8" in text and "save it as UTF-8" in text


def test_deeply_nested_junk_does_not_crash(tmp_path: Path) -> None:
    text = _file_error(tmp_path, b"[" * 200_000 + b"]" * 200_000)
    assert "too deeply" in text


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist; pass a LexPilot JSON file"):
        load_dataset(tmp_path / "nope.json")


# --- categories ------------------------------------------------------------------------------


# Where 《民事案件案由规定》 (2020) puts the causes the first bundled mapping had misplaced, and a
# few more: the first-level part each sits in decides its class.
OFFICIAL_PLACEMENTS = {
    "物业服务合同纠纷": "合同、准合同纠纷",  # 十、合同纠纷, not 物权纠纷
    "劳务合同纠纷": "合同、准合同纠纷",  # 十、合同纠纷, not 劳动争议
    "合伙合同纠纷": "合同、准合同纠纷",  # 十、合同纠纷
    "信用卡纠纷": "合同、准合同纠纷",  # 十、合同纠纷 › 银行卡纠纷
    "生命权、身体权、健康权纠纷": "人格权与侵权责任纠纷",  # 第一部分 人格权纠纷
    "名誉权纠纷": "人格权与侵权责任纠纷",  # 第一部分 人格权纠纷
    "机动车交通事故责任纠纷": "人格权与侵权责任纠纷",  # 第九部分 侵权责任纠纷
    "工伤保险待遇纠纷": "劳动争议、人事争议",  # 十七、劳动争议 › 社会保险纠纷
    "所有权确认纠纷": "物权纠纷",  # 五、物权保护纠纷 › 物权确认纠纷
    "保险合同纠纷": "与公司、证券、保险、票据等有关的民事纠纷",  # 二十七、保险纠纷
    "股权转让纠纷": "与公司、证券、保险、票据等有关的民事纠纷",  # 二十一、与公司有关的纠纷
}


def test_bundled_categories_follow_the_official_cause_of_action_regulation() -> None:
    text = resources.default_categories().read_text(encoding="utf-8")
    raw = json.loads(text)
    categories = read_categories(None)
    assert len(categories.class_names) == 6 and len(categories.cause_to_class) == 36
    for cause, cls in OFFICIAL_PLACEMENTS.items():
        assert categories.cause_to_class[cause] == cls, cause
    # The file names its source and defines every class, in notes the loader skips.
    assert "民事案件案由规定" in raw["$comment"] and "2020" in raw["$comment"]
    assert "Appendix D" in raw["$comment"]
    assert set(raw["$classes"]) == set(categories.class_names)
    assert all(definition.startswith("第") for definition in raw["$classes"].values())
    # Written with ensure_ascii=False so the Chinese stays readable in the file.
    assert "合同、准合同纠纷" in text


def test_every_sample_case_maps_and_every_class_is_represented() -> None:
    summary = validate_file(None, None)
    assert summary.cases_per_class == {
        "合同、准合同纠纷": 4,
        "劳动争议、人事争议": 3,
        "婚姻家庭、继承纠纷": 3,
        "人格权与侵权责任纠纷": 3,
        "物权纠纷": 2,
        "与公司、证券、保险、票据等有关的民事纠纷": 3,
    }


def test_notes_are_not_classes_and_not_part_of_the_mapping_identity(tmp_path: Path) -> None:
    plain = read_categories(
        write_json(tmp_path, {"甲类": ["海事纠纷", "买卖合同纠纷"], "乙类": ["离婚纠纷"]}, "a.json")
    )
    noted = read_categories(
        write_json(
            tmp_path,
            {
                "$comment": "来源",
                "乙类": ["离婚纠纷"],
                "$classes": {"甲类": "定义"},
                "甲类": ["买卖合同纠纷", "海事纠纷"],
            },
            "b.json",
        )
    )
    assert noted.class_names == ("乙类", "甲类")
    assert noted.cause_to_class == {"离婚纠纷": "乙类", "买卖合同纠纷": "甲类", "海事纠纷": "甲类"}
    assert noted.sha256 == plain.sha256  # order and notes do not make another mapping
    moved = read_categories(
        write_json(tmp_path, {"甲类": ["海事纠纷"], "乙类": ["离婚纠纷", "买卖合同纠纷"]}, "c.json")
    )
    assert moved.sha256 != plain.sha256  # one cause in another class does
    with pytest.raises(DataError, match="has no class, only notes"):
        read_categories(write_json(tmp_path, {"$comment": "空"}, "d.json"))


def test_custom_categories_override_the_default(tmp_path: Path) -> None:
    cats = write_json(tmp_path, {"甲类": ["海事纠纷"], "乙类": []}, "cats.json")
    assert load_categories(cats) == {"海事纠纷": "甲类"}
    dataset = load_dataset(write_json(tmp_path, [make_case(cause_of_action="海事纠纷")]), cats)
    assert dataset.class_of(dataset.cases[0]) == "甲类"
    assert dataset.class_names == ("甲类", "乙类")
    # Under that mapping the default causes are unmapped.
    with pytest.raises(DataError, match="民间借贷纠纷"):
        load_dataset(write_json(tmp_path, [make_case()], "other.json"), cats)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ({"甲类": ["海事纠纷"], "乙类": ["海事纠纷"]}, 'cause "海事纠纷" is listed under both "甲类" and "乙类"'),
        (["海事纠纷"], "holds an array; expected a JSON object"),
        ({}, "holds an empty object"),
        ({"甲类": "海事纠纷"}, 'class "甲类": is a string; expected an array'),
        ({"甲类": ["海事纠纷", ""]}, 'class "甲类"[1]'),
    ],
)
def test_bad_categories(tmp_path: Path, content: Any, fragment: str) -> None:
    path = write_json(tmp_path, content, "cats.json")
    with pytest.raises(DataError) as info:
        load_categories(path)
    assert fragment in str(info.value) and str(path) in str(info.value)
    assert "--categories" in str(info.value)


def test_categories_not_json_or_missing(tmp_path: Path) -> None:
    path = tmp_path / "cats.json"
    path.write_text("{甲类: []}", encoding="utf-8")
    with pytest.raises(DataError, match="is not valid JSON.*line 1 column 2"):
        load_categories(path)
    with pytest.raises(DataError, match="Categories file .* does not exist"):
        load_categories(tmp_path / "missing.json")


# --- summary and CLI -------------------------------------------------------------------------


def _summary_cases() -> list[dict[str, Any]]:
    one = [{"role": "user", "content": "咨询。"}]
    five = HISTORY_3 + [
        {"role": "assistant", "content": "对方是否承认借款？"},
        {"role": "user", "content": "他承认。"},
    ]
    return [
        make_case(case_number=1),
        make_case(
            case_number=2,
            cause_of_action="离婚纠纷",
            result_dict={"判令离婚": "支持", "分割财产": "驳回", "精神损害赔偿": "驳回"},
            complete_history=one,
            underspecified_history=one,
        ),
        make_case(case_number=3, complete_history=five, underspecified_history=five),
    ]


def test_summary_counts(tmp_path: Path) -> None:
    summary = validate_file(write_json(tmp_path, _summary_cases()), None)
    assert (summary.n_cases, summary.n_histories, summary.n_causes) == (3, 6, 2)
    assert (summary.messages_min, summary.messages_median, summary.messages_max) == (1, 3, 5)
    assert summary.cases_per_class == {
        "合同、准合同纠纷": 2,
        "劳动争议、人事争议": 0,
        "婚姻家庭、继承纠纷": 1,
        "人格权与侵权责任纠纷": 0,
        "物权纠纷": 0,
        "与公司、证券、保险、票据等有关的民事纠纷": 0,
    }
    assert summary.claims_per_verdict == {"支持": 3, "部分支持": 2, "驳回": 2}
    text = summary.render()
    assert summary.sha256[:12] in text
    assert "min 1, median 3, max 5" in text
    assert text.rstrip().endswith("valid")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lexpilot_batch", "validate-data", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd,
        # The child prints Chinese; its stdio must be UTF-8 on every platform (Windows consoles).
        env={**os.environ, "PYTHONIOENCODING": "utf-8", "PYTHONUTF8": "1"},
    )


def test_cli_validate_data_valid_file(tmp_path: Path) -> None:
    path = write_json(tmp_path, _summary_cases())
    result = _cli("--dataset", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert str(path) in out
    assert hashlib.sha256(path.read_bytes()).hexdigest()[:12] in out
    for fragment in (
        "Cases        3",
        "Histories    6",
        "与公司、证券、保险、票据等有关的民事纠纷",
        "部分支持",
        "valid",
    ):
        assert fragment in out


def test_cli_validate_data_invalid_file(tmp_path: Path) -> None:
    bad = make_case(case_number=1024)
    bad["underspecified_history"][1]["role"] = "user"
    path = write_json(tmp_path, [make_case(), bad])
    result = _cli("--dataset", str(path), cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "case #2 (case_number 1024): underspecified_history[1].role" in result.stderr
    assert result.stdout == ""


def test_cli_validate_data_blames_the_mapping_for_an_unmapped_cause_and_keeps_categories(tmp_path: Path) -> None:
    cats = write_json(tmp_path, {"甲类": ["离婚纠纷"]}, "cats.json")
    path = write_json(tmp_path, [make_case()])  # 民间借贷纠纷, which cats.json lacks
    result = _cli("--dataset", str(path), "--categories", str(cats), cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert f"Categories file {cats} does not cover dataset file {path}" in first
    assert "is invalid" not in first  # the cases are not what is wrong
    assert f"validate-data --dataset {path} --categories {cats}`" in first
    assert '"民间借贷纠纷": case #1' in result.stderr
    # With problems in the cases too, the dataset is at fault, and the command still keeps --categories.
    bad = make_case(case_number=2, result_dict={"判令还款": "同意"})
    path = write_json(tmp_path, [make_case(), bad], "bad.json")
    result = _cli("--dataset", str(path), "--categories", str(cats), cwd=tmp_path)
    first = result.stderr.splitlines()[0]
    assert f"Dataset file {path} is invalid: 2 problems" in first
    assert f"validate-data --dataset {path} --categories {cats}`" in first


def test_cli_validate_data_not_json(tmp_path: Path) -> None:
    path = tmp_path / "cases.json"
    path.write_text("[{", encoding="utf-8")
    result = _cli("--dataset", str(path), cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "truncated" in result.stderr


def test_bundled_sample_validates() -> None:
    sample = resources.sample_dataset()
    if not sample.exists():
        pytest.skip("data/sample_cases.json is not written yet")
    dataset = load_dataset(None)
    assert len(dataset) >= 12
    assert all(isinstance(case, Case) for case in dataset.cases)
    summary = validate_file(None, None)
    assert all(count > 0 for count in summary.cases_per_class.values())
    assert all(count > 0 for count in summary.claims_per_verdict.values())
    lengths = {len(c.complete_history) for c in dataset.cases}
    assert {1, 3} <= lengths and max(lengths) >= 5


def test_dump_messages_is_pydantics_dump_of_every_sample_message() -> None:
    # Records are built with `dump_messages` instead of `model_dump`: the two must agree, and a
    # field added to Message must not be left out of records.
    assert set(Message.model_fields) == {"role", "content"}
    messages = [
        m
        for case in load_dataset(resources.sample_dataset()).cases
        for name in HISTORY_FIELDS
        for m in getattr(case, name)
    ]
    assert len(messages) > 50
    assert dump_messages(messages) == [m.model_dump() for m in messages]
    assert json.dumps(dump_messages(messages), ensure_ascii=False) == json.dumps(
        [m.model_dump() for m in messages], ensure_ascii=False
    )  # the same key order, so the same stored bytes
