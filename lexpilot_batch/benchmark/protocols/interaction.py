"""Interaction-Based LJP: continue the underspecified consultation until a judgment, then extract.

Round 1 is the LCA underspecified response and its label (`lca.u.gen`, `lca.u.cls`, shared with
the LCA thread). After a clarification at round k the User Model replies (`int.rk`) and LexAwN
answers again (`int.a{k+1}`, labelled by `int.c{k+1}`), for up to three clarification rounds. A
judgment at round k ends the interaction at once and its response is the final one. If the third
response still asks, the third reply is obtained and the direct-prediction prompt is applied to
the accumulated history (`int.fin`). So at most four new assistant responses (a1, a2, a3, fin);
the turns already in the benchmark history are outside that budget. Verdicts are extracted from
the final new response only (`int.ext`).

Without speculation the chain is gen, cls, r1, a2, c2, r2, a3, c3, r3, fin, ext: 11 waves. With
`ctx.speculate` the reply to a response is due together with that response's classification
(8 waves); when the label is a judgment that reply is reported in `Advance.unused` and never read,
so records are the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.protocols import lca
from lexpilot_batch.benchmark.protocols.base import Advance, Answer, CaseContext, Protocol, Step
from lexpilot_batch.benchmark.protocols.ljp import claim_rows, extract_step
from lexpilot_batch.data import Message, dump_messages

MAX_ROUNDS = 3  # clarification rounds; the fourth new response is the forced final prediction
FINAL, EXTRACT = "int.fin", "int.ext"
FORCED_FINAL = "forced_final_prediction"
# Every stop reason a record can carry, in the order of the new responses it took (1 to 4).
STOP_REASONS = (*(f"judgment_round_{k}" for k in range(1, MAX_ROUNDS + 1)), FORCED_FINAL)


def response_key(k: int) -> str:
    return lca.gen_key("u") if k == 1 else f"int.a{k}"


def label_key(k: int) -> str:
    return lca.cls_key("u") if k == 1 else f"int.c{k}"


def reply_key(k: int) -> str:
    return f"int.r{k}"


def _reply_step(ctx: CaseContext, k: int, history: list[Message]) -> Step:
    """The User Model's reply to round k's response (`history` ends with it).

    Built only when due: the prompt renders the whole history, and earlier rounds' replies are
    already answered every time the thread is advanced again.
    """
    case = ctx.case
    prompt = prompts.user_model_prompt(history, case.focal_points, case.key_details, ctx.templates)
    return Step(reply_key(k), "user", prompt, "text")


class InteractionLJP(Protocol):
    task = "ljp_interaction"
    stage = "ljp-interaction"

    def reads(self, variant: str) -> tuple[str, ...]:
        # Round 1 is LCA's underspecified step, under LCA's keys.
        return (lca.key_prefix("u"), "int.")

    def advance(self, ctx: CaseContext, variant: str, answers: Mapping[str, Answer]) -> Advance:
        case = ctx.case
        history = list(case.underspecified_history)
        rounds: list[dict[str, Any]] = []
        for k in range(1, MAX_ROUNDS + 1):
            response = answers.get(response_key(k))
            if response is None:
                if k == 1:
                    return Advance(due=(lca.gen_step(ctx, "u"),))
                prompt = prompts.lexawn_prompt(history, ctx.templates)
                return Advance(due=(Step(response_key(k), "eval", prompt, "text"),))

            before = history
            history = [*before, Message(role="assistant", content=response.text)]
            label = answers.get(label_key(k))
            if label is None:
                if k == 1:
                    due = [lca.cls_step(ctx, "u", response.text)]
                else:
                    prompt = prompts.lca_classify_prompt(before, response.text, ctx.templates)
                    due = [Step(label_key(k), "judge", prompt, "lca_label")]
                if ctx.speculate and reply_key(k) not in answers:
                    due.append(_reply_step(ctx, k, history))
                return Advance(due=tuple(due))

            if label.value == "judgment":
                rounds.append({"round": k, "response": response.text, "label": label.value})
                # Under speculation the reply was requested with this label: it is never read.
                speculative = ctx.speculate or reply_key(k) in answers
                unused = frozenset({reply_key(k)}) if speculative else frozenset()
                return self._finish(ctx, answers, history, rounds, STOP_REASONS[k - 1], response.text, unused)

            reply = answers.get(reply_key(k))
            if reply is None:
                return Advance(due=(_reply_step(ctx, k, history),))
            rounds.append({"round": k, "response": response.text, "label": label.value, "reply": reply.text})
            history = [*history, Message(role="user", content=reply.text)]

        final = answers.get(FINAL)
        if final is None:
            prompt = prompts.force_judge_prompt(history, ctx.templates)
            return Advance(due=(Step(FINAL, "eval", prompt, "text"),))
        history = [*history, Message(role="assistant", content=final.text)]
        return self._finish(ctx, answers, history, rounds, FORCED_FINAL, final.text, frozenset())

    def _finish(
        self,
        ctx: CaseContext,
        answers: Mapping[str, Answer],
        continued: list[Message],
        rounds: list[dict[str, Any]],
        stop_reason: str,
        final_response: str,
        unused: frozenset[str],
    ) -> Advance:
        verdicts = answers.get(EXTRACT)
        if verdicts is None:
            return Advance(due=(extract_step(ctx, EXTRACT, final_response),), unused=unused)
        case = ctx.case
        return Advance(
            record={
                "case_number": case.case_number,
                "history": dump_messages(case.underspecified_history),
                "continued_history": dump_messages(continued),
                "rounds": rounds,
                "stop_reason": stop_reason,
                "final_response": final_response,
                "response": final_response,
                "claims": claim_rows(case, verdicts.value),
            },
            unused=unused,
        )
