"""Model lists (`--models FILE`, TOML or JSON) and `--model-arg MODEL:KEY=VALUE` (`model_list`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lexpilot_batch.cli.run_options import run_spec
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.routing.routes import ModelRoute
from lexpilot_batch.study.model_list import ModelOptions, load_model_list, parse_model_arg

TOML = """
[[eval]]
name = "openai/gpt-4o-mini"

[[eval]]
name = "qwen-plus"
provider = "dashscope"

[[eval]]
name = "openai-api/local/Qwen/Qwen2.5-7B-Instruct"
base_url = "http://127.0.0.1:8000/v1"
key_var = "LOCAL_API_KEY"
backend = "sync"
body = { top_p = 0.8 }
drop = ["temperature"]

[user]
name = "deepseek/deepseek-chat"

[judge]
name = "openai/o4-mini"
body = { reasoning_effort = "high" }
"""

JSON = {
    "eval": [
        "openai/gpt-4o-mini",
        {"name": "qwen-plus", "provider": "dashscope"},
        {
            "name": "Qwen/Qwen2.5-7B-Instruct",
            "provider": "openai-api/local",
            "base_url": "http://127.0.0.1:8000/v1",
            "key_var": "LOCAL_API_KEY",
            "backend": "sync",
            "body": {"top_p": 0.8, "temperature": None},
        },
    ],
    "user": "deepseek/deepseek-chat",
    "judge": {"name": "openai/o4-mini", "body": {"reasoning_effort": "high"}},
}


def values(**given: Any) -> dict[str, Any]:
    """The run options as the CLI hands them to `run_spec`, defaults filled in."""
    base: dict[str, Any] = {
        "stage": "all",
        "run_id": [],
        "model": [],
        "user_model": None,
        "judge_model": None,
        "models_file": None,
        "model_arg": [],
        "allow_model": [],
        "reasoning_effort": None,
        "dataset": None,
        "categories": None,
        "limit": None,
        "temperature": 0.7,
        "judge_temperature": 0.1,
        "max_tokens": 8192,
        "prompts_file": None,
        "speculate": False,
    }
    return {**base, **given}


def test_toml_and_json_lists_say_the_same_as_the_flags(tmp_path: Path):
    toml = tmp_path / "models.toml"
    toml.write_text(TOML, encoding="utf-8")
    js = tmp_path / "models.json"
    js.write_text(json.dumps(JSON), encoding="utf-8")
    assert load_model_list(toml) == load_model_list(js)
    listed = load_model_list(toml)
    local = "openai-api/local/Qwen/Qwen2.5-7B-Instruct"
    assert listed.eval == ("openai/gpt-4o-mini", "dashscope/qwen-plus", local)
    assert (listed.user, listed.judge) == ("deepseek/deepseek-chat", "openai/o4-mini")
    assert listed.options[local] == ModelOptions(
        {"top_p": 0.8, "temperature": None}, None, ModelRoute("http://127.0.0.1:8000/v1", "LOCAL_API_KEY", "sync")
    )
    from_file = run_spec(values(models_file=toml))
    from_flags = run_spec(
        values(
            model=list(listed.eval),
            user_model="deepseek/deepseek-chat",
            judge_model="openai/o4-mini",
            model_arg=["openai/o4-mini:reasoning_effort=high", f"{local}:top_p=0.8", f"{local}:temperature=null"],
        )
    )
    assert from_file.models == from_flags.models and from_file.settings == from_flags.settings
    assert {k: v.args for k, v in from_file.model_options.items()} == {
        k: v.args for k, v in from_flags.model_options.items() if v.args
    } | {"openai/gpt-4o-mini": {}, "dashscope/qwen-plus": {}, "deepseek/deepseek-chat": {}}


def test_a_list_saved_with_a_byte_order_mark_reads_as_without(tmp_path: Path):
    """Windows PowerShell 5.1's `Set-Content -Encoding utf8` and Notepad write UTF-8 with one."""
    plain, marked = tmp_path / "models.toml", tmp_path / "marked.toml"
    plain.write_text(TOML, encoding="utf-8")
    marked.write_text(TOML, encoding="utf-8-sig")
    assert marked.read_bytes().startswith(b"\xef\xbb\xbf")
    assert load_model_list(marked) == load_model_list(plain)
    as_json = tmp_path / "marked.json"
    as_json.write_text(json.dumps(JSON), encoding="utf-8-sig")
    assert load_model_list(as_json) == load_model_list(plain)


