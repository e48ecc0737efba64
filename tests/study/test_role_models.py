"""Where each role's model goes, said and checked at `prepare` (issue 45): a bare name goes to its
role's endpoint, api.openai.com when no variable names another, and one OpenAI does not serve (the
seed's DeepSeek defaults, a Claude model) is refused there, naming the value, its role, the
endpoint and what to pass instead; `prepare` prints each role's model and endpoint; a name no
catalogue lists passes with `--allow-model`, and only a model of the command may be allowed. The
product's bundled catalogues and the simulated provider's reading of the same sources agree.
"""

from __future__ import annotations

import os

import pytest

from lexpilot_batch.benchmark.settings import DEFAULT_JUDGE_MODEL, DEFAULT_USER_MODEL, Settings
from lexpilot_batch.engine.loop import prepare
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.errors import ConfigError
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study.runs import RunSpec


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider setting of this machine: keys, URLs and backends all unset."""
    for name in list(os.environ):
        if name.startswith(("LEXPILOT_", "OPENAI_")) or name.endswith(("_API_KEY", "_BASE_URL", "_BACKEND")):
            monkeypatch.delenv(name)


def _prepare(tmp_path, spec: RunSpec, provider: str | None = None) -> None:
    with Workspace(tmp_path / "ws") as ws:
        session = Session(ws, ProviderOptions(provider=provider))
        try:
            prepare(ws, session, spec)
        finally:
            session.close()


@pytest.mark.parametrize(
    ("settings", "option", "value", "instead"),
    [
        (Settings(), "--user-model", DEFAULT_USER_MODEL, "name its provider"),
        (Settings("openai/gpt-4o-mini"), "--judge-model", DEFAULT_JUDGE_MODEL, "deepseek/deepseek-reasoner"),
        (
            Settings("claude-sonnet-4-5", "openai/o4-mini"),
            "--user-model",
            "claude-sonnet-4-5",
            "anthropic/claude-sonnet-4-5",
        ),
    ],
)
def test_a_bare_model_openai_does_not_serve_is_refused_where_it_would_go_to_api_openai_com(
    tmp_path, clean_env, settings, option, value, instead
):
    """The README's first workflow block had this shape: `prepare --model gpt-4o-mini` and nothing
    else sent DeepSeek-V4.1-Flash and DeepSeek-R1 to api.openai.com without a word."""
    with pytest.raises(ConfigError) as refused:
        _prepare(tmp_path, RunSpec(("r1",), ("openai/gpt-4o-mini",), "lca", settings, limit=1))
    said = str(refused.value)
    role = "user" if option == "--user-model" else "judge"
    assert said.startswith(f"{option} {value} ({role} role)"), said
    assert "https://api.openai.com/v1" in said and f"LEXPILOT_{role.upper()}_BASE_URL" in said
    assert instead in said and "--provider simulated" in said and "Nothing was compiled" in said
    assert not (tmp_path / "ws" / "runs").exists()


def test_the_defaults_pass_where_they_do_not_go_to_api_openai_com(tmp_path, clean_env, monkeypatch):
    """Rehearsed (`--provider simulated`), or sent to an endpoint of the user's (a variable names
    it), or allowed by name: the same defaults are taken."""
    spec = RunSpec(("r1",), ("sim-eval",), "lca", Settings(), limit=1)
    _prepare(tmp_path / "simulated", spec, provider="simulated")
    monkeypatch.setenv("LEXPILOT_USER_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("LEXPILOT_JUDGE_BASE_URL", "http://127.0.0.1:8001/v1")
    _prepare(tmp_path / "own", spec)
    monkeypatch.delenv("LEXPILOT_USER_BASE_URL")
    monkeypatch.delenv("LEXPILOT_JUDGE_BASE_URL")
    allowed = RunSpec(
        ("r1",), ("sim-eval",), "lca", limit=1, allowed_models=frozenset({DEFAULT_USER_MODEL, DEFAULT_JUDGE_MODEL})
    )
    _prepare(tmp_path / "allowed", allowed)


def test_allow_model_names_a_model_of_the_command(tmp_path, clean_env):
    spec = RunSpec(("r1",), ("sim-eval",), "lca", limit=1, allowed_models=frozenset({"anthropic/claude-sonnet-9"}))
    with pytest.raises(ConfigError, match="--allow-model anthropic/claude-sonnet-9 names no model of this command"):
        _prepare(tmp_path, spec, provider="simulated")
    newer = RunSpec(
        ("r1",),
        ("anthropic/claude-sonnet-9",),
        "lca",
        Settings("sim-user", "sim-judge"),
        limit=1,
        allowed_models=frozenset({"anthropic/claude-sonnet-9"}),
    )
    _prepare(tmp_path, newer, provider="simulated")  # a model newer than the catalogue, vouched for


def test_prepare_prints_each_roles_model_and_endpoint(tmp_path, clean_env, in_process):
    code, out = in_process(
        [
            "prepare",
            "--stage",
            "lca",
            "--limit",
            "1",
            "--model",
            "openai/gpt-4o-mini",
            "--user-model",
            "openai/gpt-4o-mini",
            "--judge-model",
            "anthropic/claude-sonnet-4-5",
            "--root",
            str(tmp_path / "real"),
        ]
    )
    text = out.decode("utf-8")
    assert code == 0, text
    lines = text.splitlines()
    head = lines.index("Models and where their requests go:")
    shown = [line.split() for line in lines[head + 1 : head + 4]]
    assert [(s[0], s[1], s[2]) for s in shown] == [
        ("eval", "openai/gpt-4o-mini", "https://api.openai.com/v1"),
        ("user", "openai/gpt-4o-mini", "https://api.openai.com/v1"),
        ("judge", "anthropic/claude-sonnet-4-5", "https://api.anthropic.com"),
    ]
    code, out = in_process(
        ["prepare", "--stage", "lca", "--limit", "1", "--model", "sim-eval", "--provider", "simulated"]
        + ["--root", str(tmp_path / "rehearsal")]
    )
    text = out.decode("utf-8")
    assert code == 0, text
    assert (
        f"user   {DEFAULT_USER_MODEL}" in text and "the simulated provider (a rehearsal; a real run sends it to" in text
    )


def test_the_products_catalogues_and_the_simulators_lists_read_the_same_sources():
    """Each side reads the providers' published lists for itself (`providers.<api>.catalogue`,
    `simulated.sources.published`); they must name the same models, so that a slip in one shows.
    Mistral's simulated list also keeps its embedding, OCR and moderation models (the API serves
    them), which a chat study cannot use and the product's catalogue leaves out."""
    from lexpilot_batch.providers.registry import PROVIDERS
    from lexpilot_batch.simulated.sources import published

    def bundled(prefix: str) -> frozenset[str]:
        catalogue = PROVIDERS[prefix].catalogue
        assert catalogue is not None
        return catalogue.names

    assert bundled("anthropic") == published.ANTHROPIC.names
    assert bundled("zhipu") == published.ZHIPU.names
    assert published.GEMINI.names <= bundled("google")
    assert bundled("mistral") <= published.MISTRAL.names
    assert all(
        any(word in name for word in ("embed", "ocr", "moderation"))
        for name in published.MISTRAL.names - bundled("mistral")
    )


def test_a_catalogue_whose_only_source_is_an_sdk_not_installed_refuses_nothing(monkeypatch):
    """Groq's catalogue is its SDK's literal alone: without the `groq` SDK (an optional extra), a
    `groq/` model is not refused for want of a list."""
    from lexpilot_batch.providers.bodies import model_names
    from lexpilot_batch.providers.registry import PROVIDERS

    groq = PROVIDERS["groq"]
    assert model_names.catalogue_problem(groq, "llama-3.3-70b-versatil") is not None  # the SDK is installed here
    monkeypatch.setattr(model_names, "sdk_names", lambda module, attribute, field: frozenset())
    assert model_names.catalogue_problem(groq, "llama-3.3-70b-versatil") is None
