"""A role's request body (`providers.bodies.request`) in each API's dialect: the settings where its
API reads them, model arguments merged, and what the contract then refuses."""

from __future__ import annotations

import pytest

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.bodies.contract import check_role_body
from lexpilot_batch.providers.bodies.request import role_request
from lexpilot_batch.providers.prefixes import parse_model


def test_each_dialect_carries_the_settings_where_its_api_reads_them():
    claude = role_request("eval", parse_model("anthropic/claude-sonnet-4-5"), Settings())
    # No temperature for Claude: the installed SDK's types have none (issue 25, item 7).
    assert claude.body == {"max_tokens": 8192} and claude.model == "claude-sonnet-4-5"
    assert claude.not_applied == ("temperature",)
    gemini = role_request("judge", parse_model("google/gemini-2.5-flash"), Settings())
    assert gemini.body == {"generationConfig": {"temperature": 0.1, "maxOutputTokens": 8192}}
    assert gemini.not_applied == ()
    # A generationConfig argument is merged field by field; null removes one.
    args = {"generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}, "temperature": None}}
    thinking = role_request("eval", parse_model("google/gemini-2.5-flash"), Settings(), args=args)
    assert thinking.body == {"generationConfig": {"maxOutputTokens": 8192, "thinkingConfig": {"thinkingBudget": 1024}}}
    assert thinking.not_applied == ("temperature",)
    # Extended thinking: only without a temperature (the contract refuses one, `bodies/test_contract.py`).
    budget = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    ok = role_request("eval", parse_model("anthropic/claude-sonnet-4-5"), Settings(), args=budget)
    assert ok.body == {"max_tokens": 8192, "thinking": {"type": "enabled", "budget_tokens": 2048}}
    assert ok.not_applied == ("temperature",)
    hot = role_request(
        "eval", parse_model("anthropic/claude-sonnet-4-5"), Settings(), args={**budget, "temperature": 0.7}
    )
    with pytest.raises(ConfigError, match="temperature=null"):
        check_role_body("eval", parse_model("anthropic/claude-sonnet-4-5"), hot.body)
    bare = role_request("eval", parse_model("anthropic/claude-x"), Settings(), args={"max_tokens": None})
    with pytest.raises(ConfigError, match="max_tokens"):
        check_role_body("eval", parse_model("anthropic/claude-x"), bare.body)
