"""The optional SDKs: whether the one a provider's requests need is installed, and recent enough.

pip installs an extra's SDK at the version the extra asks for (`pyproject.toml`) only when the
extra is asked for; an SDK installed before, for another project, stays as it was. So a model whose
SDK is missing or older than the extra's requirement is refused with what to run, when its backend
is built (`require_sdk`) and before anything is compiled (`backends.missing_sdk`), instead of
failing on an attribute the older SDK lacks at the first submit.

The requirement is read from this package's own metadata (`importlib.metadata.requires`), so the
extra's line in `pyproject.toml` is its only statement; run from a source tree that was never
installed, there is none, and only the SDK's presence is checked. Versions are compared with
`packaging` (PEP 440), pre-releases admitted.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import importlib.util
from functools import cache
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from lexpilot_batch.errors import ConfigError

DISTRIBUTION = "lexpilot-batch"


def extra_needed(provider: str, extra: str) -> str:
    """What to install when a provider's optional SDK is missing."""
    return (
        f'{provider} requests need the optional extra {extra!r}: python -m pip install "lexpilot-batch[{extra}]" '
        f'(from a clone of the repository: python -m pip install -e ".[{extra}]")'
    )


@cache
def extra_requirements(extra: str) -> tuple[Requirement, ...]:
    """The requirements `extra` adds, as this package's installed metadata states them; none when
    the package is not installed (a source tree on the path)."""
    try:
        stated = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return ()
    found = []
    for line in stated:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:  # (not written by us: skipped, as pip would refuse it first)
            continue
        marker = requirement.marker
        if marker is not None and marker.evaluate({"extra": extra}) and not marker.evaluate({"extra": ""}):
            found.append(requirement)
    return tuple(found)


def sdk_problem(module: str, extra: str, provider: str) -> str | None:
    """What to install for `provider`'s requests, whose SDK is `module` (of the extra `extra`): the
    extra when the module is not installed, an upgrade when its distribution is older than the
    extra asks; None when it is fine. Looked up, not imported."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        found = None
    if found is None:
        return extra_needed(provider, extra)
    for requirement in extra_requirements(extra):
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:  # importable without metadata (vendored): taken as it is
            continue
        try:
            version = Version(installed)
        except InvalidVersion:  # a fork's own version string (PEP 440 cannot read it): nothing to compare
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            return (
                f"{provider} requests need {requirement.name}{requirement.specifier} (the optional extra {extra!r}), "
                f'and {requirement.name} {installed} is installed: python -m pip install --upgrade "lexpilot-batch[{extra}]" '
                f'(from a clone of the repository: python -m pip install --upgrade -e ".[{extra}]")'
            )
    return None


def require_sdk(module: str, extra: str, provider: str) -> Any:
    """Import an optional SDK module, or say what installs it (`sdk_problem`)."""
    problem = sdk_problem(module, extra, provider)
    if problem is not None:
        raise ConfigError(problem)
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(extra_needed(provider, extra)) from None
