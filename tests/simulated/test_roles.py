"""The simulated models: each default template is recognised, every role's output passes the
judges' parsers, and on the sample dataset every branch of the benchmark is exercised."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from lexpilot_batch.benchmark import judges, prompts
from lexpilot_batch.data import Case, Message, load_dataset
from lexpilot_batch.simulated import caching, completions, roles
from lexpilot_batch.simulated.roles import reading

SEEDS = range(5)


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return list(load_dataset().cases)


def ask(seed: int, prompt: str) -> str:
    return roles.respond(prompt, seed).content


def builders(case: Case) -> dict[str, str]:
    """Every template filled for one case, as the protocols fill them."""
    history = case.underspecified_history
    asked = [*history, Message(role="assistant", content="请问您手上有没有借条或者转账记录？")]
    return {
        prompts.LEXAWN: prompts.lexawn_prompt(history),
        prompts.FORCE_ASK: prompts.force_ask_prompt(history),
        prompts.FORCE_JUDGE: prompts.force_judge_prompt(history),
        prompts.LCA_CLASSIFY: prompts.lca_classify_prompt(history, "请问您有借条吗？"),
        prompts.DCG_JUDGE: prompts.dcg_judge_prompt(history, "请问借条在哪里？", case.focal_points, case.key_details),
        prompts.USER_MODEL: prompts.user_model_prompt(asked, case.focal_points, case.key_details),
        prompts.EXTRACT_VERDICTS: prompts.extract_verdicts_prompt(case.claims, "第一项请求：结论：驳回。"),
    }


def test_every_default_template_is_recognised(cases: list[Case]) -> None:
    for case in cases:
        for kind, prompt in builders(case).items():
            assert roles.identify_kind(prompt) == kind
    assert roles.identify_kind("写一首关于春天的诗") == roles.GENERIC


def test_tags_quoted_inside_a_history_do_not_mislead() -> None:
    history = [Message(role="user", content="对方在短信里写了<追问>和<关键事实>这些字，<诉讼请求>是什么意思？")]
    assert roles.identify_kind(prompts.lexawn_prompt(history)) == prompts.LEXAWN
    assert roles.identify_kind(prompts.force_judge_prompt(history)) == prompts.FORCE_JUDGE


def test_unknown_prompts_get_a_lawyer_reply() -> None:
    custom = "请以律师身份回复。\n<对话历史>\nUser: 我被公司辞退了，没有任何补偿。\n</对话历史>"
    assert judges.parse_text(ask(0, custom))
    assert judges.parse_text(ask(0, "你好"))


def test_history_is_parsed_back_with_multiline_messages() -> None:
    history = [
        Message(role="user", content="第一行\n第二行"),
        Message(role="assistant", content="请问？"),
        Message(role="user", content="好的"),
    ]
    assert roles.parse_history(prompts.lexawn_prompt(history)) == [
        ("user", "第一行\n第二行"),
        ("assistant", "请问？"),
        ("user", "好的"),
    ]


def test_every_role_passes_the_parsers(cases: list[Case]) -> None:
    formats: Counter[str] = Counter()
    for seed in SEEDS:
        for case in cases:
            filled = builders(case)
            for kind in (prompts.LEXAWN, prompts.FORCE_ASK, prompts.FORCE_JUDGE, prompts.USER_MODEL):
                assert judges.parse_text(ask(seed, filled[kind]))
            question = ask(seed, filled[prompts.FORCE_ASK])
            assert question.endswith("？") and question.count("？") == 1
            for kind, parse in (
                (prompts.LCA_CLASSIFY, judges.parse_lca_label),
                (prompts.DCG_JUDGE, judges.parse_dcg_decision),
                (prompts.EXTRACT_VERDICTS, lambda t, n=len(case.claims): judges.parse_verdicts(t, n)),  # noqa: B008 - binds this case
            ):
                reply = roles.respond(filled[kind], seed)
                parse(reply.content)
                formats["fenced" if "```" in reply.content else "think" if "<think>" in reply.content else "plain"] += 1
                formats["reasoning_content"] += reply.reasoning is not None
    assert all(formats[f] > 0 for f in ("fenced", "think", "plain", "reasoning_content"))


def test_same_seed_and_prompt_same_answer(cases: list[Case]) -> None:
    prompt = prompts.lexawn_prompt(cases[0].underspecified_history)
    assert ask(3, prompt) == ask(3, prompt)
    answers = {ask(seed, prompts.force_ask_prompt(c.underspecified_history)) for c in cases[:5] for seed in SEEDS}
    assert len(answers) > 5


def test_the_classifier_agrees_with_the_response() -> None:
    def label(response: str) -> str:
        return judges.parse_lca_label(
            ask(0, prompts.lca_classify_prompt([Message(role="user", content="x")], response))
        )

    assert label("为了判断，我还需要知道：借款时有没有写借条？") == "clarification"
    assert label("请问您方便提供转账记录吗？谢谢。") == "clarification"
    assert label("1. 第一项请求：结论：支持。\n建议您保留证据。") == "judgment"


def test_the_extractor_reads_the_numbered_conclusions() -> None:
    response = "1. 第一项请求：结论：部分支持。\n2. 第二项请求：证据不足，结论：驳回。\n3. 第三项请求：结论：支持。"
    claims = ["甲", "乙", "丙", "丁"]
    verdicts = judges.parse_verdicts(ask(0, prompts.extract_verdicts_prompt(claims, response)), 4)
    assert verdicts[:3] == ["部分支持", "驳回", "支持"] and verdicts[3] in ("部分支持", "驳回", "支持")
    unnumbered = "该项请求不予支持；利息部分支持。"
    assert judges.parse_verdicts(ask(0, prompts.extract_verdicts_prompt(["甲", "乙"], unnumbered)), 2) == [
        "驳回",
        "部分支持",
    ]


def test_the_user_model_answers_from_the_key_details(cases: list[Case]) -> None:
    case = cases[0]
    details = prompts.render_key_details(case.key_details)
    history = [
        *case.underspecified_history,
        Message(role="assistant", content="请问借款是通过什么方式交付的，有没有借条？"),
    ]
    reply = ask(0, prompts.user_model_prompt(history, case.focal_points, case.key_details))
    facts = [s for s in re.split(r"[。；\n]", reply.split("：", 1)[1]) if s.strip()]
    assert facts and all(f.replace("我", "原告").replace("对方", "被告").strip("。") in details for f in facts)
    off = [*case.underspecified_history, Message(role="assistant", content="请问您喜欢什么颜色？")]
    assert "不" in ask(0, prompts.user_model_prompt(off, case.focal_points, case.key_details))


def lca(seed: int, history: list[Message]) -> tuple[str, str]:
    response = ask(seed, prompts.lexawn_prompt(history))
    return response, judges.parse_lca_label(ask(seed, prompts.lca_classify_prompt(history, response)))


def test_lca_asks_and_judges_on_both_histories(cases: list[Case]) -> None:
    labels: Counter[tuple[str, str]] = Counter()
    for seed in SEEDS:
        for case in cases:
            for variant, history in (("c", case.complete_history), ("u", case.underspecified_history)):
                response, label = lca(seed, history)
                labels[variant, label] += 1
                if label == "clarification":
                    assert response.endswith("？")
                else:
                    assert re.search("支持|驳回", response) and "？" not in response
    for key in (("c", "judgment"), ("c", "clarification"), ("u", "judgment"), ("u", "clarification")):
        assert labels[key] >= 10, labels
    assert labels["c", "judgment"] > labels["u", "judgment"]


def test_interaction_ends_at_every_round_across_the_sample(cases: list[Case]) -> None:
    stops: Counter[str] = Counter()
    for seed in SEEDS:
        for case in cases:
            history = list(case.underspecified_history)
            stop = "still asking at round 3"
            for round_ in (1, 2, 3):
                response, label = lca(seed, history)
                if label == "judgment":
                    stop = f"judgment at round {round_}"
                    break
                history.append(Message(role="assistant", content=response))
                reply = ask(seed, prompts.user_model_prompt(history, case.focal_points, case.key_details))
                history.append(Message(role="user", content=reply))
            stops[stop] += 1
    for stop in ("judgment at round 1", "judgment at round 2", "judgment at round 3", "still asking at round 3"):
        assert stops[stop] >= 5, stops


def test_dcg_questions_hit_and_miss(cases: list[Case]) -> None:
    decisions: Counter[str] = Counter()
    for seed in SEEDS:
        for case in cases:
            history = case.underspecified_history
            question = ask(seed, prompts.force_ask_prompt(history))
            prompt = prompts.dcg_judge_prompt(history, question, case.focal_points, case.key_details)
            decisions[judges.parse_dcg_decision(ask(seed, prompt))] += 1
    assert decisions["是"] >= 10 and decisions["否"] >= 10, decisions


def test_extracted_verdicts_vary_and_fit_the_claims(cases: list[Case]) -> None:
    seen: Counter[str] = Counter()
    for seed in SEEDS:
        for case in cases:
            response = ask(seed, prompts.force_judge_prompt(case.complete_history))
            text = ask(seed, prompts.extract_verdicts_prompt(case.claims, response))
            seen.update(judges.parse_verdicts(text, len(case.claims)))
    assert set(seen) == {"支持", "部分支持", "驳回"}


@pytest.mark.parametrize("kind", [prompts.LCA_CLASSIFY, prompts.DCG_JUDGE, prompts.EXTRACT_VERDICTS])
def test_every_malformed_variant_fails_its_parser(cases: list[Case], kind: str) -> None:
    case = cases[0]
    prompt = builders(case)[kind]
    parse = {
        prompts.LCA_CLASSIFY: judges.parse_lca_label,
        prompts.DCG_JUDGE: judges.parse_dcg_decision,
        prompts.EXTRACT_VERDICTS: lambda t: judges.parse_verdicts(t, len(case.claims)),
    }[kind]
    variants = {roles.malformed_judge(kind, prompt, random.Random(i)) for i in range(60)}
    assert len(variants) == 5
    for text in variants:
        with pytest.raises(judges.MalformedOutput):
            parse(text)


def test_completion_usage_is_realistic(cases: list[Case]) -> None:
    filled = builders(cases[0])
    body = {"model": "judge-m", "messages": [{"role": "user", "content": filled[prompts.DCG_JUDGE]}]}
    completion = completions.complete(body, 0, key="c1")
    usage = completion["usage"]
    assert abs(usage["prompt_tokens"] - len(filled[prompts.DCG_JUDGE]) / 1.5) < 10
    # Nothing cached without the provider's prefix store; with it, a repeat is cached by OpenAI's
    # rule (`simulated.caching`: 128-token steps from 1,024) when the prompt is long enough.
    assert usage["prompt_tokens_details"]["cached_tokens"] == 0
    store = caching.PrefixCache()
    completions.complete(body, 0, key="c1", prefixes=store)
    again = completions.complete(body, 0, key="c2", prefixes=store)["usage"]
    cached, total = again["prompt_tokens_details"]["cached_tokens"], again["prompt_tokens"]
    assert cached == (0 if total < 1024 else 1024 + (total - 1024) // 128 * 128)
    assert usage["completion_tokens_details"]["reasoning_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    eval_body = {"model": "m", "messages": [{"role": "user", "content": filled[prompts.LEXAWN]}]}
    assert completions.complete(eval_body, 0, key="c2")["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0


# The readable definitions that the roles' faster patterns stand for (see the comment above them in
# `roles.reading`).
READABLE = {
    "_NUMBER": r"\d+(?:[.,，]\d+)*|[一二两三四五六七八九十百千万]+(?:万|千|百)?元",
    "_AMOUNT": r"\d+(?:\.\d+)?\s*(?:万元|万|元)",
    "_DATE": r"(?:\d{4}年)?\d{1,2}月(?:\d{1,2}日)?|\d{4}年",
}


def random_texts(seed: int, count: int) -> list[list[str]]:
    """Short texts dense in what the patterns look for, in groups as a history joins them."""
    rng = random.Random(seed)
    alphabet = (
        "0123456789０١" + "一二两三四五六七八九十百千万" + "年月日元万千百.,，。 \t\u3000借款合同押租金保险证退担"
    )
    words = [*reading._TOPICS, "劳动合同", "2021年3月5日", "12.5万元", "3 \n元"]

    def text() -> str:
        parts = [
            rng.choice(words) if rng.random() < 0.2 else "".join(rng.choices(alphabet, k=rng.randint(0, 4)))
            for _ in range(rng.randint(0, 8))
        ]
        return "".join(parts)

    return [[text() for _ in range(rng.randint(0, 4))] for _ in range(count)]


def test_the_fast_patterns_find_what_the_readable_ones_do(cases: list[Case]) -> None:
    samples = [t for group in random_texts(0, 4000) for t in group]
    samples += [m.content for case in cases for m in case.complete_history + case.underspecified_history]
    for name, readable in READABLE.items():
        fast = getattr(reading, name)
        assert [fast.findall(t) for t in samples] == [re.findall(readable, t) for t in samples], name


def test_a_history_read_message_by_message_reads_as_its_joined_text() -> None:
    for texts in random_texts(1, 6000):
        joined = "\n".join(texts)
        assert reading.topics_in(texts) == [t for t in reading._TOPICS if t in joined]
        assert reading.amounts_in(texts) == re.findall(READABLE["_AMOUNT"], joined)
        assert reading.dates_in(texts) == re.findall(READABLE["_DATE"], joined)
        turns = [("user", t) for t in texts]
        assert roles.count_facts(turns) == len(re.findall(READABLE["_NUMBER"], "\n".join(texts)))
        assert roles.bigrams(joined) == {
            *(run[i : i + 2] for run in re.findall(r"[\u4e00-\u9fff]+", joined) for i in range(len(run) - 1)),
            *re.findall(r"\d+", joined),
        }
