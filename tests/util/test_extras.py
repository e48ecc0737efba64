"""The optional packages checked against their extras' requirements (`util/extras.py`): the
requirements the check holds are those `pyproject.toml` states, an installed SDK older than its
requirement is refused with the requirement to install, and one that fits (a pre-release too)
passes."""

from __future__ import annotations

import builtins
import importlib.metadata
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers.registry import APIS, missing_sdk
from lexpilot_batch.util import extras
from lexpilot_batch.util.extras import REQUIREMENTS, require, requirement_problem

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _same(a: Requirement, b: Requirement) -> bool:
    return (a.name, a.specifier, a.extras, a.marker) == (b.name, b.specifier, b.extras, b.marker)


def _as_version(monkeypatch, sdk: str, version: str) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version if name == sdk else real(name))


def test_the_requirements_checked_are_those_pyproject_states():
    stated = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    # every native API's SDK, and what the Hub datasets and the Inspect export need
    assert {api.extra.extra for api in APIS.values() if api.extra is not None} | {"hub", "inspect"} == set(REQUIREMENTS)
    for extra, requirement in REQUIREMENTS.items():
        assert len(stated[extra]) == 1
        assert _same(Requirement(requirement), Requirement(stated[extra][0])), extra
        # ... and the test extra, which CI installs, asks for the same
        assert any(_same(Requirement(requirement), Requirement(line)) for line in stated["test"]), extra


@pytest.mark.parametrize("api", sorted(name for name, api in APIS.items() if api.extra is not None))
def test_the_installed_sdks_fit_their_extras(api):
    assert missing_sdk(api) is None


@pytest.mark.parametrize(("module", "extra"), [("huggingface_hub", "hub"), ("inspect_ai", "inspect")])
def test_the_installed_hub_client_and_inspect_fit_their_extras(module, extra):
    assert requirement_problem(module, extra, "these") is None


def test_an_sdk_older_than_its_extra_asks_is_refused_with_the_requirement_to_install(monkeypatch):
    _as_version(monkeypatch, "anthropic", "0.39.0")
    problem = requirement_problem("anthropic", "anthropic", "Anthropic requests")
    assert problem == (
        "Anthropic requests need anthropic>=2 (the optional extra 'anthropic'), and anthropic 0.39.0 is installed: "
        'python -m pip install "anthropic>=2"'
    )
    with pytest.raises(ConfigError, match=r"0\.39\.0 is installed"):
        require("anthropic.types.messages", "anthropic", "Anthropic requests", ConfigError)
    assert missing_sdk("anthropic") == problem
    assert missing_sdk("google") is None  # the other SDK is not touched


def test_gemini_names_its_distribution_not_its_module(monkeypatch):
    _as_version(monkeypatch, "google-genai", "2.9.0")
    assert missing_sdk("google") == (
        "Gemini requests need google-genai>=3 (the optional extra 'google'), and google-genai 2.9.0 is installed: "
        'python -m pip install "google-genai>=3"'
    )


def test_the_batch_backend_is_not_built_on_an_sdk_too_old(monkeypatch):
    from lexpilot_batch.providers.anthropic.batch import AnthropicBatchBackend
    from lexpilot_batch.providers.registry import PROFILES
    from lexpilot_batch.providers.routing.endpoints import Endpoint

    _as_version(monkeypatch, "anthropic", "1.9.9")
    with pytest.raises(ConfigError, match=r'anthropic 1\.9\.9 is installed: python -m pip install "anthropic>=2"'):
        AnthropicBatchBackend(Endpoint("eval", "http://127.0.0.1:9", "KEY", "sk-x"), PROFILES["anthropic"])


@pytest.mark.parametrize("version", ["99.0.0rc1", "99.0.0", "99.0.0+local", "2.0.0"])
def test_a_version_that_fits_passes_a_pre_release_and_a_local_build_too(monkeypatch, version):
    _as_version(monkeypatch, "anthropic", version)
    assert requirement_problem("anthropic", "anthropic", "Anthropic requests") is None


def test_a_pre_release_below_the_requirement_does_not_fit(monkeypatch):
    _as_version(monkeypatch, "anthropic", "2.0.0rc1")
    assert requirement_problem("anthropic", "anthropic", "Anthropic requests") is not None


def test_a_version_string_pep_440_cannot_read_is_taken_as_it_is(monkeypatch):
    _as_version(monkeypatch, "anthropic", "built-from-a-fork")
    assert requirement_problem("anthropic", "anthropic", "Anthropic requests") is None


def test_an_sdk_importable_without_metadata_is_taken_as_it_is(monkeypatch):
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "anthropic":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert requirement_problem("anthropic", "anthropic", "Anthropic requests") is None


def test_without_packaging_only_presence_is_checked(monkeypatch):
    """An install made before `packaging` was a dependency, and not installed again, still runs."""
    real_import = builtins.__import__

    def without_packaging(name, *args, **kwargs):
        if name == "packaging" or name.startswith("packaging."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_packaging)
    _as_version(monkeypatch, "anthropic", "0.1.0")
    assert requirement_problem("anthropic", "anthropic", "Anthropic requests") is None
    monkeypatch.setitem(sys.modules, "anthropic", None)
    assert requirement_problem("anthropic", "anthropic", "Anthropic requests") == extras.extra_needed(
        "Anthropic requests", "anthropic"
    )


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "anthropic", None)
    problem = requirement_problem("anthropic", "anthropic", "Anthropic requests")
    assert problem == extras.extra_needed("Anthropic requests", "anthropic")
    assert 'python -m pip install "lexpilot-batch[anthropic]"' in problem
