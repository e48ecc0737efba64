"""The simulated models: what each benchmark role answers, decided by the prompt it receives.

The role is recognised from the prompt text, never from the model name: the judge and User Model
templates carry distinctive tags (`<待分类回复>`, `<追问>`, `<关键事实>`, `<诉讼请求>`), and the
three evaluated-model templates are told apart by their fixed text around `{history}`. Slots are
parsed back out of the prompt. Every answer is a pure function of (seed, prompt): a `random.Random`
seeded from `sha256(f"{seed}|{prompt}")` makes each draw.

The behaviours are built to exercise every branch of the benchmark: the evaluated model asks or
judges (judging more often the more concrete facts the history holds, so that User Model replies
push a consultation towards a judgment), forced questions are sometimes on target and sometimes
not, and the judges answer consistently with what they are shown in every format that
`lexpilot_batch.benchmark.judges` accepts.

Speed matters here: a batch of 10,800 prompts of ~6,000 characters is answered while the client
waits for `batches.create`. So each text feature is computed once per history message (a message
recurs in every run, task and wave of its case) and cached, the patterns are written so that the
regex engine can skip to the first character a match can start with, and the prompt is encoded
once for its three hashes. Every answer stays exactly what the plain definitions give; the tests
compare the fast patterns with the readable ones they stand for.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import random
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.prompts import DEFAULT_TEMPLATES, Templates
from lexpilot_batch.data import VERDICTS

GENERIC = "generic"
EVAL_KINDS = (prompts.LEXAWN, prompts.FORCE_ASK, prompts.FORCE_JUDGE)
JUDGE_KINDS = frozenset({prompts.LCA_CLASSIFY, prompts.DCG_JUDGE, prompts.EXTRACT_VERDICTS})

# How the LexAwN model weighs concreteness: P(judge) = sigmoid(JUDGE_BIAS + JUDGE_PER_LOG_FACT *
# ln(1 + facts) + JUDGE_PER_USER_TURN * (user turns - 1)). Tuned on data/sample_cases.json: about
# 63% judgments after complete and 33% after underspecified histories, and a continued
# consultation ends at round 1, 2 or 3, or still asks at round 3, in roughly 33/29/18/20%.
JUDGE_BIAS = -2.8
JUDGE_PER_LOG_FACT = 1.2
JUDGE_PER_USER_TURN = 0.1

# The DCG judge says 是 when the question shares at least this many content bigrams with the
# focal points and key details.
DCG_MIN_OVERLAP = 2

_HISTORY_OPEN, _HISTORY_CLOSE = "<对话历史>", "</对话历史>"

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
_LABEL = re.compile(r"部分支持|不予支持|不支持|驳回|支持")
_ITEM = re.compile(r"第([一二三四五六七八九十]|\d+)项")
_CN_DIGITS = "一二三四五六七八九十"
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]+")
_DIGIT_RUN = re.compile(r"\d+")
_dumps = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(obj, ensure_ascii=False)

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


@dataclass(frozen=True)
class Reply:
    """A simulated answer: the role recognised, the message content, and optional thinking."""

    kind: str
    content: str
    reasoning: str | None = None


# --- recognising the prompt ---------------------------------------------------------------------


def _between(text: str, open_tag: str, close_tag: str) -> str | None:
    start = text.find(open_tag)
    if start < 0:
        return None
    start += len(open_tag)
    end = text.find(close_tag, start)
    return text[start:end].strip() if end >= 0 else None


def _without_history(prompt: str) -> str:
    """The prompt minus its history block, so that tags quoted by a party cannot mislead."""
    start, end = prompt.find(_HISTORY_OPEN), prompt.find(_HISTORY_CLOSE)
    if 0 <= start < end:
        return prompt[:start] + prompt[end + len(_HISTORY_CLOSE) :]
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
    block = _between(prompt, _HISTORY_OPEN, _HISTORY_CLOSE) or ""
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
    return set(_bigrams(text))


@lru_cache(maxsize=_CACHED_TEXTS)
def _bigrams(text: str) -> frozenset[str]:
    grams: set[str] = set()
    for run in _CJK_RUN.findall(text):
        grams.update(map(operator.add, run, run[1:]))  # run[i] + run[i + 1]
    grams.update(_DIGIT_RUN.findall(text))
    return frozenset(grams)


@lru_cache(maxsize=_CACHED_TEXTS)
def _content_bigrams(text: str) -> frozenset[str]:
    return _bigrams(text) - _STOP_BIGRAMS


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


def _topics_among(texts: list[str]) -> list[str]:
    found: set[str] = set()
    for text in texts:
        found |= _features(text).topics
    return [t for t in _TOPICS if t in found]


def _amounts(texts: list[str]) -> list[str]:
    if any(not text or _OPEN_END.fullmatch(text[-1]) for text in texts[:-1]):
        return _AMOUNT.findall("\n".join(texts))
    return [amount for text in texts for amount in _features(text).amounts]


def _dates(texts: list[str]) -> list[str]:
    return [date for text in texts for date in _features(text).dates]


def count_facts(turns: list[tuple[str, str]]) -> int:
    """Concrete facts the client has given: numbers, amounts and dates in the user turns."""
    return sum(_features(content).facts for role, content in turns if role == "user")


def judge_probability(turns: list[tuple[str, str]]) -> float:
    """How likely the LexAwN model is to judge rather than ask, given the history."""
    user_turns = sum(1 for role, _ in turns if role == "user")
    # The log: the first few facts matter most; a long complete history is not a certainty.
    score = (
        JUDGE_BIAS + JUDGE_PER_LOG_FACT * math.log1p(count_facts(turns)) + JUDGE_PER_USER_TURN * max(user_turns - 1, 0)
    )
    return 1.0 / (1.0 + math.exp(-score))


def is_question(response: str) -> bool:
    """Whether a response asks the client something: what the LCA classifier checks."""
    text = response.strip()
    return text.endswith(("？", "?")) or "请问" in text or "？" in text[-60:]


# --- the evaluated model ------------------------------------------------------------------------


def _question(turns: list[tuple[str, str]], rng: random.Random, on_target: float) -> str:
    """One question ending in "？": aimed at the history's amounts, dates or objects, or not."""
    said = [content for _, content in turns]
    topics, amounts, dates = _topics_among(said), _amounts(said), _dates(said)
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


