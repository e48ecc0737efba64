"""The per-case state machines: steps, dependencies, records, isolation, speculation, wave depth.

A tiny driver stands in for the engine: each wave it advances every thread, requests every due
step that has no answer (shared keys once), answers all of them with scripted fake answers, and
counts waves. Text answers are unique markers (`〈key〉`), so prompts can be checked for exactly
which messages they hold, and in what order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.protocols import PROTOCOLS, STAGES
from lexpilot_batch.benchmark.protocols.base import Advance, Answer, CaseContext, Protocol, Step
from lexpilot_batch.benchmark.protocols.dcg import DCG
from lexpilot_batch.benchmark.protocols.interaction import InteractionLJP
from lexpilot_batch.benchmark.protocols.lca import LCA
from lexpilot_batch.benchmark.protocols.ljp import DirectLJP, GoldLJP
from lexpilot_batch.data import Case, Message
from tests.helpers.protocol_cases import (
    CLAIMS,
    FOCAL_POINTS,
    INTEREST_DETAIL,
    KEY_DETAILS,
    LOAN_DETAILS,
    context,
    make_case,
)

PREDICTED = ["部分支持", "驳回", "支持"]  # deliberately unlike the gold labels
KEY_SENTENCES = [*LOAN_DETAILS, INTEREST_DETAIL]


def marker(key: str) -> str:
    return f"〈{key}〉"


def text(key: str) -> Answer:
    return Answer(marker(key), marker(key))


def asst(key: str) -> Message:
    return Message(role="assistant", content=marker(key))


def user(key: str) -> Message:
    return Message(role="user", content=marker(key))


@dataclass
class Script:
    """Scripted judge answers by step key; every text step answers with its marker."""

    labels: dict[str, str] = field(default_factory=dict)
    decisions: dict[str, str] = field(default_factory=dict)
    verdicts: list[str] = field(default_factory=lambda: list(PREDICTED))

    def answer(self, step: Step) -> Answer:
        if step.parser == "text":
            return text(step.key)
        if step.parser == "lca_label":
            label = self.labels.get(step.key, "clarification")
            return Answer(json.dumps({"label": label}), label)
        if step.parser == "dcg_decision":
            decision = self.decisions.get(step.key, "否")
            return Answer(json.dumps({"decision": decision}, ensure_ascii=False), decision)
        assert step.parser == "verdicts" and step.n_claims == len(self.verdicts)
        return Answer(json.dumps({"verdicts": self.verdicts}, ensure_ascii=False), self.verdicts)


@dataclass
class Outcome:
    records: dict[str, dict[str, Any]]
    waves: list[list[str]]  # the keys requested in each wave
    steps: dict[str, Step]  # every step ever due, by key
    answers: dict[str, Answer]
    unused: set[str]

    def wave_of(self, key: str) -> int:
        return next(i for i, keys in enumerate(self.waves, 1) if key in keys)


def drive(
    threads: Sequence[tuple[Protocol, str]],
    ctx: CaseContext,
    script: Script,
    answers: Mapping[str, Answer] | None = None,
) -> Outcome:
    """Run the threads of one case to completion, one wave at a time, like the engine."""
    answers = dict(answers or {})
    waves: list[list[str]] = []
    steps: dict[str, Step] = {}
    unused: set[str] = set()
    while True:
        records: dict[str, dict[str, Any]] = {}
        due: dict[str, Step] = {}
        for protocol, variant in threads:
            adv = protocol.advance(ctx, variant, answers)
            assert adv == protocol.advance(ctx, variant, answers), "advance is not deterministic"
            unused |= adv.unused
            # The engine loads only the answers under `reads`: anything else would be re-requested.
            reads = protocol.reads(variant)
            assert all(key.startswith(reads) for key in (*(s.key for s in adv.due), *adv.unused)), reads
            if adv.record is not None:
                assert not adv.due
                records[f"{protocol.task}/{variant}"] = adv.record
                continue
            assert adv.due, "a thread with no record must have something due"
            for step in adv.due:
                assert step.key not in answers, f"{step.key} is due again after its answer"
                # Shared keys (LCA round 1) must be the very same request from every thread.
                assert due.setdefault(step.key, step) == step
                assert steps.setdefault(step.key, step) == step
        if not due:
            return Outcome(records, waves, steps, answers, unused)
        waves.append(list(due))
        assert len(waves) <= 20
        for key, step in due.items():
            answers[key] = script.answer(step)


def interaction_script(stop_round: int | None) -> Script:
    """Clarification until `stop_round` (None: never), judgment there."""
    keys = ["lca.u.cls", "int.c2", "int.c3"]
    labels = {k: "clarification" for k in keys}
    if stop_round is not None:
        labels[keys[stop_round - 1]] = "judgment"
    return Script(labels=labels)


def assert_in_order(haystack: str, needles: Sequence[str]) -> None:
    position = -1
    for needle in needles:
        found = haystack.find(needle, position + 1)
        assert found > position, f"{needle!r} missing or out of order"
        position = found


def rendered(history: Sequence[Message]) -> str:
    return prompts.render_history(history)


# --- registry -------------------------------------------------------------------------------


def test_registry_and_stages() -> None:
    assert set(PROTOCOLS) == {"lca", "dcg", "ljp_direct", "ljp_gold", "ljp_interaction"}
    assert STAGES == {
        "lca": ("lca",),
        "dcg": ("dcg",),
        "ljp-direct": ("ljp_direct",),
        "ljp-gold": ("ljp_gold",),
        "ljp-interaction": ("ljp_interaction",),
        # The three LJP setups together, as the original eval_LJP.py runs them.
        "ljp": ("ljp_direct", "ljp_gold", "ljp_interaction"),
        "all": ("lca", "dcg", "ljp_direct", "ljp_gold", "ljp_interaction"),
    }
    for stage, tasks in STAGES.items():
        for task in tasks:
            assert stage in ("all", "ljp") or PROTOCOLS[task].stage == stage


# --- DCG ------------------------------------------------------------------------------------


def test_dcg_steps_and_dependencies() -> None:
    ctx, dcg = context(), DCG()
    case = ctx.case
    h = case.underspecified_history
    answers: dict[str, Answer] = {}

    (q1,) = dcg.advance(ctx, "", answers).due
    assert (q1.key, q1.role, q1.parser) == ("dcg.q1", "eval", "text")
    assert q1.prompt == prompts.force_ask_prompt(h)

    answers["dcg.q1"] = text("dcg.q1")
    q1j, r1 = dcg.advance(ctx, "", answers).due
    assert (q1j.key, q1j.role, q1j.parser) == ("dcg.q1j", "judge", "dcg_decision")
    assert q1j.prompt == prompts.dcg_judge_prompt(h, marker("dcg.q1"), FOCAL_POINTS, KEY_DETAILS)
    assert (r1.key, r1.role, r1.parser) == ("dcg.r1", "user", "text")
    assert r1.prompt == prompts.user_model_prompt([*h, asst("dcg.q1")], FOCAL_POINTS, KEY_DETAILS)
    for hidden in [*KEY_SENTENCES, *FOCAL_POINTS]:
        assert hidden in r1.prompt  # the reply is grounded in the hidden facts
    assert rendered([*h, asst("dcg.q1")]) in r1.prompt

    # q2 needs only r1: it is due while q1j is still pending.
    answers["dcg.r1"] = text("dcg.r1")
    q1j_again, q2 = dcg.advance(ctx, "", answers).due
    assert q1j_again == q1j
    assert (q2.key, q2.role, q2.parser) == ("dcg.q2", "eval", "text")
    second_history = [*h, asst("dcg.q1"), user("dcg.r1")]
    assert q2.prompt == prompts.force_ask_prompt(second_history)
    assert_in_order(q2.prompt, [m.content for m in h] + [marker("dcg.q1"), marker("dcg.r1")])

    answers["dcg.q2"] = text("dcg.q2")
    q1j_again, q2j = dcg.advance(ctx, "", answers).due
    assert q1j_again == q1j
    assert (q2j.key, q2j.role, q2j.parser) == ("dcg.q2j", "judge", "dcg_decision")
    assert q2j.prompt == prompts.dcg_judge_prompt(second_history, marker("dcg.q2"), FOCAL_POINTS, KEY_DETAILS)

    answers["dcg.q2j"] = Answer('{"decision": "否"}', "否")
    assert [s.key for s in dcg.advance(ctx, "", answers).due] == ["dcg.q1j"]
    answers["dcg.q1j"] = Answer('{"decision": "否"}', "否")
    adv = dcg.advance(ctx, "", answers)
    assert adv.due == () and adv.record is not None and adv.unused == frozenset()


@pytest.mark.parametrize(
    ("first", "second", "success"),
    [("否", "是", True), ("否", "否", False), ("是", "否", True), ("是", "是", True)],
)
def test_dcg_success_if_either_round(first: str, second: str, success: bool) -> None:
    ctx = context()
    script = Script(decisions={"dcg.q1j": first, "dcg.q2j": second})
    out = drive([(DCG(), "")], ctx, script)
    # Both rounds are always generated and judged, whatever round 1 says.
    assert out.waves == [["dcg.q1"], ["dcg.q1j", "dcg.r1"], ["dcg.q2"], ["dcg.q2j"]]
    assert out.records["dcg/"] == {
        "case_number": 17,
        "history": [m.model_dump() for m in ctx.case.underspecified_history],
        "rounds": [
            {"question": marker("dcg.q1"), "reply": marker("dcg.r1"), "decision": first},
            {"question": marker("dcg.q2"), "decision": second},
        ],
        "success": success,
    }


def test_dcg_never_judges_questions_already_in_the_history() -> None:
    ctx = context(make_case(extra_pairs=2))
    out = drive([(DCG(), "")], ctx, Script(decisions={"dcg.q1j": "是", "dcg.q2j": "是"}))
    judged = [s for s in out.steps.values() if s.parser == "dcg_decision"]
    assert [s.key for s in judged] == ["dcg.q1j", "dcg.q2j"]
    for step, question in zip(judged, ["dcg.q1", "dcg.q2"], strict=True):
        slot = step.prompt.split("<追问>")[1].split("</追问>")[0]
        assert slot.strip() == marker(question)
    assert len(out.records["dcg/"]["rounds"]) == 2


def test_dcg_speculation_changes_nothing() -> None:
    script = Script(decisions={"dcg.q1j": "否", "dcg.q2j": "是"})
    plain = drive([(DCG(), "")], context(), script)
    spec = drive([(DCG(), "")], context(speculate=True), script)
    assert plain.records == spec.records and plain.waves == spec.waves and not spec.unused


# --- Direct and Gold LJP --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("protocol", "prefix", "history_field"),
    [(DirectLJP(), "dir", "underspecified_history"), (GoldLJP(), "gold", "complete_history")],
)
def test_direct_and_gold_prediction(protocol: Protocol, prefix: str, history_field: str) -> None:
    ctx = context()
    history = getattr(ctx.case, history_field)
    out = drive([(protocol, "")], ctx, Script())
    assert out.waves == [[f"{prefix}.gen"], [f"{prefix}.ext"]]
    gen, ext = out.steps[f"{prefix}.gen"], out.steps[f"{prefix}.ext"]
    assert (gen.role, gen.parser) == ("eval", "text")
    assert gen.prompt == prompts.force_judge_prompt(history)
    assert (ext.role, ext.parser, ext.n_claims) == ("judge", "verdicts", 3)
    assert ext.prompt == prompts.extract_verdicts_prompt(list(CLAIMS), marker(f"{prefix}.gen"))
    assert_in_order(ext.prompt, list(CLAIMS))
    assert out.records[f"{protocol.task}/"] == {
        "case_number": 17,
        "history": [m.model_dump() for m in history],
        "response": marker(f"{prefix}.gen"),
        "claims": [
            {"claim": "判令被告偿还借款本金十万元", "gold": "支持", "predicted": "部分支持"},
            {"claim": "判令被告支付逾期利息", "gold": "部分支持", "predicted": "驳回"},
            {"claim": "判令被告承担律师费", "gold": "驳回", "predicted": "支持"},
        ],
    }


def test_direct_and_gold_have_dedicated_responses() -> None:
    ctx = context()
    threads = [(LCA(), "c"), (LCA(), "u"), (DirectLJP(), ""), (GoldLJP(), "")]
    out = drive(threads, ctx, Script(labels={"lca.c.cls": "judgment", "lca.u.cls": "judgment"}))
    assert out.waves == [
        ["lca.c.gen", "lca.u.gen", "dir.gen", "gold.gen"],
        ["lca.c.cls", "lca.u.cls", "dir.ext", "gold.ext"],
    ]
    # Gold and LCA-complete are different requests even though both read the complete history.
    assert out.records["ljp_gold/"]["response"] == marker("gold.gen")
    assert out.records["ljp_direct/"]["response"] == marker("dir.gen")
    for task in ("ljp_direct", "ljp_gold"):
        alone = drive([(PROTOCOLS[task], "")], ctx, Script())
        assert not any(key.startswith("lca.") for key in alone.steps)
        assert alone.records[f"{task}/"] == out.records[f"{task}/"]


def test_claim_order_follows_result_dict() -> None:
    reordered = {k: CLAIMS[k] for k in reversed(CLAIMS)}
    case = make_case().model_copy(update={"result_dict": reordered})
    out = drive([(DirectLJP(), "")], context(case), Script())
    assert_in_order(out.steps["dir.ext"].prompt, list(reordered))
    claims = out.records["ljp_direct/"]["claims"]
    assert [c["claim"] for c in claims] == list(reordered)
    assert [c["gold"] for c in claims] == list(reordered.values())
    assert [c["predicted"] for c in claims] == PREDICTED


# --- Interaction-Based LJP --------------------------------------------------------------------


def continued(case: Case, keys: Sequence[str]) -> list[Message]:
    """The underspecified history followed by the new messages, alternating assistant/user."""
    new = [asst(k) if i % 2 == 0 else user(k) for i, k in enumerate(keys)]
    return [*case.underspecified_history, *new]


@pytest.mark.parametrize("extra_pairs", [0, 2])
@pytest.mark.parametrize(
    ("stop_round", "new_keys", "stop_reason"),
    [
        (1, ["lca.u.gen"], "judgment_round_1"),
        (2, ["lca.u.gen", "int.r1", "int.a2"], "judgment_round_2"),
        (3, ["lca.u.gen", "int.r1", "int.a2", "int.r2", "int.a3"], "judgment_round_3"),
        (
            None,
            ["lca.u.gen", "int.r1", "int.a2", "int.r2", "int.a3", "int.r3", "int.fin"],
            "forced_final_prediction",
        ),
    ],
)
def test_interaction_rounds(stop_round: int | None, new_keys: list[str], stop_reason: str, extra_pairs: int) -> None:
    case = make_case(extra_pairs)
    ctx = context(case)
    out = drive([(InteractionLJP(), "")], ctx, interaction_script(stop_round))
    record = out.records["ljp_interaction/"]
    final_key = new_keys[-1]

    assert record["stop_reason"] == stop_reason
    assert record["history"] == [m.model_dump() for m in case.underspecified_history]
    assert record["continued_history"] == [m.model_dump() for m in continued(case, new_keys)]
    assert record["final_response"] == record["response"] == marker(final_key)
    assert [c["predicted"] for c in record["claims"]] == PREDICTED
    assert [c["gold"] for c in record["claims"]] == list(CLAIMS.values())

    # The new assistant responses, within the budget of four whatever the history length.
    eval_keys = [k for k, s in out.steps.items() if s.role == "eval"]
    assert eval_keys == new_keys[::2]
    assert len(eval_keys) <= 4

    # Each round: the response, its label, and the reply only when the label was clarification.
    n_rounds = stop_round or 3
    expected_rounds = []
    for k in range(1, n_rounds + 1):
        label = "judgment" if k == stop_round else "clarification"
        row = {"round": k, "response": marker(new_keys[2 * k - 2]), "label": label}
        if label == "clarification":
            row["reply"] = marker(f"int.r{k}")
        expected_rounds.append(row)
    assert record["rounds"] == expected_rounds

    # Verdicts come from the final new response only, and nothing after a judgment is asked.
    assert out.steps["int.ext"].prompt == prompts.extract_verdicts_prompt(list(CLAIMS), marker(final_key))
    assert out.waves[-1] == ["int.ext"]
    if stop_round is not None:
        assert f"int.r{stop_round}" not in out.steps
        assert "int.fin" not in out.steps and not out.unused
    assert len(out.waves) == (2 + 3 * (n_rounds - 1) + 1 if stop_round else 11)


def test_interaction_step_prompts() -> None:
    case = make_case(extra_pairs=1)
    out = drive([(InteractionLJP(), "")], context(case), interaction_script(None))
    s = out.steps
    k, fp = KEY_DETAILS, FOCAL_POINTS

    def upto(*keys: str) -> list[Message]:
        return continued(case, keys)

    assert s["lca.u.gen"].prompt == prompts.lexawn_prompt(case.underspecified_history)
    assert s["lca.u.cls"].prompt == prompts.lca_classify_prompt(case.underspecified_history, marker("lca.u.gen"))
    assert s["int.r1"].prompt == prompts.user_model_prompt(upto("lca.u.gen"), fp, k)
    assert s["int.a2"].prompt == prompts.lexawn_prompt(upto("lca.u.gen", "int.r1"))
    assert s["int.c2"].prompt == prompts.lca_classify_prompt(upto("lca.u.gen", "int.r1"), marker("int.a2"))
    assert s["int.r2"].prompt == prompts.user_model_prompt(upto("lca.u.gen", "int.r1", "int.a2"), fp, k)
    assert s["int.a3"].prompt == prompts.lexawn_prompt(upto("lca.u.gen", "int.r1", "int.a2", "int.r2"))
    assert s["int.c3"].prompt == prompts.lca_classify_prompt(
        upto("lca.u.gen", "int.r1", "int.a2", "int.r2"), marker("int.a3")
    )
    assert s["int.r3"].prompt == prompts.user_model_prompt(
        upto("lca.u.gen", "int.r1", "int.a2", "int.r2", "int.a3"), fp, k
    )
    accumulated = upto("lca.u.gen", "int.r1", "int.a2", "int.r2", "int.a3", "int.r3")
    assert s["int.fin"].prompt == prompts.force_judge_prompt(accumulated)
    assert (s["int.fin"].role, s["int.fin"].parser) == ("eval", "text")
    # The third reply is obtained before the forced final prediction.
    assert out.wave_of("int.r3") < out.wave_of("int.fin") < out.wave_of("int.ext")
    assert [s[key].role for key in ("int.r1", "int.r2", "int.r3")] == ["user"] * 3
    assert [s[key].parser for key in ("int.c2", "int.c3")] == ["lca_label"] * 2


def test_interaction_round_one_is_the_lca_underspecified_thread() -> None:
    ctx = context()
    script = interaction_script(2)
    together = drive([(LCA(), "u"), (InteractionLJP(), "")], ctx, script)
    assert together.waves[0] == ["lca.u.gen"] and together.waves[1] == ["lca.u.cls"]
    alone = drive([(InteractionLJP(), "")], ctx, script)
    assert alone.records["ljp_interaction/"] == together.records["ljp_interaction/"]
    assert together.records["lca/u"]["response"] == alone.records["ljp_interaction/"]["rounds"][0]["response"]
    # An LCA stage that already ran answers round 1: the interaction reuses it.
    lca_first = drive([(LCA(), "u")], ctx, Script(labels={"lca.u.cls": "judgment"}))
    later = drive([(InteractionLJP(), "")], ctx, Script(), answers=lca_first.answers)
    assert later.waves == [["int.ext"]]
    assert later.records["ljp_interaction/"]["stop_reason"] == "judgment_round_1"


# --- speculation ----------------------------------------------------------------------------


@pytest.mark.parametrize("stop_round", [1, 2, 3, None])
def test_speculation_gives_the_same_records(stop_round: int | None) -> None:
    script = interaction_script(stop_round)
    plain = drive([(InteractionLJP(), "")], context(), script)
    spec = drive([(InteractionLJP(), "")], context(speculate=True), script)
    assert spec.records == plain.records
    if stop_round is None:
        assert not spec.unused
    else:
        wasted = f"int.r{stop_round}"
        assert spec.unused == {wasted} and wasted in spec.answers
        assert marker(wasted) not in json.dumps(spec.records, ensure_ascii=False)
        # The reply was requested together with the label it turned out not to need.
        assert spec.wave_of(wasted) == spec.wave_of("lca.u.cls" if stop_round == 1 else f"int.c{stop_round}")
    assert not plain.unused


def test_speculation_wave_depth() -> None:
    script = interaction_script(None)
    plain = drive([(InteractionLJP(), "")], context(), script)
    spec = drive([(InteractionLJP(), "")], context(speculate=True), script)
    assert plain.waves == [
        ["lca.u.gen"], ["lca.u.cls"], ["int.r1"], ["int.a2"], ["int.c2"], ["int.r2"],
        ["int.a3"], ["int.c3"], ["int.r3"], ["int.fin"], ["int.ext"],
    ]  # fmt: skip
    assert spec.waves == [
        ["lca.u.gen"], ["lca.u.cls", "int.r1"], ["int.a2"], ["int.c2", "int.r2"],
        ["int.a3"], ["int.c3", "int.r3"], ["int.fin"], ["int.ext"],
    ]  # fmt: skip


def test_speculative_reply_is_due_with_the_label_only_when_speculating() -> None:
    answers = {"lca.u.gen": text("lca.u.gen")}
    plain = InteractionLJP().advance(context(), "", answers)
    spec = InteractionLJP().advance(context(speculate=True), "", answers)
    assert [s.key for s in plain.due] == ["lca.u.cls"]
    assert [s.key for s in spec.due] == ["lca.u.cls", "int.r1"]
    # Once the label says clarification, the reply is the same request either way.
    answers["lca.u.cls"] = Answer('{"label": "clarification"}', "clarification")
    assert InteractionLJP().advance(context(), "", answers).due == (spec.due[1],)


def test_unused_reply_reported_whether_answered_or_only_requested() -> None:
    ctx = context(speculate=True)
    answers = {
        "lca.u.gen": text("lca.u.gen"),
        "int.r1": text("int.r1"),
        "int.a2": text("int.a2"),
        "lca.u.cls": Answer('{"label": "clarification"}', "clarification"),
        "int.c2": Answer('{"label": "judgment"}', "judgment"),
    }
    # int.r2 only requested (in flight): the thread already knows it will never read it.
    adv = InteractionLJP().advance(ctx, "", answers)
    assert [s.key for s in adv.due] == ["int.ext"] and adv.unused == {"int.r2"}
    assert marker("int.r2") not in adv.due[0].prompt
    answers["int.r2"] = text("int.r2")
    assert InteractionLJP().advance(ctx, "", answers) == adv
    answers["int.ext"] = Answer("{}", PREDICTED)
    done = InteractionLJP().advance(ctx, "", answers)
    assert done.unused == {"int.r2"} and done.record is not None
    assert done.record["stop_reason"] == "judgment_round_2"
    assert marker("int.r2") not in json.dumps(done.record, ensure_ascii=False)
    assert done.record == InteractionLJP().advance(context(), "", answers).record


# --- wave depth, determinism, isolation ---------------------------------------------------------


def all_branches(templates: prompts.Templates | None = None) -> list[Outcome]:
    """Every protocol down every branch: the steps any thread can ever produce."""
    ctx = context(templates=templates)
    lca_script = Script(labels={"lca.c.cls": "judgment"})
    outcomes = [
        drive([(LCA(), "c"), (LCA(), "u")], ctx, lca_script),
        drive([(DirectLJP(), ""), (GoldLJP(), "")], ctx, Script()),
    ]
    for first, second in [("否", "是"), ("是", "否"), ("否", "否")]:
        script = Script(decisions={"dcg.q1j": first, "dcg.q2j": second})
        outcomes.append(drive([(DCG(), "")], ctx, script))
    for stop_round in (1, 2, 3, None):
        for speculate in (False, True):
            ctx = context(speculate=speculate, templates=templates)
            outcomes.append(drive([(InteractionLJP(), "")], ctx, interaction_script(stop_round)))
    return outcomes


def test_the_engine_refuses_a_step_outside_what_a_protocol_reads(monkeypatch) -> None:
    from lexpilot_batch.engine import due as threads

    monkeypatch.setattr(LCA, "reads", lambda self, variant: ("lca.x.",))
    with pytest.raises(RuntimeError, match="outside the steps it reads"):
        threads.due_for_case(context(), [(1, "lca", "c")], {}, {}, retries=3)


def test_wave_depth_without_failures() -> None:
    depth = {
        "lca": drive([(LCA(), "c"), (LCA(), "u")], context(), Script()),
        "dcg": drive([(DCG(), "")], context(), Script()),
        "direct": drive([(DirectLJP(), "")], context(), Script()),
        "gold": drive([(GoldLJP(), "")], context(), Script()),
    }
    assert {name: len(o.waves) for name, o in depth.items()} == {
        "lca": 2, "dcg": 4, "direct": 2, "gold": 2,
    }  # fmt: skip
    case = make_case()
    everything = [(PROTOCOLS[t], v) for t in STAGES["all"] for v in PROTOCOLS[t].variants(case)]
    assert len(drive(everything, context(), interaction_script(None)).waves) == 11
    assert len(drive(everything, context(speculate=True), interaction_script(None)).waves) == 8


def test_advance_is_deterministic_on_partial_answers() -> None:
    contexts = [context(), context(speculate=True)]
    for outcome in all_branches():
        keys = list(outcome.answers)
        for n in range(len(keys) + 1):
            partial = {k: outcome.answers[k] for k in keys[:n]}
            for protocol in PROTOCOLS.values():
                for variant in protocol.variants(contexts[0].case):
                    for ctx in contexts:
                        first = protocol.advance(ctx, variant, partial)
                        assert isinstance(first, Advance)
                        assert first == protocol.advance(ctx, variant, dict(partial))


def gold_pairings() -> list[str]:
    """Gold verdicts in any form that ties them to claims."""
    return [
        json.dumps(CLAIMS, ensure_ascii=False),
        json.dumps(list(CLAIMS.values()), ensure_ascii=False),
        "、".join(CLAIMS.values()),
        ",".join(CLAIMS.values()),
    ]


def assert_no_gold_verdicts(prompt: str) -> None:
    for form in gold_pairings():
        assert form not in prompt
    for claim, verdict in CLAIMS.items():
        start = prompt.find(claim)
        while start >= 0:
            after = prompt[start + len(claim) : start + len(claim) + 12]
            before = prompt[max(0, start - 12) : start]
            assert verdict not in after and verdict not in before, (claim, verdict)
            start = prompt.find(claim, start + 1)


def test_isolation_across_every_branch() -> None:
    outcomes = all_branches()
    steps = [s for o in outcomes for s in o.steps.values()]
    hidden = [*KEY_SENTENCES, *FOCAL_POINTS, prompts.render_key_details(KEY_DETAILS)]
    roles = {s.role for s in steps}
    assert roles == {"eval", "user", "judge"}
    for step in steps:
        assert_no_gold_verdicts(step.prompt)  # no prompt of any role holds the gold verdicts
        if step.role == "eval" or step.parser == "verdicts":
            for secret in hidden:
                assert secret not in step.prompt, (step.key, secret)
    # The scan can fail: the prompts that should hold the hidden facts do.
    grounded = [s for s in steps if s.role == "user" or s.parser == "dcg_decision"]
    assert grounded and all(all(h in s.prompt for h in hidden) for s in grounded)
    extract = [s for s in steps if s.parser == "verdicts"]
    assert extract and all(all(c in s.prompt for c in CLAIMS) for s in extract)


def test_eval_prompts_are_only_the_three_eval_templates_on_a_history() -> None:
    # Tagged templates show which builder made each prompt, and that ctx.templates is honoured.
    tagged = {
        name: f"[{name}]" + "".join(f"<<{slot}:{{{slot}}}>>" for slot in sorted(slots))
        for name, slots in prompts.SLOTS.items()
    }
    outcomes = all_branches(tagged)
    seen: dict[str, set[str]] = {"eval": set(), "user": set(), "judge": set()}
    for step in (s for o in outcomes for s in o.steps.values()):
        name = step.prompt[1 : step.prompt.index("]")]
        seen[step.role].add(name)
        if step.role == "eval":
            # Nothing but the template and one rendered history.
            assert step.prompt.startswith(f"[{name}]<<history:") and step.prompt.endswith(">>")
            assert step.prompt.count("<<") == 1
    assert seen == {
        "eval": {prompts.LEXAWN, prompts.FORCE_ASK, prompts.FORCE_JUDGE},
        "user": {prompts.USER_MODEL},
        "judge": {prompts.LCA_CLASSIFY, prompts.DCG_JUDGE, prompts.EXTRACT_VERDICTS},
    }
