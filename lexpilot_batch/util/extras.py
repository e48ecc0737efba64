"""The optional extras: whether the package a feature needs is installed, and recent enough.

Some features need a package the core does not install, an extra of `pyproject.toml`: the native
batch APIs their SDKs (`anthropic`, `google`), `hf://` datasets `huggingface_hub` (`hub`), the
Inspect export `inspect_ai` (`inspect`). pip installs an extra's package at the version the extra
asks for only when the extra is asked for; a package installed before, for another project, stays
as it was. So a feature whose package is missing or older than its extra's requirement is refused
with what to run, before anything is done (`requirement_problem`, `require`), instead of failing on
an attribute the older package lacks halfway through.

`REQUIREMENTS` states each extra's requirement as `pyproject.toml` does (a test holds the two
equal). It is not read from the installed package's metadata: an editable install keeps the
metadata of the day it was installed, so a requirement changed since would be checked as it was.
Versions are compared with `packaging` (PEP 440, pre-releases admitted); an install made before it
became a dependency, and not installed again, checks only the package's presence.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import importlib.util
from collections.abc import Callable
from typing import Any

# extra -> the requirement it adds, as in pyproject.toml's [project.optional-dependencies]
REQUIREMENTS: dict[str, str] = {
    "anthropic": "anthropic>=2",
    "aws": "boto3>=1.35",
    "google": "google-genai>=3",
    "hub": "huggingface_hub>=1",
    "inspect": "inspect_ai>=0.3.280",
}


def extra_needed(what: str, extra: str) -> str:
    """What to install when `what` (a plural subject: "Anthropic requests", "hf:// datasets") needs
    the extra `extra` and its package is missing."""
    return (
        f'{what} need the optional extra {extra!r}: python -m pip install "lexpilot-batch[{extra}]" '
        f'(from a clone of the repository: python -m pip install -e ".[{extra}]")'
    )


def _too_old(requirement_text: str) -> tuple[str, str] | None:
    """(the package's distribution, its installed version) when that version does not meet the
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


def requirement_problem(module: str, extra: str, what: str) -> str | None:
    """What to install for `what`, which needs `module` (of the extra `extra`): the extra when the
    module is not installed, the requirement when the installed package is older than it; None when
    it is fine. Looked up, not imported."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        found = None
    if found is None:
        return extra_needed(what, extra)
    requirement = REQUIREMENTS.get(extra)
    old = _too_old(requirement) if requirement is not None else None
    if old is None:
        return None
    name, installed = old
    # The requirement itself, not `--upgrade "lexpilot-batch[extra]"`: that would also look this
    # package up on the index, replacing an install from a clone. (Quoted: `>` is a redirect in
    # every shell.)
    return (
        f"{what} need {requirement} (the optional extra {extra!r}), and {name} {installed} is "
        f'installed: python -m pip install "{requirement}"'
    )


def require(module: str, extra: str, what: str, error: Callable[[str], Exception]) -> Any:
    """Import an optional package's module, or raise `error` (the caller's `ConfigError`: `util`
    knows no error family) saying what installs it (`requirement_problem`)."""
    problem = requirement_problem(module, extra, what)
    if problem is not None:
        raise error(problem)
    try:
        return importlib.import_module(module)
    except ImportError:
        raise error(extra_needed(what, extra)) from None