def _judgment(turns: list[tuple[str, str]], rng: random.Random, opener: str) -> str:
    """A claim-by-claim judgment that states 支持 / 部分支持 / 驳回 for each item it covers."""
    said = [content for role, content in turns if role == "user"]
    topic = rng.choice(_topics_among(said) or ["相关事实"])
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
        lines.append(f"{i + 1}. 第{_CN_DIGITS[i]}项请求：{rng.choice(reasons[label])}，结论：{label}。")
    lines.append(f"建议您整理好与{topic}有关的证据材料，依法主张权利。")
    return "\n".join(lines)


def _lexawn(prompt: str, rng: random.Random) -> str:
    turns = parse_history(prompt)
    if rng.random() < judge_probability(turns):
        return _judgment(turns, rng, "根据您目前提供的情况，我的分析如下：")
    opener = rng.choice(("您好，感谢您的说明。", "明白了。", "了解您的情况。"))
    return f"{opener}在给出判断之前，我还需要确认一个关键问题：{_question(turns, rng, 0.8)}"


# --- the User Model -----------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _fact_sentences(details: str) -> tuple[str, ...]:
    sentences: list[str] = []
    for line in details.split("\n"):
        line = line.strip().removeprefix("- ").strip()
        if not line or (line.startswith("【") and line.endswith("】")):
            continue  # a focal-point heading, not a fact
        sentences += [s.strip() for s in re.split(r"[。；;]", line) if s.strip()]
    return tuple(sentences)


def _first_person(sentence: str) -> str:
    return sentence.replace("原、被告", "我们双方").replace("原告", "我").replace("被告", "对方")


def _user_model(prompt: str, rng: random.Random) -> str:
    turns = parse_history(prompt)
    question = next((c for role, c in reversed(turns) if role == "assistant"), "")
    wanted = _content_bigrams(question)
    facts = _fact_sentences(_between(prompt, "<关键事实>", "</关键事实>") or "")
    scored = [(len(wanted & _bigrams(s)), i, s) for i, s in enumerate(facts)]
    best = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], x[1]))[:2]
    if not best:
        return rng.choice(
            (
                "这个问题我不太清楚，手头也没有相关的材料。",
                "这个我真的记不清了，也没有留下什么凭证。",
            )
        )
    answer = "；".join(_first_person(s) for _, _, s in sorted(best, key=lambda x: x[1]))
    return f"{rng.choice(('律师您好，', '好的，', '是这样的，'))}关于您问的情况：{answer}。"


# --- the judges ---------------------------------------------------------------------------------


def _dcg_decision(prompt: str) -> str:
    question = _between(prompt, "<追问>", "</追问>") or ""
    known = (_between(prompt, "<争议焦点>", "</争议焦点>") or "") + (
        _between(prompt, "<关键事实>", "</关键事实>") or ""
    )
    return "是" if len(_content_bigrams(question) & _bigrams(known)) >= DCG_MIN_OVERLAP else "否"


def count_claims(claims_block: str) -> int:
    lines = [line for line in claims_block.split("\n") if line.strip()]
    numbered = [line for line in lines if re.match(r"\s*\d+\s*[.、．]", line)]
    return len(numbered) or len(lines)


def _normalise(label: str) -> str:
    return "驳回" if label in ("不予支持", "不支持") else label


def extract_labels(response: str, n_claims: int, rng: random.Random) -> list[str]:
    """One label per claim: the item's own conclusion when the response numbers its items,
    else the conclusions in order of mention, else the response's overall tendency."""
    by_item: dict[int, str] = {}
    for line in re.split(r"[\n。]", response):
        item, label = _ITEM.search(line), _LABEL.search(line)
        if item and label:
            raw = item.group(1)
            index = int(raw) if raw.isdigit() else _CN_DIGITS.index(raw) + 1
            by_item.setdefault(index, _normalise(label.group(0)))
    in_order = [_normalise(m) for m in _LABEL.findall(response)]
    mentioned = list(by_item.values()) or in_order
    tendency = Counter(mentioned).most_common(1)[0][0] if mentioned else rng.choice(VERDICTS)
    labels = []
    for i in range(1, n_claims + 1):
        if by_item:
            labels.append(by_item.get(i, tendency))
        else:
            labels.append(in_order[i - 1] if i <= len(in_order) else tendency)
    return labels


