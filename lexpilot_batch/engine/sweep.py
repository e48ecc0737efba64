"""The duplicate sweep: on every poll, the batches at each provider that holds one of ours in flight
are listed, and a live one that is provably a duplicate of its file's recorded batch is cancelled
and kept aside (`other_batches`); its results are never downloaded, so never applied.

A duplicate is a create that committed after its answer was lost, and was sent again
(`engine.recovery`): it is provably this copy's own only where one of its file's creates lost its
answer (`files.lost_answers`; every other create was answered, so no other batch of it exists that
the workspace does not know), and where it is tagged with this copy's instance
(`state.instances`) and the file's very content (`engine.recovery.batch_tag`).

A copy of the workspace (`cp -r`, a backup restored beside the original) asks the same requests
under the same ids and tags its batches with the same workspace and file: its batches are left
alone, never cancelled, adopted or applied, and kept aside as `other_copy` so that `status` and
`doctor` say so. One tagged with this very instance while none of the file's creates lost an
answer is a copy that could not be told from this one (a cloned machine): kept aside as
`untold_copy`, and `doctor` says to run `doctor --claim-copy`. Where batches carry no tag but name
their upload (Together's), a copy may share the upload (the provider keeps one file per content):
there a batch of the upload that the workspace does not know is its own only after one of its
creates lost its answer, and made since. Where they show neither (Anthropic's), no batch is ever
taken for a duplicate while it runs.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from lexpilot_batch.engine.recovery import PROVIDER_SKEW, SWEEP_MARGIN, listed_since
from lexpilot_batch.providers.backends import MANUAL, RUN_HERE
from lexpilot_batch.providers.batch import BatchBackend, BatchInfo, BatchStatus, tagged_by
from lexpilot_batch.state.waves import (
    COPIES,
    DUPLICATE,
    LOST,
    OTHER_COPY,
    SUBMITTED,
    TO_SUBMIT,
    UNTOLD_COPY,
    FileRow,
    file_at,
    file_of_upload,
    keep_aside,
)
from lexpilot_batch.state.workspace import Workspace

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session


def _provably_own(info: BatchInfo, owner: FileRow, instance: str) -> bool:
    """Whether a batch of a file's that is not its recorded batch is provably this copy's own
    duplicate: made after one of the file's creates lost its answer (`files.lost_answers`: without
    one, its every create was answered, and no batch of it is unknown here), and tagged with this
    instance and the file's content, or, untagged, made from the file's upload since (a copy may
    share the upload). Anything else, another copy's batch or one made before copies were told
    apart, is left alone."""
    if owner["lost_answers"] <= 0:
        return False
    if "lexpilot_workspace" in info.metadata:
        mine = {"lexpilot_instance": instance, "lexpilot_sha256": owner["sha256"][:32]}
        return bool(instance) and tagged_by(info, mine)
    since = listed_since(owner["sent_after"], PROVIDER_SKEW)
    return since is None or info.created_at is None or info.created_at >= since


def _whose(info: BatchInfo, owner: FileRow, instance: str) -> str:
    """Why a batch of a file's that is not provably this copy's is kept aside: another copy's, or,
    tagged with this very instance and the file's content (while none of its creates lost an answer),
    a copy's that could not be told from this one (`UNTOLD_COPY`)."""
    twin = {"lexpilot_instance": instance, "lexpilot_sha256": owner["sha256"][:32]}
    return UNTOLD_COPY if instance and tagged_by(info, twin) else OTHER_COPY


def _owner(db: sqlite3.Connection, info: BatchInfo, ours: dict[str, str]) -> FileRow | None:
    """The workspace file a listed batch is of: by its tag, or, untagged, by the upload it was made
    from (an id only this workspace holds); None for a batch of no file of ours."""
    if tagged_by(info, ours):
        return file_at(db, info.metadata.get("lexpilot_file", ""))
    if info.input_file_id is None:
        return None
    return file_of_upload(db, info.input_file_id)


def sweep(ws: Workspace, session: Session, rows: list[FileRow], duplicates: list[str]) -> dict[int, set[str]]:
    """List the workspace's tagged batches at each provider that holds a batch of ours in flight;
    cancel every live one that is provably a duplicate of its file's recorded batch (a create
    committed after its answer was lost, and created again) and keep it aside; keep aside, and
    leave alone, another copy's (`OTHER_COPY`). The ids cancelled are added to `duplicates`.
    Returns the ids listed, per backend."""
    listed: dict[int, set[str]] = {}
    by_backend: dict[int, tuple[BatchBackend, list[float | None]]] = {}
    ours = {"lexpilot_workspace": ws.workspace_id}
    for row in rows:
        if row["status"] != SUBMITTED or row["backend"] in (*RUN_HERE, MANUAL):
            continue
        backend = session.batch_backend(row)
        by_backend.setdefault(id(backend), (backend, []))[1].append(row["sent_after"])
    db = ws.store.conn
    for key, (backend, sent_after) in by_backend.items():
        # Back from the oldest file in flight, by the provider's clock (all, for one sent before
        # its times were recorded).
        oldest = None if None in sent_after else min(t for t in sent_after if t is not None)
        every = list(backend.batches(listed_since(oldest, SWEEP_MARGIN)))
        listed[key] = {b.id for b in every}
        # An untagged backend's batches are no one's here, unless they name the upload they were
        # made from (Together's): otherwise its duplicates cannot be told while they run.
        for info in every:
            owner = _owner(db, info, ours)
            if owner is None or owner["status"] in TO_SUBMIT:
                continue  # not ours to judge; or a file being created, whose batch `submit` adopts
            if owner["batch_id"] == info.id and (owner["status"] != LOST or info.terminal):
                continue  # its file's own (a lost one that came back is not: its requests went again)
            seen = db.execute("SELECT why, status FROM other_batches WHERE batch_id = ?", (info.id,)).fetchone()
            if seen is not None and seen["status"] == info.status:
                continue
            # Another copy's once, another copy's for good: its status is followed, nothing more.
            mine = (seen is None or seen["why"] not in COPIES) and (
                owner["batch_id"] == info.id or _provably_own(info, owner, ws.instance_id)
            )
            if mine and not info.terminal and info.status != BatchStatus.CANCELLING:
                info = backend.cancel_live(info.id)
                duplicates.append(info.id)
            with ws.store.transaction() as tx:
                why = DUPLICATE if mine else _whose(info, owner, ws.instance_id)  # kept as first recorded
                keep_aside(tx, info.id, owner["pk"], owner["path"], why, info.status)
    return listed
