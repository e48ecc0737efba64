"""A simulated role's answer to one prompt: the role recognised (`reading`), then the evaluated
model's, the User Model's or a judge's answer, drawn from a `random.Random` seeded by the seed,
the request's sample key and the prompt, so that every answer is a pure function of them.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.prompts import DEFAULT_TEMPLATES, Templates
from lexpilot_batch.simulated.roles import evaluated, judges, user_model
from lexpilot_batch.simulated.roles.reading import HISTORY_OPEN, between, identify_kind, parse_history


@dataclass(frozen=True)
class Reply:
    """A simulated answer: the role recognised, the message content, and optional thinking."""

    kind: str
    content: str
    reasoning: str | None = None


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
        return Reply(kind, evaluated.lexawn(prompt, rng))
    if kind == prompts.FORCE_ASK:
        return Reply(kind, evaluated.question(parse_history(prompt), rng, 0.6))
    if kind == prompts.FORCE_JUDGE:
        turns = parse_history(prompt)
        return Reply(kind, evaluated.judgment(turns, rng, "根据对话中目前提供的事实，逐项判断如下："))
    if kind == prompts.USER_MODEL:
        return Reply(kind, user_model.answer(prompt, rng))
    if kind == prompts.LCA_CLASSIFY:
        response = between(prompt, "<待分类回复>", "</待分类回复>") or ""
        label = "clarification" if judges.is_question(response) else "judgment"
        return Reply(kind, *judges.judge_answer({"label": label}, rng))
    if kind == prompts.DCG_JUDGE:
        return Reply(kind, *judges.judge_answer({"decision": judges.dcg_decision(prompt)}, rng))
    if kind == prompts.EXTRACT_VERDICTS:
        n = judges.count_claims(between(prompt, "<诉讼请求>", "</诉讼请求>") or "")
        labels = judges.extract_labels(between(prompt, "<回复>", "</回复>") or "", n, rng)
        return Reply(kind, *judges.judge_answer({"verdicts": labels}, rng))
    # Unknown prompt: a lawyer's reply, asking or judging like the LexAwN model when a history is
    # there to read, otherwise a request for the facts.
    if HISTORY_OPEN in prompt:
        return Reply(kind, evaluated.lexawn(prompt, rng))
    return Reply(kind, "您好，我是律师。请您详细说明案件的经过，包括时间、金额以及双方的约定。")
