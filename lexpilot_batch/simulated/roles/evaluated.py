"""The evaluated model: under LexAwN it asks or judges, judging more often the more concrete facts
the history holds, so that User Model replies push a consultation towards a judgment; forced to
ask, it asks, its question sometimes on target and sometimes not; forced to judge, it judges claim
by claim.
"""

from __future__ import annotations

import math
import random

from lexpilot_batch.data import VERDICTS
from lexpilot_batch.simulated.roles.reading import (
    CN_DIGITS,
    amounts_in,
    count_facts,
    dates_in,
    parse_history,
    topics_in,
)

# How the LexAwN model weighs concreteness: P(judge) = sigmoid(JUDGE_BIAS + JUDGE_PER_LOG_FACT *
# ln(1 + facts) + JUDGE_PER_USER_TURN * (user turns - 1)). Tuned on data/sample_cases.json: about
# 63% judgments after complete and 33% after underspecified histories, and a continued
# consultation ends at round 1, 2 or 3, or still asks at round 3, in roughly 33/29/18/20%.
JUDGE_BIAS = -2.8
JUDGE_PER_LOG_FACT = 1.2
JUDGE_PER_USER_TURN = 0.1


def judge_probability(turns: list[tuple[str, str]]) -> float:
    """How likely the LexAwN model is to judge rather than ask, given the history."""
    user_turns = sum(1 for role, _ in turns if role == "user")
    # The log: the first few facts matter most; a long complete history is not a certainty.
    score = (
        JUDGE_BIAS + JUDGE_PER_LOG_FACT * math.log1p(count_facts(turns)) + JUDGE_PER_USER_TURN * max(user_turns - 1, 0)
    )
    return 1.0 / (1.0 + math.exp(-score))


def question(turns: list[tuple[str, str]], rng: random.Random, on_target: float) -> str:
    """One question ending in "？": aimed at the history's amounts, dates or objects, or not."""
    said = [content for _, content in turns]
    topics, amounts, dates = topics_in(said), amounts_in(said), dates_in(said)
    if rng.random() < on_target and (topics or amounts or dates):
        options: list[str] = []
        for topic in topics:
            options += [
                f"请问关于{topic}，具体的金额和时间是怎样的，有没有书面凭证？",
                f"请问{topic}这件事发生的具体时间是什么时候，对方当时是怎么承诺的？",
                f"请问您手上有没有能证明{topic}的材料，比如合同、收据或聊天记录？",
                f"请问对方对{topic}有没有提出过异议，或者已经部分履行了？",
            ]
        options += [f"请问您提到的{a.strip()}，对方目前已经归还或支付了多少？" for a in amounts]
        options += [f"请问{d}之后，对方有没有再向您付款或者作出过书面承诺？" for d in dates]
        return rng.choice(options)
    return rng.choice(
        (
            "请问您目前最希望通过这次咨询解决什么问题？",
            "请问您之前有没有咨询过其他律师？",
            "请问您现在居住在哪个城市？",
            "请问您平时工作忙不忙，方便出庭吗？",
            "请问您希望尽快起诉，还是先尝试和解？",
        )
    )


def judgment(turns: list[tuple[str, str]], rng: random.Random, opener: str) -> str:
    """A claim-by-claim judgment that states 支持 / 部分支持 / 驳回 for each item it covers."""
    said = [content for role, content in turns if role == "user"]
    topic = rng.choice(topics_in(said) or ["相关事实"])
    items = rng.randint(1, 3) + (1 if count_facts(turns) >= 4 else 0)
    reasons = {
        "支持": (
            f"您提供的{topic}相关事实较为清楚，且有证据可以印证",
            "对方的义务有明确约定，且已届履行期限",
            "该项请求有事实和法律依据",
        ),
        "部分支持": (
            f"{topic}的事实基本成立，但主张的数额偏高",
            "双方对损失的发生均有一定过错",
            "部分主张缺乏充分证据，法院会酌情调整",
        ),
        "驳回": (
            "现有证据不足以证明该项主张",
            "该项请求超出了法律规定的范围",
            "该项主张已过诉讼时效，且无中断事由",
        ),
    }
    lines = [opener]
    for i in range(items):
        label = rng.choices(VERDICTS, weights=(0.45, 0.3, 0.25))[0]
        lines.append(f"{i + 1}. 第{CN_DIGITS[i]}项请求：{rng.choice(reasons[label])}，结论：{label}。")
    lines.append(f"建议您整理好与{topic}有关的证据材料，依法主张权利。")
    return "\n".join(lines)


def lexawn(prompt: str, rng: random.Random) -> str:
    turns = parse_history(prompt)
    if rng.random() < judge_probability(turns):
        return judgment(turns, rng, "根据您目前提供的情况，我的分析如下：")
    opener = rng.choice(("您好，感谢您的说明。", "明白了。", "了解您的情况。"))
    return f"{opener}在给出判断之前，我还需要确认一个关键问题：{question(turns, rng, 0.8)}"
