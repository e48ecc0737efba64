"""The judges, answering consistently with what they are shown in every format that
`lexpilot_batch.benchmark.judges` accepts (sometimes fenced, or after a `<think>` block): the LCA
classifier (is the response a question?), the DCG judge (does the question aim at the focal points
and key details?) and the verdict extractor (one label per claim); and judge output that
`benchmark.judges` must reject, for the `malformed_judge` fault.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.data import VERDICTS
from lexpilot_batch.simulated.roles.reading import CN_DIGITS, between, content_bigrams, frozen_bigrams

# The DCG judge says 是 when the question shares at least this many content bigrams with the
# focal points and key details.
DCG_MIN_OVERLAP = 2

_LABEL = re.compile(r"部分支持|不予支持|不支持|驳回|支持")
_ITEM = re.compile(r"第([一二三四五六七八九十]|\d+)项")
_dumps = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(obj, ensure_ascii=False)


def is_question(response: str) -> bool:
    """Whether a response asks the client something: what the LCA classifier checks."""
    text = response.strip()
    return text.endswith(("？", "?")) or "请问" in text or "？" in text[-60:]


def dcg_decision(prompt: str) -> str:
    question = between(prompt, "<追问>", "</追问>") or ""
    known = (between(prompt, "<争议焦点>", "</争议焦点>") or "") + (between(prompt, "<关键事实>", "</关键事实>") or "")
    return "是" if len(content_bigrams(question) & frozen_bigrams(known)) >= DCG_MIN_OVERLAP else "否"


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
            index = int(raw) if raw.isdigit() else CN_DIGITS.index(raw) + 1
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


def judge_answer(obj: dict, rng: random.Random) -> tuple[str, str | None]:
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
        n = count_claims(between(prompt, "<诉讼请求>", "</诉讼请求>") or "")
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
