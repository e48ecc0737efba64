"""The optional SDKs checked against their extras' requirements (`providers/extras.py`): the
requirement read from this package's metadata is what `pyproject.toml` states, an installed SDK
older than it is refused with the upgrade to run, and one that fits (a pre-release too) passes."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from lexpilot_batch.errors import ConfigError
from lexpilot_batch.providers import extras
from lexpilot_batch.providers.backends import SDKS, missing_sdk
from lexpilot_batch.providers.extras import extra_requirements, require_sdk, sdk_problem

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@pytest.fixture
def installed():
    if not extra_requirements("anthropic"):
        pytest.skip("this package's metadata is not installed (a source tree on the path)")


def _as_version(monkeypatch, sdk: str, version: str) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version if name == sdk else real(name))


@pytest.mark.parametrize("extra", ["anthropic", "google"])
def test_each_extra_is_read_from_the_metadata_as_pyproject_states_it(installed, extra):
    stated = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["optional-dependencies"][extra]
    assert [f"{r.name}{r.specifier}" for r in extra_requirements(extra)] == [s.replace(" ", "") for s in stated]


def test_an_extra_of_no_requirement_and_the_core_ones_are_not_taken_for_it(installed):
    assert extra_requirements("no-such-extra") == ()
    assert "openai" not in {r.name for r in extra_requirements("anthropic")}


@pytest.mark.parametrize("api", sorted(SDKS))
def test_the_installed_sdks_fit_their_extras(api):
    assert missing_sdk(api) is None


def test_an_sdk_older_than_its_extra_asks_is_refused_with_the_upgrade_to_run(installed, monkeypatch):
    _as_version(monkeypatch, "anthropic", "0.39.0")
    problem = sdk_problem("anthropic", "anthropic", "Anthropic")
    assert problem is not None
    assert "Anthropic requests need anthropic>=" in problem
    assert "anthropic 0.39.0 is installed" in problem
    assert 'python -m pip install --upgrade "lexpilot-batch[anthropic]"' in problem
    with pytest.raises(ConfigError, match=r"0\.39\.0 is installed"):
        require_sdk("anthropic.types.messages", "anthropic", "Anthropic")
    assert missing_sdk("anthropic") == problem
    assert missing_sdk("google") is None  # the other SDK is not touched


def test_the_batch_backend_is_not_built_on_an_sdk_too_old(installed, monkeypatch):
    from lexpilot_batch.providers.anthropic.batch import AnthropicBatchBackend
    from lexpilot_batch.providers.endpoints import PROFILES, Endpoint

    _as_version(monkeypatch, "anthropic", "1.9.9")
    with pytest.raises(ConfigError, match=r"anthropic 1\.9\.9 is installed: python -m pip install --upgrade"):
        AnthropicBatchBackend(Endpoint("eval", "http://127.0.0.1:9", "KEY", "sk-x"), PROFILES["anthropic"])


@pytest.mark.parametrize("version", ["99.0.0rc1", "99.0.0", "99.0.0+local"])
def test_a_version_that_fits_passes_a_pre_release_and_a_local_build_too(installed, monkeypatch, version):
    _as_version(monkeypatch, "anthropic", version)
    assert sdk_problem("anthropic", "anthropic", "Anthropic") is None


def test_a_version_string_pep_440_cannot_read_is_taken_as_it_is(installed, monkeypatch):
    _as_version(monkeypatch, "anthropic", "built-from-a-fork")
    assert sdk_problem("anthropic", "anthropic", "Anthropic") is None


def test_an_sdk_importable_without_metadata_is_taken_as_it_is(installed, monkeypatch):
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "anthropic":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert sdk_problem("anthropic", "anthropic", "Anthropic") is None


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "anthropic", None)
    problem = sdk_problem("anthropic", "anthropic", "Anthropic")
    assert problem == extras.extra_needed("Anthropic", "anthropic")
    assert 'python -m pip install "lexpilot-batch[anthropic]"' in problem


def test_without_this_packages_metadata_only_presence_is_checked(monkeypatch):
    def requires(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    extra_requirements.cache_clear()
    monkeypatch.setattr(importlib.metadata, "requires", requires)
    try:
        assert extra_requirements("anthropic") == ()
        _as_version(monkeypatch, "anthropic", "0.1.0")
        assert sdk_problem("anthropic", "anthropic", "Anthropic") is None
    finally:
        extra_requirements.cache_clear()
