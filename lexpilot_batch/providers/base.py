"""What the engine needs from a batch provider, and nothing about protocols.

A backend uploads a request file, creates a batch tagged with metadata naming the workspace file,
finds such a batch again after a crash, polls it, downloads its result files and cancels it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True)
class BatchInfo:
    id: str
    status: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_counts: dict[str, int] = field(default_factory=dict)
    errors: list[dict] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class BatchBackend(ABC):
    """One provider endpoint's Files + Batches API."""

    @abstractmethod
    def upload(self, path: Path) -> str:
        """Upload a request file (purpose `batch`); returns the provider's file id."""

    @abstractmethod
    def create(self, input_file_id: str, metadata: dict[str, str]) -> BatchInfo:
        """Create the batch for an uploaded file."""

    @abstractmethod
    def find(self, metadata: dict[str, str]) -> BatchInfo | None:
        """The batch whose metadata holds every given pair, if one exists (crash recovery)."""

    @abstractmethod
    def retrieve(self, batch_id: str) -> BatchInfo:
        """The batch's current state."""

    @abstractmethod
    def download(self, file_id: str, dest: Path) -> None:
        """Save a result file's bytes, untouched, at `dest` (atomically)."""

    @abstractmethod
    def cancel(self, batch_id: str) -> BatchInfo:
        """Ask the provider to cancel a batch."""
