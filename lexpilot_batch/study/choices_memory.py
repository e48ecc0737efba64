"""What a workspace remembers of how its runs were prepared besides the dataset
(`study.dataset_memory`): the categories file and the User Model and judge.

A later `prepare` (or `run`) without `--categories` uses the categories file of the workspace's
latest run when that was not the bundled mapping, and one without `--user-model` or
`--judge-model` (nor a models file naming them) uses that run's role models, saying so each time,
rather than silently going back to the bundled mapping and the default models — which refused the
dataset, blaming the bundled file, or made a settings diff of a run id that was being resumed. A
remembered categories file no longer there is refused, naming it. Prices, backends and how the
tail travels are remembered by the session (`engine.session`, `study.price_memory`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from lexpilot_batch.errors import ConfigError, DataError
from lexpilot_batch.util import resources

if TYPE_CHECKING:
    from lexpilot_batch.study.runs import RunSpec

T = TypeVar("T")

ROLE_OPTIONS = {"user_model": ("--user-model", "User Model"), "judge_model": ("--judge-model", "judge")}


def _latest_manifest(db: sqlite3.Connection) -> dict | None:
    row = db.execute("SELECT manifest FROM runs ORDER BY pk DESC LIMIT 1").fetchone()
    return json.loads(row[0]) if row else None


def _bundled(path: Path) -> bool:
    try:
        return path.resolve() == Path(resources.default_categories()).resolve()
    except OSError:
        return False


def with_remembered_choices(db: sqlite3.Connection, spec: RunSpec) -> tuple[RunSpec, list[str]]:
    """`spec` with the categories file and role models of the workspace's latest run where it gave
    none, and the notes that say so."""
    manifest = _latest_manifest(db)
    if manifest is None:
        return spec, []
    notes: list[str] = []
    kept = manifest.get("categories_path")
    if spec.categories is None and kept and not _bundled(Path(kept)):
        path = Path(kept)
        if not path.is_file():
            raise ConfigError(
                f"no --categories given, and the categories file this workspace's runs were registered with, {path}, "
                "is not there any more; pass --categories FILE (the same file, moved, resumes the runs)"
            )
        spec = replace(spec, categories=path)
        notes.append(
            f"No --categories given: using {path}, the categories file of this workspace's runs "
            "(pass --categories to use another)."
        )
    settings = spec.settings
    for field, (option, role) in ROLE_OPTIONS.items():
        recorded = manifest.get(field)
        if field in spec.defaulted and recorded and recorded != getattr(settings, field):
            settings = replace(settings, **{field: recorded})
            notes.append(
                f"No {option} given: using {recorded}, the {role} of this workspace's runs (pass {option} to use another)."
            )
    return replace(spec, settings=settings), notes


def with_categories_named(db: sqlite3.Connection, spec: RunSpec, open_it: Callable[[], T]) -> T:
    """`open_it()` (the dataset opened against `spec.categories`); a categories file that does not
    cover the dataset, when the workspace's runs were registered with another, is refused naming
    that one too: the error named only the file it was given."""
    try:
        return open_it()
    except DataError as exc:
        manifest = _latest_manifest(db)
        kept = manifest.get("categories_path") if manifest else None
        given = spec.categories or Path(resources.default_categories())
        if not exc.args[0].startswith("Categories file") or not kept or Path(kept).resolve() == given.resolve():
            raise
        raise DataError(
            f"{exc.args[0]} This workspace's runs were registered with the categories file {kept}: "
            f"pass --categories {kept} to go on with them.",
            exc.problems,
        ) from None
