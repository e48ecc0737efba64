"""DCG: two forced clarification questions with a grounded User Model reply between them.

One thread per case, on the underspecified history. Only the two new questions are judged (the
questions already in the benchmark history are never evaluated), and both rounds are always
generated and judged, whatever round 1's decision: the record keeps both per-round decisions and
the case succeeds if either is 是.

    q1 (eval, force_ask on H)
     ├─ q1j (judge: H, q1, focal points, key details)
     └─ r1  (user: H + q1, grounded in the key details)
         └─ q2 (eval, force_ask on H + q1 + r1)
             └─ q2j (judge: H + q1 + r1, q2)

`q2` needs only `r1`, so it may be due while `q1j` is still pending. The chain q1 → r1 → q2 → q2j
is four waves, which is already the dependency limit: speculation has nothing to add here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.protocols.base import Advance, Answer, CaseContext, Protocol, Step
from lexpilot_batch.data import Message, dump_messages

Q1, Q1_JUDGE, R1, Q2, Q2_JUDGE = "dcg.q1", "dcg.q1j", "dcg.r1", "dcg.q2", "dcg.q2j"
ON_TARGET = "是"  # the judge's decision for a question that targets a focal point


def _judge_step(ctx: CaseContext, key: str, history: Sequence[Message], question: str) -> Step:
    case = ctx.case
    prompt = prompts.dcg_judge_prompt(history, question, case.focal_points, case.key_details, ctx.templates)
    return Step(key, "judge", prompt, "dcg_decision")


class DCG(Protocol):
    task = "dcg"
    stage = "dcg"

    def reads(self, variant: str) -> tuple[str, ...]:
        return ("dcg.",)

    def advance(self, ctx: CaseContext, variant: str, answers: Mapping[str, Answer]) -> Advance:
        case = ctx.case
        history = list(case.underspecified_history)
        q1 = answers.get(Q1)
        if q1 is None:
            prompt = prompts.force_ask_prompt(history, ctx.templates)
            return Advance(due=(Step(Q1, "eval", prompt, "text"),))

        after_q1 = [*history, Message(role="assistant", content=q1.text)]
        due: list[Step] = []
        q1_judge = answers.get(Q1_JUDGE)
        if q1_judge is None:
            due.append(_judge_step(ctx, Q1_JUDGE, history, q1.text))

        r1 = answers.get(R1)
        q2 = q2_judge = None
        if r1 is None:
            prompt = prompts.user_model_prompt(after_q1, case.focal_points, case.key_details, ctx.templates)
            due.append(Step(R1, "user", prompt, "text"))
        else:
            after_r1 = [*after_q1, Message(role="user", content=r1.text)]
            q2 = answers.get(Q2)
            if q2 is None:
                prompt = prompts.force_ask_prompt(after_r1, ctx.templates)
                due.append(Step(Q2, "eval", prompt, "text"))
            else:
                q2_judge = answers.get(Q2_JUDGE)
                if q2_judge is None:
                    due.append(_judge_step(ctx, Q2_JUDGE, after_r1, q2.text))

        if due:
            return Advance(due=tuple(due))
        assert q1_judge is not None and r1 is not None and q2 is not None and q2_judge is not None
        return Advance(
            record={
                "case_number": case.case_number,
                "history": dump_messages(history),
                "rounds": [
                    {"question": q1.text, "reply": r1.text, "decision": q1_judge.value},
                    {"question": q2.text, "decision": q2_judge.value},
                ],
                "success": ON_TARGET in (q1_judge.value, q2_judge.value),
            }
        )
