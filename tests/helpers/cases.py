"""A valid case of the dataset file, as its JSON holds it, for the tests that write dataset files."""

from __future__ import annotations

import copy
from typing import Any

HISTORY_3 = [
    {"role": "user", "content": "我借给朋友五万元，他一直不还。"},
    {"role": "assistant", "content": "请问有没有借条？约定的还款期限是什么时候？"},
    {"role": "user", "content": "有借条，约定去年十二月底还清。"},
]


def make_case(**overrides: Any) -> dict[str, Any]:
    """A valid case; keyword arguments replace (or, with value `...`, delete) its fields."""
    case: dict[str, Any] = {
        "case_number": 1001,
        "cause_of_action": "民间借贷纠纷",
        "plaintiff_type": "自然人",
        "focal_point": ["借贷关系是否成立", "利息如何计算"],
        "key_details": {"借贷关系是否成立": "有借条和转账记录。", "利息如何计算": ["约定年利率6%"]},
        "result_dict": {"判令被告偿还借款本金五万元": "支持", "判令被告支付利息": "部分支持"},
        "complete_history": copy.deepcopy(HISTORY_3),
        "underspecified_history": [
            {"role": "user", "content": "朋友借钱不还怎么办？"},
            {"role": "assistant", "content": "请问借款金额是多少？"},
            {"role": "user", "content": "五万元。"},
        ],
    }
    for key, value in overrides.items():
        if value is ...:
            case.pop(key, None)
        else:
            case[key] = value
    return case
