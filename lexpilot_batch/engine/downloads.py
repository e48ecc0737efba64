"""A batch's results: saved, checked against what the provider reported, and believed only then.

A completed batch whose result download comes back as HTTP 200 with an empty body, an HTML page,
text that is not JSON lines, or cut short or a line short, ingested as it is, would fail every
request it does not answer and send them again: paid for twice, although the provider still holds
every answer. So a batch's results are checked while they are ingested, in the ingest's own
transaction (`ingest.ingest_file`), before anything of them is kept (`damage`):

| check | a download fails it when |
| --- | --- |
| shape | a line is not a result object: not JSON (an HTML page, a gateway's text, a line cut short), or JSON without an id |
| count | its lines answer fewer of the file's requests than the provider counted completed and failed (`request_counts`); where the API reports no counts (Together's jobs; Gemini's batches, whose counts its SDK does not read), fewer than every request of a batch that `completed`; a batch that `failed` (refused whole, nothing ran) is held to no count |

What the content type is, is read from the bytes (an HTML page is no JSON line), not from the
header, which gateways set either way. A line beyond a bound of `result_lines` (too large, too
deep, or not UTF-8 but readable) is what the provider sent, no sign of a broken download: its
request fails and is sent again, as before (`ingest`); it counts as a line. One that cannot be read
at all, not UTF-8 included (a cut in the middle of a character), is damage. A line answering another request is an
anomaly, not damage, and answers none of the file's.

A download that fails is rolled back whole (nothing applied, no anomaly recorded) and fetched again,
the batch retrieved again first (a provider may name new file ids), up to `TRIES` times in one
command, with backoff (`DAMAGED_BACKOFF`), each wait a wait for the provider (`clock.wait_for_provider`:
told, and within `--outage-wait`; a command stopped there leaves a saved download the next one checks). One still damaged is **held** (`files.held` says why):
its last download stays saved, nothing of it is applied, and none of its requests is asked again;
`status` and `doctor` name it. Every later command fetches it again, once (`Session.refetched`), so
a provider's hiccup mends itself. `doctor --repair --accept-damaged` ingests it as it is: the one
way its unanswered requests are asked again, and paid for again.

Files the engine writes itself (the sync and flex backends' outputs) and the manual backend's
are not downloads, and are not checked so.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING

from lexpilot_batch.engine.ingest import DamagedDownload, IngestStats, ingest_file
from lexpilot_batch.providers.backends import BATCH_LIKE
from lexpilot_batch.providers.batch import BatchBackend, BatchInfo, BatchNotFound, BatchStatus
from lexpilot_batch.state.waves import FileRow, file_row, mark_downloaded, set_file, update_file
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock

if TYPE_CHECKING:
    from lexpilot_batch.engine.session import Session

# Downloads of one batch's results in one command, the first included, before it is held.
TRIES = 4
# The waits between them, 2, 4 and 8 s: time for a gateway's hiccup to pass, not enough to hang a command.
DAMAGED_BACKOFF = clock.Backoff(2.0, 60.0)


def held_advice(ws: Workspace, n: int) -> str:
    """What `status` and the commands that stop with held batches say of them."""
    return (
        f"{n} batch(es) held: their results came back damaged {TRIES} times in a row (`{ws.command('doctor')}` "
        "names them), so none of their requests is answered or asked again; the next "
        f"`{ws.command('poll-and-advance --submit')}` fetches them again. If the provider keeps sending them "
        f"damaged, `{ws.command('doctor --repair --accept-damaged')}` takes them as they are and asks again "
        "(pays again for) the requests they do not answer"
    )


def _reported(row: FileRow) -> int:
    """The requests the provider counted completed and failed (`request_counts`, as recorded when
    the results were downloaded); 0 where it counts none."""
    counts = json.loads(row["request_counts"] or "{}") or {}
    return int(counts.get("completed") or 0) + int(counts.get("failed") or 0)


def expected_lines(row: FileRow) -> int | None:
    """How many of the file's requests its saved results must answer, by what the provider reported;
    None when it reported nothing to hold them to: no counts (or zeros) for a batch that did not
    complete, or a batch that failed (refused as a whole, it ran nothing to be paid for twice)."""
    if row["batch_status"] == BatchStatus.FAILED:
        return None
    reported = _reported(row)
    if reported:
        return min(reported, row["n_requests"])
    if row["batch_status"] == BatchStatus.COMPLETED:
        return row["n_requests"]  # an API without counts: a batch that completed ran every request
    return None


def damage(row: FileRow, stats: IngestStats) -> str | None:
    """Why a batch's saved results cannot be all the provider holds (the module's table), or None."""
    where = " and ".join(Path(p).name for p in (row["output_path"], row["error_path"]) if p) or "no result file"
    if stats.unreadable:
        return f"{where}: {stats.unreadable} line(s) are not result lines (not JSON lines: an error page, or cut short)"
    expected = expected_lines(row)
    if expected is not None and stats.present < expected:
        counted = "the provider counted" if _reported(row) else "it completed:"
        return (
            f"{where}: {stats.present} of its requests answered, where {counted} {expected} "
            f"(batch {row['batch_id']}, {row['batch_status']})"
        )
    return None


def checked(row: FileRow) -> bool:
    """Whether a file's results are a download of a provider's batch, to be checked (`damage`)."""
    return row["backend"] in BATCH_LIKE


def download(ws: Workspace, backend: BatchBackend, row: FileRow, info: BatchInfo) -> None:
    """Save the batch's result files under `responses/` (a key in them replaced on the way,
    `redaction.Scrubber`), then record that they are saved, with what the provider reported."""
    stem = Path(row["path"]).stem
    out_dir = ws.wave_dir("responses", row["wave"])
    paths: dict[str, str | None] = {"output_path": None, "error_path": None}
    redacted = 0
    for kind, file_id in (("output", info.output_file_id), ("error", info.error_file_id)):
        if file_id:
            dest = out_dir / f"{stem}.{kind}.jsonl"
            redacted += backend.download(file_id, dest) or 0
            paths[f"{kind}_path"] = ws.relative(dest)
    with ws.store.transaction() as db:
        mark_downloaded(
            db,
            row["pk"],
            info.status,
            info.request_counts,
            paths["output_path"],
            paths["error_path"],
            batch_errors=json.dumps(info.errors, ensure_ascii=False),
            output_file_id=info.output_file_id,
            error_file_id=info.error_file_id,
            redacted=redacted,
        )


def collect(
    ws: Workspace, session: Session, backend: BatchBackend, row: FileRow, info: BatchInfo | None
) -> IngestStats | None:
    """Download (unless `info` is None: its results are saved already), check and ingest a terminal
    batch's results, fetching a damaged download again (the module docstring); None when it is held."""
    session.refetched.add(row["pk"])
    batch_id = row["batch_id"]
    assert batch_id is not None  # a batch file's
    for attempt in range(TRIES):
        if info is not None:
            download(ws, backend, row, info)
            row = file_row(ws.store.conn, row["pk"])
        try:
            return ingest_file(ws, row, check=functools.partial(damage, row))
        except DamagedDownload as exc:
            why = str(exc)
        last = attempt + 1 == TRIES
        with ws.store.transaction() as db:
            update_file(db, row["pk"], damaged=row["damaged"] + 1, held=why if last else None)
        if last:
            return None
        # Told (`--wait`'s lines), and within `--outage-wait`: many batches damaged are never a silent hang.
        clock.wait_for_provider(DAMAGED_BACKOFF.wait(attempt), f"batch {batch_id}: {why}; fetching it again", attempt)
        try:
            info = backend.retrieve(batch_id)
        except BatchNotFound as exc:  # (a provider that purged it: nothing to fetch it from)
            set_file(ws, row["pk"], held=f"{why}; fetching it again: {exc}")
            return None
    raise AssertionError("unreachable")  # pragma: no cover
