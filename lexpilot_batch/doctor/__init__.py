"""Checking a workspace for what crashes, hand edits and bugs can leave behind, and mending it.

`diagnose` only reads: the database, and the files the database names. `repair` mends what can be
mended without guessing, each repair in one transaction, and says what it did; everything else is
reported with what to do in words. `check` is the whole `lexpilot-batch doctor` command.

The kinds and the `Finding` live in `findings`, the checks in `diagnosis` (what it says of other
copies of the workspace in `copies`), the mending in `repairs`, the command and its rendering in
`command`; every name is re-exported here.

Repairs never need a provider. A changed request file nobody has received yet is discarded from
the database, and the next command that compiles (`poll-and-advance`) asks for its requests again,
with that command's own provider settings; a lost or damaged result file of a batch nothing was
ingested from is forgotten, and the next poll downloads it again. A repair never re-asks a
request whose answer was ingested, so a repaired run ends with the records an untouched one has.

What is checked:

| kind | severity | repair |
| --- | --- | --- |
| `schema` — migrations this version does not know (a newer version wrote it) | error | no: upgrade |
| `unsent_request_file_changed` — compiled, not yet sent, bytes differ or gone | error | discard: asked again |
| `sent_request_file_changed` — already with the provider, bytes on disk differ | info | no: explained |
| `result_file_missing` / `result_file_damaged` — downloaded, not ingested | error | download again |
| `download_held` — a batch's results stayed damaged however often fetched (`engine.downloads`) | error | no: the next `poll-and-advance` fetches it again; `--repair --accept-damaged` ingests it as it is, its unanswered requests asked again |
| `interrupted_submit` — uploaded or creating: a submit stopped half-way | action | no: run `submit` |
| `batch_lost` — the provider answered 404 for a batch in flight | error | declare it lost: its requests are sent again |
| `pending_in_ingested_file` — requests left pending in an ingested file | warning | fail them |
| `threads_waiting` — active threads, nothing open, nothing pending | action | no: `poll-and-advance` |
| `ingest_anomalies` — result lines not applied (another workspace's, stale, mismatched, unknown, conflicting, unreadable: `ingest`), by kind | info | no: explained |
| `manifest_file` — `runs/.../manifest.json` gone or not what the database holds | warning | rewrite it |
| `compacted_file_missing` — a finished wave's file, kept compressed (`compaction`) or gone before it could be, is neither compressed nor plain | warning | no: restore it |
| `compacted_file_damaged` — (`--deep` only) a compacted file no longer holds the bytes it was packed from | warning | no: restore it |
| `secrets_replaced` — keys a provider or gateway echoed into result files, replaced before they were saved (`files.redacted`) | info | no: explained |
| `batches_cancelled_elsewhere` — the workspace's own batches cancelled at the provider, not by it (`state.waves.cancelled_unasked`): another copy, the console | warning | no: stop the other copy, or `--claim-copy` |
| `untold_copy_batches` — batches carrying this folder's own instance that are not its own: a copy it cannot be told from (`engine.sweep`) | warning | no: `--claim-copy` in the copy |
| `other_copy_batches` — batches another copy of the workspace made for its files (`state.instances`), left alone | info | no: explained |

`--claim-copy` makes the folder a copy of its own first (`state.instances.claim_copy`), for a copy
that cannot be told from the original (a cloned machine).

The database keeps no hash of a downloaded result file until it is compacted, so a "damaged" one
(not yet ingested, hence not compacted) is one that can be seen to be damaged: a line that is not a
result object, or a custom_id that is not one of the file's requests. A file cut exactly between two
lines looks whole here; a batch's download answering fewer requests than the provider counted is
caught when it is ingested (`engine.downloads`: fetched again, then held), so nothing is paid for
twice and nothing wrong is ever scored.
"""

from lexpilot_batch.doctor.command import check, render, render_report
from lexpilot_batch.doctor.diagnosis import diagnose, schema_findings
from lexpilot_batch.doctor.findings import (
    ANOMALIES,
    BATCH_LOST,
    CANCELLED_ELSEWHERE,
    COMPACTED_DAMAGED,
    COMPACTED_MISSING,
    DOWNLOAD_HELD,
    INTERRUPTED_SUBMIT,
    MANIFEST,
    OTHER_COPY_BATCHES,
    PENDING_IN_INGESTED,
    RESULT_DAMAGED,
    RESULT_MISSING,
    SCHEMA,
    SECRETS_REPLACED,
    SENT_CHANGED,
    SEVERITIES,
    THREADS_WAITING,
    UNSENT_CHANGED,
    UNTOLD_COPY_BATCHES,
    DoctorReport,
    Finding,
)
from lexpilot_batch.doctor.repairs import PENDING_FAILED, repair

__all__ = [
    "ANOMALIES",
    "BATCH_LOST",
    "COMPACTED_DAMAGED",
    "COMPACTED_MISSING",
    "DOWNLOAD_HELD",
    "INTERRUPTED_SUBMIT",
    "MANIFEST",
    "CANCELLED_ELSEWHERE",
    "OTHER_COPY_BATCHES",
    "UNTOLD_COPY_BATCHES",
    "PENDING_FAILED",
    "PENDING_IN_INGESTED",
    "RESULT_DAMAGED",
    "RESULT_MISSING",
    "SCHEMA",
    "SECRETS_REPLACED",
    "SENT_CHANGED",
    "SEVERITIES",
    "THREADS_WAITING",
    "UNSENT_CHANGED",
    "DoctorReport",
    "Finding",
    "check",
    "diagnose",
    "render",
    "render_report",
    "repair",
    "schema_findings",
]
