"""What the simulated roles read in a prompt: which role it is for, recognised from the prompt text,
never from the model name (the judge and User Model templates carry distinctive tags, `<待分类回复>`,
`<追问>`, `<关键事实>`, `<诉讼请求>`, and the three evaluated-model templates are told apart by their
fixed text around `{history}`), the history parsed back out of it, and the text features the
roles weigh: numbers, amounts, dates, legal topics and character bigrams.

Speed matters here: a batch of 10,800 prompts of ~6,000 characters is answered while the client
waits for `batches.create`. So each text feature is computed once per history message (a message
recurs in every run, task and wave of its case) and cached, and the patterns are written so that
the regex engine can skip to the first character a match can start with. Every answer stays
exactly what the plain definitions give; the tests compare the fast patterns with the readable
ones they stand for.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from functools import lru_cache

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.prompts import DEFAULT_TEMPLATES, Templates

GENERIC = "generic"
EVAL_KINDS = (prompts.LEXAWN, prompts.FORCE_ASK, prompts.FORCE_JUDGE)
JUDGE_KINDS = frozenset({prompts.LCA_CLASSIFY, prompts.DCG_JUDGE, prompts.EXTRACT_VERDICTS})

HISTORY_OPEN, HISTORY_CLOSE = "<对话历史>", "</对话历史>"

# What counts as a number, an amount and a date. The readable definitions are
#     NUMBER = r"\d+(?:[.,，]\d+)*|[一二两三四五六七八九十百千万]+(?:万|千|百)?元"
#     AMOUNT = r"\d+(?:\.\d+)?\s*(?:万元|万|元)"
#     DATE   = r"(?:\d{4}年)?\d{1,2}月(?:\d{1,2}日)?|\d{4}年"
# and the patterns below find exactly the same matches (tests/simulated/test_roles.py checks it)
# several times faster: each starts with one character class, which lets the regex engine skip
# the long stretches of text where no match can start instead of trying every position.
_CN_NUMERALS = "一二两三四五六七八九十百千万"
_NUMBER = re.compile(
    rf"[\d{_CN_NUMERALS}](?:(?<=\d)\d*(?:[.,，]\d+)*|(?<=[{_CN_NUMERALS}])[{_CN_NUMERALS}]*(?:万|千|百)?元)"
)
_AMOUNT = re.compile(r"\d\d*(?:\.\d+)?\s*(?:万元|万|元)")
_DATE = re.compile(r"\d(?:\d{3}年\d{1,2}月(?:\d{1,2}日)?|\d?月(?:\d{1,2}日)?|\d{3}年)")
# A message ending like this may start an amount that the next message of a joined text ends
# (AMOUNT's `\s*` can cross the newline between them).
_OPEN_END = re.compile(r"[\d\s]")  # matched against a text's last character
CN_DIGITS = "一二三四五六七八九十"
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
_DIGIT_RUN = re.compile(r"\d+")

# Legal objects the questioners look for in a history to aim a question at.
_TOPICS = (
    "借款",
    "借条",
    "欠条",
    "转账",
    "利息",
    "还款",
    "合同",
    "协议",
    "工资",
    "加班费",
    "社保",
    "劳动合同",
    "经济补偿",
    "辞退",
    "房屋",
    "房租",
    "租金",
    "押金",
    "装修",
    "车辆",
    "交通事故",
    "医疗费",
    "误工费",
    "伤残",
    "赔偿",
    "货款",
    "定金",
    "违约金",
    "彩礼",
    "抚养",
    "离婚",
    "财产",
    "遗产",
    "遗嘱",
    "股权",
    "保证",
    "担保",
    "物业费",
    "质量",
    "维修",
    "发票",
    "收据",
    "聊天记录",
    "快递",
    "网购",
    "退款",
    "保险",
    "贷款",
    "抵押",
    "宅基地",
    "土地",
    "承包",
)


def _can_hide(topic: str) -> bool:
    """Whether a scan for all topics at once can miss `topic` although the text holds it.

    The scan takes the leftmost match and goes on after it, so an occurrence of `topic` goes
    unseen only where it overlaps another topic's match: inside it, sharing its start, or
    starting in its last characters.
    """
    for other in _TOPICS:
        if other == topic:
            continue
        if topic in other or topic.startswith(other):
            return True
        if any(other[-k:] == topic[:k] for k in range(1, min(len(other), len(topic)))):
            return True
    return False


_TOPIC_SCAN = re.compile("|".join(map(re.escape, _TOPICS)))
_HIDDEN_TOPICS = tuple(t for t in _TOPICS if _can_hide(t))  # checked one by one

# Bigrams of everyday speech and of question frames: sharing them says nothing about a case.
_STOP_BIGRAMS = frozenset(
    [
        "请问",
        "您的",
        "是否",
        "对方",
        "有没",
        "没有",
        "多少",
        "具体",
        "什么",
        "时候",
        "哪些",
        "这个",
        "那个",
        "我们",
        "你们",
        "他们",
        "一下",
        "情况",
        "目前",
        "现在",
        "之前",
        "之后",
        "当时",
        "关于",
        "怎么",
        "怎样",
        "是怎",
        "样的",
        "的是",
        "已经",
        "一个",
        "问题",
        "事情",
        "以及",
        "或者",
        "还是",
        "比如",
        "提到",
        "这件",
        "件事",
        "么时",
        "需要",
        "知道",
        "了解",
        "确认",
        "可以",
        "能否",
        "能不",
        "不能",
        "如果",
        "因为",
        "所以",
        "但是",
        "时间",
        "之间",
        "一些",
        "相关",
        "方面",
    ]
)


# --- recognising the prompt ---------------------------------------------------------------------


def between(text: str, open_tag: str, close_tag: str) -> str | None:
    start = text.find(open_tag)
    if start < 0:
        return None
    start += len(open_tag)
    end = text.find(close_tag, start)
    return text[start:end].strip() if end >= 0 else None


def _without_history(prompt: str) -> str:
    """The prompt minus its history block, so that tags quoted by a party cannot mislead."""
    start, end = prompt.find(HISTORY_OPEN), prompt.find(HISTORY_CLOSE)
    if 0 <= start < end:
        return prompt[:start] + prompt[end + len(HISTORY_CLOSE) :]
    return prompt


def identify_kind(prompt: str, templates: Templates = DEFAULT_TEMPLATES) -> str:
    """Which role a prompt is for: a `prompts` template name, or `GENERIC`."""
    frame = _without_history(prompt)
    if "<待分类回复>" in frame:
        return prompts.LCA_CLASSIFY
    if "<追问>" in frame:
        return prompts.DCG_JUDGE
    if "<诉讼请求>" in frame:
        return prompts.EXTRACT_VERDICTS
    if "<关键事实>" in frame:
        return prompts.USER_MODEL
    # The three evaluated-model templates share their tags; only their fixed text differs.
    for match in (_matches_both, _matches_prefix, _matches_suffix):
        found = [k for k in EVAL_KINDS if match(prompt, templates[k])]
        if len(found) == 1:
            return found[0]
    return GENERIC


def _matches_both(prompt: str, template: str) -> bool:
    return _matches_prefix(prompt, template) and _matches_suffix(prompt, template)


@lru_cache(maxsize=64)
def _fixed_text(template: str) -> tuple[str, str]:
    """A template's fixed text before and after `{history}`, each '' when it is blank."""
    prefix, _, suffix = template.partition("{history}")
    return (prefix if prefix.strip() else ""), (suffix if suffix.strip() else "")