def _judge_answer(obj: dict, rng: random.Random) -> tuple[str, str | None]:
    """The JSON answer, sometimes fenced or after a `<think>` block, as reasoning models do."""
    text = _dumps(obj)
    thinking = "让我逐条对照材料进行分析。"
    roll = rng.random()
    if roll < 0.15:
        return f"```json\n{text}\n```", None
    if roll < 0.3:
        return f"<think>\n{thinking}\n</think>\n\n{text}", None
    if roll < 0.5:
        return text, thinking  # DeepSeek-style `reasoning_content`
    return text, None


def malformed_judge(kind: str, prompt: str, rng: random.Random) -> str:
    """A judge answer that `lexpilot_batch.benchmark.judges` must reject."""
    if kind == prompts.LCA_CLASSIFY:
        wrong_value, key = '{"label": "direct_judgment"}', '{"label": "judg'
    elif kind == prompts.DCG_JUDGE:
        wrong_value, key = '{"decision": "yes"}', '{"decision": "'
    else:
        n = count_claims(_between(prompt, "<诉讼请求>", "</诉讼请求>") or "")
        wrong_value = json.dumps({"verdicts": ["支持"] * (n + 1)}, ensure_ascii=False)
        key = '{"verdicts": ["支持", "驳'
    return rng.choice(
        (
            wrong_value,  # wrong value or wrong count
            key,  # cut off mid-JSON
            '{"result": "ok"}',  # the wrong key
            "我认为这个问题需要结合全案事实综合判断。",  # prose, no JSON at all
            "<think>\n先分析一下这条回复的性质……",  # thinking never closed
        )
    )


# --- entry point --------------------------------------------------------------------------------


def rng_for(seed: int, prompt: str) -> random.Random:
    return rng_from(f"{seed}|", prompt.encode("utf-8"))


def rng_from(head: str, encoded: bytes) -> random.Random:
    """`rng_for` of a text given as `head` + the UTF-8 bytes of the rest: a long prompt is
    encoded once for all the draws and ids that hash it."""
    digest = hashlib.sha256(head.encode("utf-8"))
    digest.update(encoded)
    return random.Random(int.from_bytes(digest.digest()[:16], "big"))


def respond(
    prompt: str,
    seed: int,
    templates: Templates = DEFAULT_TEMPLATES,
    *,
    sample: str = "",
    encoded: bytes | None = None,
) -> Reply:
    """The simulated answer to one prompt; the same (seed, sample, prompt) always gives the same answer.

    `sample` is what makes two requests with the same prompt draw independently, as a model at a
    non-zero temperature would: a batch line's custom_id (so independent runs of a benchmark differ
    and a retry is a fresh draw, while a rerun of the same request is identical). `encoded` is the
    prompt's UTF-8 bytes when the caller has them already.
    """
    kind = identify_kind(prompt, templates)
    encoded = prompt.encode("utf-8") if encoded is None else encoded
    rng = rng_from(f"{seed}|{sample}|" if sample else f"{seed}|", encoded)
    if kind == prompts.LEXAWN:
        return Reply(kind, _lexawn(prompt, rng))
    if kind == prompts.FORCE_ASK:
        return Reply(kind, _question(parse_history(prompt), rng, 0.6))
    if kind == prompts.FORCE_JUDGE:
        turns = parse_history(prompt)
        return Reply(kind, _judgment(turns, rng, "根据对话中目前提供的事实，逐项判断如下："))
    if kind == prompts.USER_MODEL:
        return Reply(kind, _user_model(prompt, rng))
    if kind == prompts.LCA_CLASSIFY:
        response = _between(prompt, "<待分类回复>", "</待分类回复>") or ""
        label = "clarification" if is_question(response) else "judgment"
        return Reply(kind, *_judge_answer({"label": label}, rng))
    if kind == prompts.DCG_JUDGE:
        return Reply(kind, *_judge_answer({"decision": _dcg_decision(prompt)}, rng))
    if kind == prompts.EXTRACT_VERDICTS:
        n = count_claims(_between(prompt, "<诉讼请求>", "</诉讼请求>") or "")
        labels = extract_labels(_between(prompt, "<回复>", "</回复>") or "", n, rng)
        return Reply(kind, *_judge_answer({"verdicts": labels}, rng))
    # Unknown prompt: a lawyer's reply, asking or judging like the LexAwN model when a history is
    # there to read, otherwise a request for the facts.
    if _HISTORY_OPEN in prompt:
        return Reply(kind, _lexawn(prompt, rng))
    return Reply(kind, "您好，我是律师。请您详细说明案件的经过，包括时间、金额以及双方的约定。")
