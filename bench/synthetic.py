"""The bench's synthetic dataset: N x 432 cases in the real schema, written as a stream.

Histories of 1, 3, 5, 7 or 9 messages of 200-2,000 Chinese characters, cut as runs of whole
sentences from three generated texts (client narrative with facts, vague narrative, lawyer turns);
see bench/README.md.
"""

from __future__ import annotations

import bisect
import json
import random
from pathlib import Path
from typing import Any

_PEOPLE = ("王某", "李某", "张某", "刘某", "陈某", "杨某", "赵某", "黄某", "周某", "吴某", "某公司", "某物业公司")
_PLACES = ("北京市朝阳区", "上海市浦东新区", "广州市天河区", "杭州市西湖区", "成都市武侯区", "武汉市洪山区")
_THINGS = ("借款", "货款", "工资", "租金", "押金", "定金", "装修款", "医疗费", "误工费", "违约金", "赔偿款", "彩礼")

# Client narrative with concrete facts (dates, amounts, evidence): complete histories.
_FACT_SENTENCES = (
    "{y}年{m}月{d}日，我通过银行转账给{p}{a}万元，转账附言写的是“{t}”。",
    "当时{p}给我写了一张字据，写明{t}{a}万元，约定{m}个月内付清，上面有他的签名和手印。",
    "合同是在{place}签的，一式两份，我手里有一份原件，约定每月{d}日前支付{t}{b}元。",
    "到了{y}年{m}月，{p}开始拖欠，前后一共欠了{a}万元{t}，我手里有微信聊天记录可以证明。",
    "{p}在微信里亲口承认“欠你{a}万我记着”，说等手头宽裕了每个月还{b}元，但后来一分都没还。",
    "我在{place}的单位干了{m}年，每个月工资{b}元，单位一直没给我交社保，也没签书面劳动合同。",
    "事故发生在{y}年{m}月{d}日晚上，交警出具的责任认定书认定{p}负全部责任，我住院{d}天。",
    "住院期间花了医疗费{b}元，都有医院的正规发票，医生出具的诊断证明写着需要休息{m}个月。",
    "房子是{y}年买的，总价{a}万元，首付{b}元是我父母出的，房产证上写的是我们两个人的名字。",
    "我们{y}年登记结婚，{y2}年生了孩子，现在孩子{d}岁，一直跟着我生活，他每月只给{b}元抚养费。",
    "物业公司从{y}年{m}月起每月收物业费{b}元，可小区电梯坏了{d}个月都没人修，我有多次报修记录。",
    "{p}把车停在我家门口的消防通道上，挡了{m}个多月，我报过{d}次警，派出所都有出警记录。",
    "我持有公司{d}%的股权，{y}年{m}月把其中一半以{a}万元转给{p}，对方只付了{b}元就不再付了。",
    "保险合同是{y}年{m}月签的，保额{a}万元，出险后保险公司以告知义务为由拒赔，理赔通知书我保留着。",
    "对方{y}年{m}月{d}日发来的催款函里承认了尚欠{a}万元，这份函件的原件我一直保存着。",
    "除了转账记录，我还有{d}段通话录音，录音里{p}说得很清楚，钱是借的，到期一定还。",
)
# Client narrative without the decisive facts: underspecified histories.
_VAGUE_SENTENCES = (
    "我前几年借给{p}一笔钱，他一直拖着不还，我催了好多次他都找借口。",
    "当时大家关系好，也没想那么多，具体怎么约定的我现在也记不太清了。",
    "他一开始还回消息，说手头紧让我再等等，后来干脆就不理我了。",
    "我觉得他就是故意不还，这口气我咽不下去，想通过法律途径解决。",
    "单位那边一直说会处理，可拖了很久也没个结果，我也不知道该找谁。",
    "事情发生以后对方态度很差，一点赔偿的意思都没有，家里人都很着急。",
    "这件事拖得太久了，我现在每天都睡不好觉，只想尽快把问题解决。",
    "身边的朋友说这种情况打官司肯定能赢，但我心里还是没底。",
    "对方说我没有证据，可我觉得事情明明就是这样的，大家都知道。",
    "我们之间本来是亲戚，闹成这样我也很无奈，但总得有个说法。",
    "{p}那边现在看着过得也不差，就是不愿意给钱，我实在没办法了。",
    "之前也找人调解过一次，没谈拢，对方坚持说不欠我什么。",
)
# Lawyer turns: what the assistant messages of a history say.
_LAWYER_SENTENCES = (
    "您好，根据您的描述，这属于{t}相关的纠纷，我们需要先确认几个关键事实。",
    "请问当时双方有没有签订书面协议或者出具借条、收据之类的凭证？",
    "款项是通过什么方式交付的？如果是银行转账，请保留好转账记录和附言。",
    "对方是否以任何方式承认过这笔债务，比如短信、微信或者录音？",
    "依照法律规定，当事人对自己提出的主张，有责任提供证据加以证明。",
    "诉讼时效一般为三年，从您知道或者应当知道权利受到损害之日起计算。",
    "如果约定的利率超过合同成立时一年期贷款市场报价利率的四倍，超过部分法院不予支持。",
    "建议您先整理好全部证据材料，按时间顺序列一个清单，方便法院审查。",
    "另外，请问对方目前的住所地或者经营地在哪里？这关系到案件的管辖法院。",
    "您主张的各项费用，需要分别提供相应的票据或者计算依据。",
    "如果对方拒不履行生效判决，您还可以申请强制执行。",
    "请问您这边有没有证人能够证明当时的情况？证人是否愿意出庭作证？",
)
_CLAIMS = (
    "判令被告偿还{t}本金{a}万元",
    "判令被告按年利率{r}%支付自{y}年{m}月{d}日起至实际清偿之日止的利息",
    "判令被告支付违约金{b}元",
    "判令被告赔偿各项损失共计{b}元",
    "判令解除双方于{y}年{m}月{d}日签订的合同",
    "判令被告支付拖欠的{t}{b}元",
    "判令被告返还{t}{a}万元",
    "判令被告承担本案诉讼费用",
    "判令被告立即停止侵害并赔礼道歉",
    "判令被告支付精神损害抚慰金{b}元",
)
_FOCAL = (
    "{t}关系是否成立及数额",
    "利息或违约金的计算标准",
    "被告是否存在违约行为",
    "损失的范围和数额",
    "诉讼时效是否已经届满",
    "证据能否证明原告的主张",
    "责任应当如何分担",
)
_DETAILS = (
    "{y}年{m}月{d}日原告向{p}转账{a}万元，附言“{t}”",
    "{p}出具书面凭证一份，载明{t}{a}万元、期限{m}个月",
    "{p}于{y}年{m}月在微信中承认尚欠{a}万元",
    "双方约定每月{d}日前支付{b}元，{p}自{y}年{m}月起未再支付",
    "原告保存有{d}段录音及全部聊天记录原件",
    "交警认定{p}负事故全部责任，原告住院{d}天，花费医疗费{b}元",
)
VERDICTS = ("支持", "部分支持", "驳回")
PLAINTIFF_TYPES = ("自然人", "自然人", "自然人", "法人", "非法人组织")