def _matches_prefix(prompt: str, template: str) -> bool:
    prefix = _fixed_text(template)[0]
    return bool(prefix) and prompt.startswith(prefix)


def _matches_suffix(prompt: str, template: str) -> bool:
    suffix = _fixed_text(template)[1]
    return bool(suffix) and prompt.endswith(suffix)


def parse_history(prompt: str) -> list[tuple[str, str]]:
    """The (role, content) turns rendered in the prompt's `<对话历史>` block."""
    block = between(prompt, HISTORY_OPEN, HISTORY_CLOSE) or ""
    turns: list[list[str]] = []
    for line in block.split("\n"):
        if line.startswith("User: "):
            turns.append(["user", line[len("User: ") :]])
        elif line.startswith("Assistant: "):
            turns.append(["assistant", line[len("Assistant: ") :]])
        elif turns:
            # A message spanning several lines continues the previous turn.
            turns[-1][1] += "\n" + line
    return [(role, content) for role, content in turns]


# --- text features ------------------------------------------------------------------------------

# Texts whose features are kept: history messages, questions, fact sentences. A message recurs in
# every run, task and wave of its case; a few thousand are live in one batch.
_CACHED_TEXTS = 8192


def bigrams(text: str) -> set[str]:
    """Character bigrams of every CJK run, plus every run of digits."""
    return set(frozen_bigrams(text))


@lru_cache(maxsize=_CACHED_TEXTS)
def frozen_bigrams(text: str) -> frozenset[str]:
    grams: set[str] = set()
    for run in _CJK_RUN.findall(text):
        grams.update(map(operator.add, run, run[1:]))  # run[i] + run[i + 1]
    grams.update(_DIGIT_RUN.findall(text))
    return frozenset(grams)


@lru_cache(maxsize=_CACHED_TEXTS)
def content_bigrams(text: str) -> frozenset[str]:
    return frozen_bigrams(text) - _STOP_BIGRAMS


@dataclass(frozen=True)
class _Features:
    """What the simulated models read in one history message."""

    facts: int  # NUMBER matches
    topics: frozenset[str]
    amounts: tuple[str, ...]  # AMOUNT matches, in order
    dates: tuple[str, ...]  # DATE matches, in order


@lru_cache(maxsize=_CACHED_TEXTS)
def _features(text: str) -> _Features:
    topics = set(_TOPIC_SCAN.findall(text))
    topics.update(t for t in _HIDDEN_TOPICS if t not in topics and t in text)
    return _Features(
        len(_NUMBER.findall(text)), frozenset(topics), tuple(_AMOUNT.findall(text)), tuple(_DATE.findall(text))
    )


# A history's texts are read as if joined by newlines ("\n".join(texts)). No topic and no DATE
# match holds a newline, so theirs are the union / concatenation of each text's own; an AMOUNT
# match can cross one only after a text that ends in a digit or a space.


def topics_in(texts: list[str]) -> list[str]:
    found: set[str] = set()
    for text in texts:
        found |= _features(text).topics
    return [t for t in _TOPICS if t in found]


def amounts_in(texts: list[str]) -> list[str]:
    if any(not text or _OPEN_END.fullmatch(text[-1]) for text in texts[:-1]):
        return _AMOUNT.findall("\n".join(texts))
    return [amount for text in texts for amount in _features(text).amounts]


def dates_in(texts: list[str]) -> list[str]:
    return [date for text in texts for date in _features(text).dates]


def count_facts(turns: list[tuple[str, str]]) -> int:
    """Concrete facts the client has given: numbers, amounts and dates in the user turns."""
    return sum(_features(content).facts for role, content in turns if role == "user")
