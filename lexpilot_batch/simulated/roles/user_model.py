"""The User Model: it answers an evaluated model's question with the key facts that share the most
content bigrams with it, in the first person, or says it does not know.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from lexpilot_batch.simulated.roles.reading import between, content_bigrams, frozen_bigrams, parse_history


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


def answer(prompt: str, rng: random.Random) -> str:
    turns = parse_history(prompt)
    question = next((c for role, c in reversed(turns) if role == "assistant"), "")
    wanted = content_bigrams(question)
    facts = _fact_sentences(between(prompt, "<关键事实>", "</关键事实>") or "")
    scored = [(len(wanted & frozen_bigrams(s)), i, s) for i, s in enumerate(facts)]
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
