"""The case the protocols' tests drive (a loan dispute with three claims), and its context."""

from __future__ import annotations

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.protocols.base import CaseContext
from lexpilot_batch.data import Case, Message
from lexpilot_batch.data.schema import Verdict

CLAIMS: dict[str, Verdict] = {
    "判令被告偿还借款本金十万元": "支持",
    "判令被告支付逾期利息": "部分支持",
    "判令被告承担律师费": "驳回",
}


FOCAL_POINTS = ["借款合意及交付", "利息约定"]


LOAN_DETAILS = ["借条载明借款金额十万元并由张某签名", "款项通过银行转账于2021年3月1日交付"]


INTEREST_DETAIL = "借条约定年利率为百分之六且到期未还"


KEY_DETAILS: dict[str, str | list[str]] = {"借款合意及交付": LOAN_DETAILS, "利息约定": INTEREST_DETAIL}


def make_case(extra_pairs: int = 0) -> Case:
    """A 3-message history (plus `extra_pairs` pre-existing question/answer pairs)."""
    opening = "我在2021年借给朋友张某十万元，现在他一直不还。我想请求：" + "；".join(CLAIMS) + "。"
    underspecified = [
        {"role": "user", "content": opening},
        {"role": "assistant", "content": "请问您和张某之间有没有书面凭证？"},
        {"role": "user", "content": "有一张纸条，是他写的。"},
    ]
    complete = [
        {"role": "user", "content": opening + "钱是转账给他的。"},
        {"role": "assistant", "content": "请问您和张某之间有没有书面凭证？"},
        {"role": "user", "content": "有一张他亲笔签名的借条，写明一年后归还并按年息计算利息。"},
    ]
    for i in range(extra_pairs):
        for history in (underspecified, complete):
            history += [
                {"role": "assistant", "content": f"已有追问{i}：对方是否承认借款？"},
                {"role": "user", "content": f"已有回答{i}：他口头承认过。"},
            ]
    return Case(
        case_number=17,
        cause_of_action="民间借贷纠纷",
        plaintiff_type="自然人",
        focal_point=FOCAL_POINTS,
        key_details=KEY_DETAILS,
        result_dict=CLAIMS,
        complete_history=[Message.model_validate(m) for m in complete],
        underspecified_history=[Message.model_validate(m) for m in underspecified],
    )


def context(case: Case | None = None, speculate: bool = False, templates=None) -> CaseContext:
    return CaseContext(
        case=case or make_case(),
        templates=templates or prompts.DEFAULT_TEMPLATES,
        speculate=speculate,
    )
