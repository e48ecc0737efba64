"""The optional SDKs: whether the one a provider's requests need is installed, and recent enough.

pip installs an extra's SDK at the version the extra asks for (`pyproject.toml`) only when the
extra is asked for; an SDK installed before, for another project, stays as it was. So a model whose
SDK is missing or older than the extra's requirement is refused with what to run, when its backend
is built (`require_sdk`) and before anything is compiled (`registry.missing_sdk`), instead of
failing on an attribute the older SDK lacks at the first submit.

`REQUIREMENTS` states each extra's SDK requirement as `pyproject.toml` does (a test holds the two
equal). It is not read from the installed package's metadata: an editable install keeps the
metadata of the day it was installed, so a requirement changed since would be checked as it was.
Versions are compared with `packaging` (PEP 440, pre-releases admitted); an install made before it
became a dependency, and not installed again, checks only the SDK's presence.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import importlib.util
from typing import Any

from lexpilot_batch.errors import ConfigError

# extra -> the requirement it adds for its SDK, as in pyproject.toml's [project.optional-dependencies]
REQUIREMENTS: dict[str, str] = {"anthropic": "anthropic>=2", "google": "google-genai>=3"}


def extra_needed(provider: str, extra: str) -> str:
    """What to install when a provider's optional SDK is missing."""
    return (
        f'{provider} requests need the optional extra {extra!r}: python -m pip install "lexpilot-batch[{extra}]" '
        f'(from a clone of the repository: python -m pip install -e ".[{extra}]")'
    )


def _too_old(requirement_text: str) -> tuple[str, str] | None:
    """(the SDK's distribution, its installed version) when that version does not meet the
    requirement; None when it does, or cannot be told (no metadata, a version PEP 440 cannot
    read, `packaging` not installed)."""
    try:
        from packaging.requirements import Requirement
        from packaging.version import InvalidVersion, Version
    except ImportError:  # (installed before it was a dependency: `pip install -e .` again brings it)
        return None
    requirement = Requirement(requirement_text)
    try:
        installed = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:  # importable without metadata (vendored): taken as it is
        return None
    try:
        version = Version(installed)
    except InvalidVersion:  # a fork's own version string: nothing to compare
        return None
    if requirement.specifier.contains(version, prereleases=True):
        return None
    return requirement.name, installed


def sdk_problem(module: str, extra: str, provider: str) -> str | None:
    """What to install for `provider`'s requests, whose SDK is `module` (of the extra `extra`): the
    extra when the module is not installed, the requirement when the installed SDK is older than
    it; None when it is fine. Looked up, not imported."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        found = None
    if found is None:
        return extra_needed(provider, extra)
    requirement = REQUIREMENTS.get(extra)
    old = _too_old(requirement) if requirement is not None else None
    if old is None:
        return None
    name, installed = old
    # The requirement itself, not `--upgrade "lexpilot-batch[extra]"`: that would also look this
    # package up on the index, replacing an install from a clone. (Quoted: `>` is a redirect in
    # every shell.)
    return (
        f"{provider} requests need {requirement} (the optional extra {extra!r}), and {name} {installed} is "
        f'installed: python -m pip install "{requirement}"'
    )


def require_sdk(module: str, extra: str, provider: str) -> Any:
    """Import an optional SDK module, or say what installs it (`sdk_problem`)."""
    problem = sdk_problem(module, extra, provider)
    if problem is not None:
        raise ConfigError(problem)
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(extra_needed(provider, extra)) from None
