"""Cached-prefix layout of request lines (`providers.cache_layout`, `providers.lines`): what each
provider is sent, and that the model is asked exactly the same text."""

from __future__ import annotations

import json

import pytest

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.benchmark.prompts import Message
from lexpilot_batch.providers import cache_layout as prefixes
from lexpilot_batch.providers.anthropic import cache as anthropic_cache
from lexpilot_batch.providers.anthropic import contract as anthropic_contract
from lexpilot_batch.providers.anthropic.spec import NAME as ANTHROPIC
from lexpilot_batch.providers.bodies import request as bodies_request
from lexpilot_batch.providers.lines import line_body
from lexpilot_batch.providers.openai import contract as openai_contract
from lexpilot_batch.providers.openai.spec import NAME as OPENAI
from lexpilot_batch.providers.prefixes import parse_model

FIELDS = json.dumps({"max_tokens": 8192, "temperature": 0.7})


def history(*contents: str) -> list[Message]:
    return [Message(role="user" if i % 2 == 0 else "assistant", content=c) for i, c in enumerate(contents)]


def line(prompt: prompts.Prompt, api: str, cache: str | None, case: str = "3", model: str = "m") -> tuple[bytes, dict]:
    raw = b'{"custom_id":""' + line_body(model, prompt, FIELDS, "/v1/chat/completions", None, api, cache, case)
    obj = json.loads(raw)
    # Byte for byte `json.dumps` of what it holds, as every request line.
    assert raw == json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    return raw, obj


def joined(content: str | list) -> str:
    return content if isinstance(content, str) else "".join(b["text"] for b in content)


@pytest.mark.parametrize(
    ("name", "layout"),
    [
        ("openai/gpt-4o-mini", prefixes.KEY),
        ("azure/my-deployment", None),
        ("openai-api/vllm/qwen", None),
        ("deepseek/deepseek-chat", None),
        ("dashscope/qwen-plus", None),
        ("google/gemini-2.5-flash", None),
        ("anthropic/claude-sonnet-4-5", "breakpoint:1024"),
        ("anthropic/claude-haiku-4-5", "breakpoint:4096"),
        ("bare-model", None),
    ],
)
def test_what_each_provider_is_sent(name, layout):
    assert bodies_request.cache_layout(parse_model(name)) == layout


def test_openai_lines_carry_one_prompt_cache_key_per_case_and_template():
    h1, h2 = history("劳动合同纠纷" * 50), history("劳动合同纠纷" * 50, "请问", "没有合同")
    lca, lca_later, judge = prompts.lexawn_prompt(h1), prompts.lexawn_prompt(h2), prompts.force_judge_prompt(h1)
    keys = {}
    for what, prompt, case in [
        ("lca", lca, "3"),
        ("later", lca_later, "3"),
        ("judge", judge, "3"),
        ("other", lca, "4"),
    ]:
        plain = line(prompt, OPENAI, None, case)[1]["body"]
        body = line(prompt, OPENAI, prefixes.KEY, case)[1]["body"]
        keys[what] = body.pop("prompt_cache_key")
        assert body == plain  # the key is all that is added
        assert openai_contract.problems({**body, "prompt_cache_key": keys[what]}, first_party=True) == []
    assert keys["lca"] == keys["later"]  # a later round of the same case and template meets it
    assert len({keys["lca"], keys["judge"], keys["other"]}) == 3


def test_anthropic_lines_mark_the_shared_part_cut_at_each_history_message():
    prompt = prompts.lca_classify_prompt(history("我想咨询" * 300, "请问签合同了吗", "没有"), "这是新回复")
    _, obj = line(prompt, ANTHROPIC, "breakpoint:1024", model="claude-sonnet-4-5")
    content = obj["params"]["messages"][0]["content"]
    assert joined(content) == str(prompt)  # the model reads the same text
    marked = [i for i, b in enumerate(content) if "cache_control" in b]
    assert marked == [2] and content[2]["cache_control"] == {"type": "ephemeral"}
    assert [b["text"].split(":")[0] for b in content[1:3]] == ["\nAssistant", "\nUser"]  # a block a message
    assert "".join(b["text"] for b in content[:3]) == "".join(prompt.parts[: prompt.shared])
    assert anthropic_contract.problems(obj["params"]) == []


