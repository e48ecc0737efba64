"""Sending a wave's compiled files: each on its backend, under its model's enqueued-token budget.

A batch file is uploaded once (`recovery.upload_once`), then its batch created once
(`recovery.create_once`), each step recorded before the next (`state.waves`): a file uploaded but
not yet batched is batched by the next command, an upload or a create whose answer was lost is
looked for before it is sent again. A file is created
only while its model's enqueued-token budget has room (`budgets`); the rest of a wave goes as
earlier batches finish, and a file larger than a lowered budget is discarded and its requests
asked again, cut to the budget. A create the provider refuses at once for the quota (Azure's HTTP
400 `token_limit_exceeded`) lowers the budget as a batch that failed so does, and the file waits.
Sync and manual files only get marked as sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lexpilot_batch.engine import budgets
from lexpilot_batch.engine.recovery import (
    Earlier,
    Lookup,
    ProviderTimes,
    UnresolvedCreate,
    adopt,
    await_batch,
    batch_tag,
    create_once,
    grace_left,
    record_batch,
    upload_once,
)
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.backends import MANUAL, RUN_HERE
from lexpilot_batch.providers.batch import BatchBackend, BatchInfo, QuotaRefused
from lexpilot_batch.state.waves import (
    COMPILED,
    CREATING,
    TO_SUBMIT,
    UPLOADED,
    FileRow,
    create_refused,
    discard_unsent_file,
    files_in,
    lost_answer,
    mark_creating,
    mark_sent_locally,
    mark_uploaded,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock
from lexpilot_batch.util.fileio import unlink_quietly

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session


class TamperedFile(LexpilotError):
    """A compiled request file changed or vanished on disk before it was sent."""


@dataclass
class SubmitResult:
    submitted: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    manual: list[str] = field(default_factory=list)  # left for the user to run elsewhere
    waiting: list[str] = field(default_factory=list)  # waiting for room under the enqueued-token budget
    discarded: list[str] = field(default_factory=list)  # larger than the lowered budget: asked again
    unresolved: list[str] = field(default_factory=list)  # a lost create's batch not yet told apart (why)
    # Request files changed on disk since compiling (a hand edit), compiled again from the
    # database before anything was sent: the edit was not sent (`loop.submit` says so).
    rebuilt: list[str] = field(default_factory=list)


def submit_files(ws: Workspace, session: Session, on_file: Callable[[str], None] | None = None) -> SubmitResult:
    """Send every compiled file of the workspace on its backend, recording each step; a batch file
    whose model has no room under its enqueued-token budget waits."""
    result = SubmitResult()
    rows = files_in(ws.store.conn, TO_SUBMIT)
    full: set[str] = set()  # models with no room left: their later files wait too, in order
    restored = Earlier(ws)
    times = ProviderTimes()
    for row in rows:
        if row["backend"] in (*RUN_HERE, MANUAL):
            # Nothing to upload: a sync file is executed when polled, a manual one by the user.
            with ws.store.transaction() as db:
                mark_sent_locally(db, row["pk"], row["backend"])
            (result.manual if row["backend"] == MANUAL else result.submitted).append(row["path"])
            if on_file:
                on_file(row["path"])
            continue
        backend: BatchBackend = session.batch_backend(row)
        if row["status"] != CREATING:
            room = _room(ws, session, row, full)
            if room is None:
                result.discarded.append(row["path"])
                continue
            if not room:
                result.waiting.append(row["path"])
                continue
        if row["status"] != CREATING:
            earlier = restored.find(backend, row)
            if earlier is not None:
                # Created before this database was restored from a backup (or its record was lost):
                # adopted, never created twice.
                adopt(ws, row, earlier)
                result.adopted.append(row["path"])
                result.submitted.append(row["path"])
                if on_file:
                    on_file(row["path"])
                continue
        if row["status"] == COMPILED:
            file_id = upload_once(ws, backend, row, times)
            with ws.store.transaction() as db:
                mark_uploaded(db, row["pk"], file_id)
            row["status"] = UPLOADED
            row["provider_file_id"] = file_id
        batch: BatchInfo | None = None
        try:
            if row["status"] == CREATING:
                # We may have created it and died before recording its id: find it, never duplicate it.
                # A provider may commit a create a moment after answering: look for what is left
                # of the grace period.
                with ws.store.transaction() as db:
                    lost_answer(db, row["pk"])
                left = grace_left(row["creating_at"], session.options.create_grace)
                batch = await_batch(Lookup(ws, backend, row, batch_tag(ws, row)), left)
                if batch is not None:
                    result.adopted.append(row["path"])
            if batch is None:
                row["creates"] = (row["creates"] or 0) + 1
                row["sent_after"] = times.before_sending(backend)
                row["instance"] = ws.instance_id or None  # this copy's: its tag tells it from another copy's
                look = Lookup(ws, backend, row, batch_tag(ws, row))
                row["creating_at"] = at = clock.now()
                with ws.store.transaction() as db:
                    mark_creating(db, row["pk"], row["creates"], at, row["sent_after"], row["instance"])
                batch = create_once(look, session.options.create_grace)
        except UnresolvedCreate as exc:
            result.unresolved.append(f"{row['path']}: {exc}")
            continue
        except QuotaRefused as exc:
            # Refused at once for the quota, nothing created: the budget is lowered as after a
            # batch that failed so, and the file waits for room; no attempt of any request is used.
            _refused_at_create(ws, row, str(exc))
            full.add(row["model"])
            result.waiting.append(row["path"])
            continue
        with ws.store.transaction() as db:
            record_batch(db, row["pk"], batch)
        result.submitted.append(row["path"])
        if on_file:
            on_file(row["path"])
    return result


def _refused_at_create(ws: Workspace, row: FileRow, message: str) -> None:
    """A create refused for the enqueued-token quota (`batch.QuotaRefused`), in one transaction:
    the model's budget lowered (`budgets.lower_after_refusal`), the file back to `uploaded`."""
    with ws.store.transaction() as db:
        model = row["model"]
        others = budgets.enqueued(db, model, but=row["pk"])
        budgets.lower_after_refusal(db, model, message, others, row["tokens"], budgets.factor(db, model))
        create_refused(db, row["pk"])


def _room(ws: Workspace, session: Session, row: FileRow, full: set[str]) -> bool | None:
    """Whether the file's model has room for it under its enqueued-token budget now; None when it
    never will (larger than the whole budget, which a refusal lowered): then the file is discarded,
    and its requests are asked again in the next wave, in files cut to the budget."""
    model = row["model"]
    if model in full:
        return False
    db = ws.store.conn
    limit = budgets.budget(db, model, session.file_route(row).limits.enqueued_tokens)
    if limit is None:
        return True
    scale = budgets.factor(db, model)
    waiting = budgets.enqueued(db, model)
    if row["tokens"] * scale <= limit - waiting * scale:
        return True
    if row["tokens"] * scale > limit and not waiting:
        with ws.store.transaction() as tx:
            discard_unsent_file(tx, row["pk"])
        unlink_quietly(ws.path(row["path"]))
        return None
    full.add(model)
    return False
