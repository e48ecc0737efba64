"""Direct and Gold-Standard LJP: one dedicated direct prediction, then its claim-level verdicts.

Direct predicts from the underspecified history, Gold from the complete one; both use the same
direct-prediction prompt (`force_judge_prompt`) and each has its own generation key, so neither
ever reuses an LCA response. The extraction judge sees claim texts in `result_dict` order and the
response; the gold verdicts are joined only into the record. `extract_step` and `claim_rows` are
shared with Interaction-Based LJP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.protocols.base import Advance, Answer, CaseContext, Protocol, Step
from lexpilot_batch.data import Case, Message, dump_messages


def extract_step(ctx: CaseContext, key: str, response: str) -> Step:
    """The verdict extraction of `response`: claim texts only, never their gold verdicts."""
    claims = ctx.case.claims
    prompt = prompts.extract_verdicts_prompt(claims, response, ctx.templates)
    return Step(key, "judge", prompt, "verdicts", n_claims=len(claims))


def claim_rows(case: Case, predicted: Sequence[str]) -> list[dict[str, Any]]:
    """Each claim with its gold and predicted verdict, in `result_dict` order."""
    return [
        {"claim": claim, "gold": gold, "predicted": label}
        for (claim, gold), label in zip(case.result_dict.items(), predicted, strict=True)
    ]


class _DirectPrediction(Protocol):
    """A direct prediction on one history of the case, then its extraction."""

    prefix: str

    def history(self, case: Case) -> list[Message]:
        raise NotImplementedError

    def reads(self, variant: str) -> tuple[str, ...]:
        return (f"{self.prefix}.",)

    def advance(self, ctx: CaseContext, variant: str, answers: Mapping[str, Answer]) -> Advance:
        history = self.history(ctx.case)
        gen_key, ext_key = f"{self.prefix}.gen", f"{self.prefix}.ext"
        gen = answers.get(gen_key)
        if gen is None:
            prompt = prompts.force_judge_prompt(history, ctx.templates)
            return Advance(due=(Step(gen_key, "eval", prompt, "text"),))
        verdicts = answers.get(ext_key)
        if verdicts is None:
            return Advance(due=(extract_step(ctx, ext_key, gen.text),))
        return Advance(
            record={
                "case_number": ctx.case.case_number,
                "history": dump_messages(history),
                "response": gen.text,
                "claims": claim_rows(ctx.case, verdicts.value),
            }
        )


class DirectLJP(_DirectPrediction):
    """Underspecified history, no clarification, no hidden facts."""

    task = "ljp_direct"
    stage = "ljp-direct"
    prefix = "dir"

    def history(self, case: Case) -> list[Message]:
        return list(case.underspecified_history)


class GoldLJP(_DirectPrediction):
    """Complete history, a dedicated response (never an LCA one)."""

    task = "ljp_gold"
    stage = "ljp-gold"
    prefix = "gold"

    def history(self, case: Case) -> list[Message]:
        return list(case.complete_history)
