"""LCA: one new LexAwN response after each history, and the judge's label for that response only.

Two threads per case, `c` (complete history) and `u` (underspecified history). The `u` steps are
also round 1 of Interaction-Based LJP, which reads them by the same keys.
"""

from __future__ import annotations

from collections.abc import Mapping

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.protocols.base import Advance, Answer, CaseContext, Protocol, Step
from lexpilot_batch.data import Case, Message, dump_messages

VARIANTS = {"c": "complete", "u": "underspecified"}


def history_of(case: Case, variant: str) -> list[Message]:
    return case.complete_history if variant == "c" else case.underspecified_history


def key_prefix(variant: str) -> str:
    return f"lca.{variant}."


def gen_key(variant: str) -> str:
    return key_prefix(variant) + "gen"


def cls_key(variant: str) -> str:
    return key_prefix(variant) + "cls"


def gen_step(ctx: CaseContext, variant: str) -> Step:
    history = history_of(ctx.case, variant)
    return Step(gen_key(variant), "eval", prompts.lexawn_prompt(history, ctx.templates), "text")


def cls_step(ctx: CaseContext, variant: str, response: str) -> Step:
    history = history_of(ctx.case, variant)
    prompt = prompts.lca_classify_prompt(history, response, ctx.templates)
    return Step(cls_key(variant), "judge", prompt, "lca_label")


class LCA(Protocol):
    task = "lca"
    stage = "lca"

    def reads(self, variant: str) -> tuple[str, ...]:
        return (key_prefix(variant),)

    def variants(self, case: Case) -> tuple[str, ...]:
        return tuple(VARIANTS)

    def advance(self, ctx: CaseContext, variant: str, answers: Mapping[str, Answer]) -> Advance:
        gen = answers.get(gen_key(variant))
        if gen is None:
            return Advance(due=(gen_step(ctx, variant),))
        label = answers.get(cls_key(variant))
        if label is None:
            return Advance(due=(cls_step(ctx, variant, gen.text),))
        return Advance(
            record={
                "case_number": ctx.case.case_number,
                "history_type": VARIANTS[variant],
                "history": dump_messages(history_of(ctx.case, variant)),
                "response": gen.text,
                "label": label.value,
            }
        )