def test_a_shared_part_too_short_for_the_model_is_sent_as_it_always_was():
    prompt = prompts.lexawn_prompt(history("短问题"))
    assert line(prompt, ANTHROPIC, "breakpoint:1024")[0] == line(prompt, ANTHROPIC, None)[0]


def test_a_shared_part_that_is_the_whole_prompt_is_one_marked_block():
    prompt = prompts.Prompt(("头", "法" * 2000), 2)
    content = line(prompt, ANTHROPIC, "breakpoint:1024")[1]["params"]["messages"][0]["content"]
    assert content == [{"type": "text", "text": str(prompt), "cache_control": {"type": "ephemeral"}}]


def test_the_contract_refuses_a_malformed_breakpoint():
    params = {"model": "claude-sonnet-4-5", "max_tokens": 10}
    bad = [{"type": "text", "text": "x", "cache_control": {"type": "persistent"}}]
    empty = [{"type": "text", "text": ""}]
    for content in (bad, empty):
        found = anthropic_contract.problems({**params, "messages": [{"role": "user", "content": content}]})
        assert found, content


def _rehearse(root, runs: tuple[str, ...]) -> tuple[dict, list[dict], int]:
    """A study of a Claude and an OpenAI model rehearsed against the simulated provider: its records,
    its request bodies, and the cached tokens it was reported."""
    from lexpilot_batch.benchmark.settings import Settings
    from lexpilot_batch.engine.loop import prepare
    from lexpilot_batch.engine.session import ProviderOptions, Session
    from lexpilot_batch.state.compaction import read_saved, saved_files
    from lexpilot_batch.state.workspace import Workspace
    from lexpilot_batch.study.runs import RunSpec
    from tests.helpers.engine import finish, records

    spec = RunSpec(runs, ("anthropic/claude-sonnet-4-5",), "all", Settings(judge_model="openai/gpt-4o-mini"), limit=2)
    with Workspace(root) as ws:
        session = Session(ws, ProviderOptions(provider="simulated"))
        try:
            prepare(ws, session, spec)
            finish(ws, session)
        finally:
            session.close()
        bodies = [
            json.loads(raw) for path in saved_files(ws.root / "requests") for raw in read_saved(path).splitlines()
        ]
        cached = ws.store.conn.execute("SELECT SUM(cached_tokens) FROM requests").fetchone()[0]
        return records(ws), bodies, cached


@pytest.mark.slow  # two whole rehearsals of a study (about 2 s): a workflow run, not a unit test
def test_the_layout_changes_no_record_only_the_request_bytes(tmp_path, monkeypatch):
    """The same study with the layout and without it (as a run registered before it existed): the
    same records, answer for answer. Breakpoints are forced onto every prompt (a tiny minimum) so
    that the sample's short histories are laid out too."""
    monkeypatch.setattr(anthropic_cache, "ANTHROPIC_MINIMUM", ((r".*", 1),))
    laid, laid_lines, _ = _rehearse(tmp_path / "laid", ("r1", "r2"))
    monkeypatch.setattr(bodies_request, "cache_layout", lambda name: None)
    plain, plain_lines, _ = _rehearse(tmp_path / "plain", ("r1", "r2"))
    assert laid == plain and laid
    # `--provider simulated` sends each model through its own API: a Claude body as Message Batches
    # `params`, an OpenAI one as a batch line's `body`.
    laid_bodies = [x["params"] if "params" in x else x["body"] for x in laid_lines]
    plain_bodies = [x["params"] if "params" in x else x["body"] for x in plain_lines]
    keyed = [b for b in laid_bodies if "prompt_cache_key" in b]
    blocked = [b for b in laid_bodies if isinstance(b["messages"][0]["content"], list)]
    assert keyed and blocked  # both layouts were sent...
    assert any("params" in x for x in laid_lines) and any("body" in x for x in laid_lines)
    assert all(isinstance(b["messages"][0]["content"], str) for b in plain_bodies)  # ...and neither here
    assert not any("prompt_cache_key" in b for b in plain_bodies)
