"""The dataset a workspace remembers: its path beside its hash, and what changed in the file.

Every run's manifest records the dataset file's path and SHA-256 (and for a Hugging Face
dataset's file its `hf://` URL and the commit its revision resolved to). A later `prepare` without
`--dataset` uses the dataset of the workspace's latest run (and says so), rather than silently
falling back to the bundled sample: a Hub file at the commit its run recorded, so that a branch
moved since changes nothing. When the file no longer has the bytes a run was registered with, the
refusal names the file and what changed in it (cases added, removed, edited), read against the
cases the workspace copied in when the run was registered.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lexpilot_batch.data.dataset import DatasetFile
from lexpilot_batch.data.hub import HubFile, is_hub_url, parse_hub_url
from lexpilot_batch.errors import ConfigError, DataError
from lexpilot_batch.util.text import counted

if TYPE_CHECKING:
    from lexpilot_batch.study.runs import RunSpec

SHOWN = 8  # case numbers named per kind of change


@dataclass(frozen=True)
class Remembered:
    source: Path | HubFile  # a Hub file at the commit its run recorded
    sha256: str

    @property
    def label(self) -> str:
        return self.source.url if isinstance(self.source, HubFile) else str(self.source)


def registered_source(manifest: Mapping[str, Any]) -> Path | HubFile | None:
    """The dataset a run's manifest names: a local path, a Hub file (as given: see `dataset_commit`
    for its commit), or None (the bundled sample's runs of old versions named none)."""
    named = manifest.get("dataset_path")
    if not named:
        return None
    if is_hub_url(named):
        try:
            return parse_hub_url(named)
        except DataError:  # not a URL this version writes: named as it is
            return Path(named)
    return Path(named)


def remembered_dataset(db: sqlite3.Connection) -> Remembered | None:
    """The dataset of the workspace's latest run that did not use the bundled sample."""
    for (manifest,) in db.execute("SELECT manifest FROM runs ORDER BY pk DESC"):
        m = json.loads(manifest)
        source = registered_source(m)
        if m.get("bundled_sample") or source is None:
            continue
        if isinstance(source, HubFile) and m.get("dataset_commit"):
            source = source.pinned(m["dataset_commit"])
        return Remembered(source, m["dataset_sha256"])
    return None


def with_remembered_dataset(db: sqlite3.Connection, spec: RunSpec) -> tuple[RunSpec, str | None, Remembered | None]:
    """`spec` with the remembered dataset when it names none, the note that says so, and the
    dataset remembered (None: `spec` named its own, or the workspace remembers none)."""
    if spec.dataset is not None:
        return spec, None, None
    remembered = remembered_dataset(db)
    if remembered is None:
        return spec, None, None
    if isinstance(remembered.source, Path) and not remembered.source.is_file():
        raise ConfigError(
            f"no --dataset given, and the dataset this workspace's runs use, {remembered.source}, is not there any "
            "more; pass --dataset FILE (the same file, moved, resumes the runs)"
        )
    note = (
        f"No --dataset given: using {remembered.label}, the dataset of this workspace's runs "
        "(pass --dataset to use another)."
    )
    return replace(spec, dataset=remembered.source), note, remembered


def refuse_if_changed(db: sqlite3.Connection, remembered: Remembered | None, dataset: DatasetFile) -> None:
    """The remembered dataset, taken without --dataset, is no longer the file the runs were registered
    with: refused, naming what changed, even for a new run id (which would otherwise start on the
    changed file unasked, and split the study in two by dataset)."""
    if remembered is None or dataset.sha256 == remembered.sha256:
        return
    raise ConfigError(
        f"the file {remembered.label} changed since the runs were registered with it (no --dataset given: it is the "
        f"dataset of this workspace's runs): {dataset_changes(db, remembered.sha256, dataset)}.\n"
        f"Restore the file to resume the runs, or pass --dataset {remembered.label} to start new run ids on the "
        "changed file."
    )


def dataset_changes(db: sqlite3.Connection, old_sha256: str, dataset: DatasetFile) -> str:
    """What differs between the cases the workspace holds of dataset `old_sha256` and the file:
    `2 cases added (19, 20); 1 removed (7); 1 edited (3)`, or why it cannot tell."""
    rows = db.execute("SELECT idx, case_number, data FROM cases WHERE dataset = ?", (old_sha256,)).fetchall()
    old = {number: data for _, number, data in rows}
    if not old:
        return "the workspace holds none of the cases it had, so what changed cannot be told"
    new_cases = [(case.case_id, case.model_dump_json()) for case in dataset.read_cases()]
    new = dict(new_cases)
    # Runs of `--limit N` copied in only the first N cases: the file's others were never held, so
    # they are not called "added" (nothing records whether the file had them: they may have been
    # added, or left out by the limit), and an edit among them cannot be named.
    first = max(idx for idx, _, _ in rows) + 1 == len(rows) < len(new_cases)
    compared = [n for n, _ in new_cases[: len(rows)]] if first else list(new)
    added = [n for n in compared if n not in old]
    removed = [n for n in old if n not in new]
    edited = [n for n in old if n in new and json.loads(old[n]) != json.loads(new[n])]
    parts = []
    for numbers, what in ((added, "added"), (removed, "removed"), (edited, "edited")):
        if numbers:
            shown = ", ".join(numbers[:SHOWN]) + (f", ... ({len(numbers)} in all)" if len(numbers) > SHOWN else "")
            parts.append(f"{len(numbers)} case{'s' if len(numbers) != 1 else ''} {what} ({shown})")
    if first:
        parts.append(
            f"the workspace holds the file's first {counted(len(rows), 'case')}, and it now has {len(new_cases)}: the "
            f"{len(new_cases) - len(rows)} after them were added since or left out by --limit, and a change among "
            "them cannot be named"
        )
    if not parts:
        return "the same cases, differently written (order, spacing or fields outside the cases)"
    return "; ".join(parts)
