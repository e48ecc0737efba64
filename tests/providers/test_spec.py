"""Providers declare themselves (`providers.spec`), and the registry finds the declarations
(`providers.registry`): a new OpenAI-compatible platform is one file, a native API one folder."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

from lexpilot_batch.providers import platforms, registry
from lexpilot_batch.providers.prefixes import parse_model
from lexpilot_batch.providers.spec import Provider

PACKAGE = Path(registry.__file__).resolve().parents[1]


def test_each_api_folder_declares_its_api_under_its_own_name():
    folders = sorted(p.parent.name for p in (PACKAGE / "providers").glob("*/spec.py"))
    assert folders == sorted(registry.APIS)
    for name, api in registry.APIS.items():
        assert api.name == name
        assert all(p.api == name for p in importlib.import_module(f"lexpilot_batch.providers.{name}.spec").PROVIDERS)


def test_each_platform_module_is_its_providers_one_declaration():
    names = [info.name for info in pkgutil.iter_modules(platforms.__path__)]
    assert {"azure", "dashscope", "deepseek", "groq", "moonshot", "qianfan", "siliconflow", "zhipu", "ark"} <= set(
        names
    )
    for name in names:
        provider = importlib.import_module(f"lexpilot_batch.providers.platforms.{name}").PROVIDER
        assert provider.prefix == name and registry.PROVIDERS[name] is provider


def _literals(path: Path) -> set[str]:
    """The string constants of a module's code (docstrings aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    }


def test_no_product_code_but_its_own_file_spells_a_platforms_prefix():
    """What a platform is (its endpoint, limits, rules) is in its file alone: no other module of the
    product (the simulated provider, its double, aside) holds its prefix as a value."""
    names = {info.name for info in pkgutil.iter_modules(platforms.__path__)}
    found = []
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("simulated/"):
            continue
        for name in names & _literals(path):
            if relative != f"providers/platforms/{name}.py":
                found.append(f"{relative}: {name!r}")
    assert not found, found


def test_a_platform_added_as_one_file_is_found_parsed_routed_and_limited(tmp_path, monkeypatch):
    """What docs/adding-a-provider.md promises: one file in providers/platforms/ and nothing else."""
    extra = tmp_path / "platforms_extra"
    extra.mkdir()
    (extra / "acme.py").write_text(
        "from lexpilot_batch.providers.spec import MB, Limits, Provider\n"
        'PROVIDER = Provider("acme", "Acme batch", "openai", "https://api.acme.test/v1", "ACME_BASE_URL",\n'
        '    "ACME_API_KEY", limits=Limits(1_000, 10 * MB, "24h", "/v1/chat/completions"), hosts=("acme.test",))\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(platforms, "__path__", [*platforms.__path__, str(extra)])
    # (the module the registry imports is dropped again after the test)
    monkeypatch.setitem(sys.modules, "lexpilot_batch.providers.platforms.acme", None)
    del sys.modules["lexpilot_batch.providers.platforms.acme"]
    apis, providers = registry._collect()
    acme = providers["acme"]
    assert isinstance(acme, Provider) and acme.api == "openai" and set(providers) - set(registry.PROVIDERS) == {"acme"}
    monkeypatch.setattr(registry, "PROVIDERS", providers)
    monkeypatch.setattr(registry, "PROFILES", {**registry.PROFILES, "acme": acme.limits})
    from lexpilot_batch.providers import prefixes

    monkeypatch.setattr(prefixes, "PROVIDERS", providers)
    name = parse_model("acme/some-model")
    assert (name.provider, name.sent, name.key) == (acme, "some-model", "acme")
    assert registry.guess_profile("https://eu.acme.test/v1") == "acme"


def test_a_prefix_declared_twice_is_refused(monkeypatch):
    api_modules, platform_modules = registry._modules()
    monkeypatch.setattr(registry, "_modules", lambda: (api_modules, [*platform_modules, platform_modules[0]]))
    with pytest.raises(RuntimeError, match="declared twice"):
        registry._collect()


@pytest.mark.parametrize(
    ("url", "profile"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://res.openai.azure.com/openai/v1", "azure"),
        # Groq's URL holds Azure's `/openai/v1` too: the longer, more specific fragment wins.
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://dashscope.aliyuncs.com/compatible-mode/v1", "dashscope"),
        ("https://open.bigmodel.cn/api/paas/v4", "zhipu"),
        ("http://localhost:8000/v1", "generic"),
    ],
)
def test_a_base_url_set_by_hand_finds_its_providers_limits(url, profile):
    assert registry.guess_profile(url) == profile