def test_flags_win_over_the_list(tmp_path: Path):
    toml = tmp_path / "models.toml"
    toml.write_text(TOML, encoding="utf-8")
    spec = run_spec(
        values(models_file=toml, judge_model="openai/gpt-4.1", model_arg=["openai/o4-mini:reasoning_effort=low"])
    )
    assert spec.settings.judge_model == "openai/gpt-4.1"
    assert spec.model_options["openai/o4-mini"].args == {"reasoning_effort": "low"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[[eval]]\nname = "m"\nbsae_url = "x"\n', "eval[0]: unknown field(s) bsae_url"),
        ('[[eval]]\nname = "m"\nbody = { model = "x" }\n', "'model' cannot be set per model"),
        ('[[eval]]\nname = "m"\nkey_var = "sk-live-123"\n', "key_var names an environment variable"),
        ('[[eval]]\nname = "m"\nbackend = "pigeon"\n', "backend must be one of"),
        ('[[eval]]\nname = "m"\nbase_url = "https://u:sk-1@h.example/v1"\n', "must not hold credentials"),
        ('[[eval]]\nname = "m"\nbase_url = "https://h.example/v1?api-key=sk-1"\n', "must not hold credentials"),
        ('[[eval]]\nname = "m"\nprovider = "openai-api"\n', "provider must be a provider prefix without its slash"),
        ('[[eval]]\nname = "sambanova/m"\n', "unknown provider prefix"),
        ('[eval]\nname = "m"\n', "eval must be a list"),
        ('judges = "m"\n', "unknown key(s) judges"),
        ('[[eval]\nname = "m"\n', "not valid TOML"),
    ],
)
def test_a_mistake_in_a_list_names_the_file_and_the_entry(tmp_path: Path, text: str, needle: str):
    path = tmp_path / "models.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_model_list(path)
    assert str(path) in str(caught.value) and needle in str(caught.value)


def test_a_list_must_be_toml_or_json(tmp_path: Path):
    path = tmp_path / "models.yaml"
    path.write_text("eval: [m]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=".toml or .json"):
        load_model_list(path)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("openai/o4-mini:reasoning_effort=high", ("openai/o4-mini", "reasoning_effort", "high")),
        ("qwen2.5:7b:temperature=0.2", ("qwen2.5:7b", "temperature", 0.2)),
        ("m:temperature=null", ("m", "temperature", None)),
        ('m:response_format={"type": "json_object"}', ("m", "response_format", {"type": "json_object"})),
    ],
)
def test_model_args(text, parsed):
    assert parse_model_arg(text) == parsed


@pytest.mark.parametrize("text", ["no-colon=1", "m:=1", "m:top_p", ":top_p=1", "m:messages=[]", "m:n=2"])
def test_a_malformed_model_arg_is_refused(text):
    with pytest.raises(ConfigError, match="--model-arg"):
        parse_model_arg(text)


@pytest.mark.parametrize(
    "text",
    [
        # What PowerShell 5.1 passes for '...={"type": "json_object"}': the inner quotes stripped.
        "openai/gpt-4o-mini:response_format={type: json_object}",
        "anthropic/claude-sonnet-4-5:thinking={type: enabled, budget_tokens: 4096}",
        "openai/gpt-4o-mini:stop=[END]",
        'openai/gpt-4o-mini:user="unterminated',
    ],
)
def test_a_model_arg_that_looks_like_json_but_does_not_parse_is_refused(text: str) -> None:
    """Issue 29 item 6: such values were pinned in the manifest as strings, silently."""
    with pytest.raises(ConfigError) as caught:
        parse_model_arg(text)
    message = str(caught.value)
    assert "looks like JSON" in message and "PowerShell" in message and "--models FILE" in message


def test_a_model_arg_of_json_or_plain_text_still_reads() -> None:
    assert parse_model_arg('m:response_format={"type": "json_object"}')[2] == {"type": "json_object"}
    assert parse_model_arg("m:reasoning_effort=high")[2] == "high"
