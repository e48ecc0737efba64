"""What `doctor` can find: the kinds of finding, their severities, a `Finding` and the report."""

from __future__ import annotations

from dataclasses import dataclass, field

SCHEMA = "schema"
UNSENT_CHANGED = "unsent_request_file_changed"
SENT_CHANGED = "sent_request_file_changed"
RESULT_MISSING = "result_file_missing"
RESULT_DAMAGED = "result_file_damaged"
DOWNLOAD_HELD = "download_held"
INTERRUPTED_SUBMIT = "interrupted_submit"
PENDING_IN_INGESTED = "pending_in_ingested_file"
THREADS_WAITING = "threads_waiting"
ANOMALIES = "ingest_anomalies"
MANIFEST = "manifest_file"
BATCH_LOST = "batch_lost"
COMPACTED_MISSING = "compacted_file_missing"
COMPACTED_DAMAGED = "compacted_file_damaged"
SECRETS_REPLACED = "secrets_replaced"
OTHER_COPY_BATCHES = "other_copy_batches"
UNTOLD_COPY_BATCHES = "untold_copy_batches"
CANCELLED_ELSEWHERE = "batches_cancelled_elsewhere"

# error: results are at risk or the workspace cannot move on; warning: something a user reads is
# wrong; action: nothing is wrong, a command is due; info: worth knowing, nothing to do.
SEVERITIES = ("error", "warning", "action", "info")


@dataclass(frozen=True)
class Finding:
    """One thing found: what (`kind`), where and how bad (`detail`), what to do (`fix`)."""

    kind: str
    detail: str
    fix: str
    repairable: bool
    severity: str = "error"
    targets: tuple[str, ...] = field(default=(), compare=False)  # workspace-relative paths concerned


@dataclass
class DoctorReport:
    """What `check` found, what it repaired, and what is left."""

    found: list[Finding]
    repaired: list[str]
    remaining: list[Finding]
    # Another command held the writer's lock: the findings are of its last commit, read without it.
    writer_running: bool = False
    claimed: str | None = None  # `--claim-copy`: what this folder became

    @property
    def exit_code(self) -> int:
        """1 while an error or warning remains; `action` and `info` findings need no repair."""
        return 1 if any(f.severity in ("error", "warning") for f in self.remaining) else 0