def _fill(template: str, rng: random.Random) -> str:
    year = rng.randint(2015, 2023)
    return template.format(
        y=year,
        y2=year + rng.randint(1, 3),
        m=rng.randint(1, 12),
        d=rng.randint(1, 28),
        a=rng.randint(1, 300),
        b=rng.randint(500, 99_000),
        r=rng.choice((3.85, 6, 12, 15.4, 24)),
        p=rng.choice(_PEOPLE),
        t=rng.choice(_THINGS),
        place=rng.choice(_PLACES),
    )


class _Corpus:
    """A long text of filled sentences; a message is a run of whole sentences from a random start."""

    def __init__(self, templates: tuple[str, ...], rng: random.Random, chars: int = 120_000) -> None:
        parts, ends, total = [], [], 0
        while total < chars:
            sentence = _fill(rng.choice(templates), rng)
            parts.append(sentence)
            total += len(sentence)
            ends.append(total)
        self.text = "".join(parts)
        self.starts = [0, *ends[:-1]]

    def take(self, rng: random.Random, length: int) -> str:
        limit = bisect.bisect_left(self.starts, len(self.text) - length - 200)
        begin = self.starts[rng.randrange(max(1, limit))]
        end_idx = bisect.bisect_left(self.starts, begin + length)
        end = self.starts[end_idx] if end_idx < len(self.starts) else len(self.text)
        return self.text[begin:end]


def _history(rng: random.Random, n: int, user: _Corpus, lawyer: _Corpus) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": (user if i % 2 == 0 else lawyer).take(rng, rng.randint(200, 2000)),
        }
        for i in range(n)
    ]


def make_case(i: int, rng: random.Random, causes: list[str], corpora: dict[str, _Corpus]) -> dict[str, Any]:
    n_focal = rng.randint(1, 3)
    focal = [_fill(t, rng) for t in rng.sample(_FOCAL, n_focal)]
    shape = i % 3  # key_details in all three shapes
    if shape == 0:
        key_details: Any = "；".join(_fill(rng.choice(_DETAILS), rng) for _ in range(rng.randint(2, 4)))
    elif shape == 1:
        key_details = [_fill(rng.choice(_DETAILS), rng) for _ in range(rng.randint(2, 5))]
    else:
        key_details = {
            f: (
                _fill(rng.choice(_DETAILS), rng)
                if rng.random() < 0.4
                else [_fill(rng.choice(_DETAILS), rng) for _ in range(rng.randint(1, 3))]
            )
            for f in focal
        }
    claims = [_fill(t, rng) for t in rng.sample(_CLAIMS, rng.randint(2, 4))]
    n = rng.choice((1, 3, 5, 7, 9))  # odd: the history ends with the client's turn
    return {
        "case_number": f"（{2018 + i % 6}）京{i % 9000 + 100:04d}民初{10_000 + i}号",
        "cause_of_action": causes[i % len(causes)],
        "plaintiff_type": rng.choice(PLAINTIFF_TYPES),
        "focal_point": focal[0] if n_focal == 1 and rng.random() < 0.7 else focal,
        "key_details": key_details,
        "result_dict": {c: rng.choice(VERDICTS) for c in claims},
        "complete_history": _history(rng, n, corpora["facts"], corpora["lawyer"]),
        "underspecified_history": _history(rng, n, corpora["vague"], corpora["lawyer"]),
    }


def generate_dataset(path: Path, cases: int, seed: int = 0) -> None:
    """Write `cases` synthetic cases to `path`, streaming: never the whole dataset in memory."""
    from lexpilot_batch.data import load_categories

    causes = list(load_categories())  # every cause of the bundled mapping, in its order
    rng = random.Random(seed)
    corpora = {
        "facts": _Corpus(_FACT_SENTENCES, rng),
        "vague": _Corpus(_VAGUE_SENTENCES, rng),
        "lawyer": _Corpus(_LAWYER_SENTENCES, rng),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[\n")
        for i in range(cases):
            if i:
                fh.write(",\n")
            fh.write(json.dumps(make_case(i, rng, causes, corpora), ensure_ascii=False))
        fh.write("\n]\n")
