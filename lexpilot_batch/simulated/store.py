"""The simulated provider's persisted state: uploaded and generated files, and batch records.

Layout of the state folder (every write is a temp file + `os.replace`, so a crash leaves the old
or the new version of a file, never half of one):

    files/<file_id>.json           the FileObject
    files/<file_id>.data           the file's bytes (written before its FileObject)
    batches/<batch_id>.json        {"batch": Batch object as last persisted, "sim": timeline}
    batches/<batch_id>.results     the simulated result lines, in processing order
    batches/<batch_id>.prefixes    the prompt prefixes the batch's requests left in the provider's
                                   cache (`caching`), written before the batch's record
    sync.prefixes                  those the synchronous calls left, appended

Everything is loaded into memory when the store opens, so a server restarted on the same folder
knows every file and batch. One lock serialises writers inside a process; two servers on one
folder are not supported.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from lexpilot_batch.simulated.caching import PrefixCache
from lexpilot_batch.util.fileio import TMP_SUFFIX, write_atomic


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, indent=1).encode("utf-8")


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


class Store:
    """Files and batches of one state folder, cached in memory, persisted on every change."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.files_dir = self.root / "files"
        self.batches_dir = self.root / "batches"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        self.batches_dir.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self._files: dict[str, dict[str, Any]] = {}
        self._batches: dict[str, dict[str, Any]] = {}
        # Creates refused at once (`Faults.refuse_at_create`) per input digest: such a create
        # stores no batch, and the next one of the same content draws its fate again.
        self.refused_creates: dict[str, int] = {}
        self._load()
        self.prefixes = PrefixCache(self.root)
        self._seq = max((r["sim"]["seq"] for r in self._batches.values()), default=0)

    def _load(self) -> None:
        for folder in (self.files_dir, self.batches_dir):
            for stray in folder.glob(f".*{TMP_SUFFIX}"):
                stray.unlink(missing_ok=True)
        for path in self.files_dir.glob("*.json"):
            # A FileObject whose bytes are missing was never fully created: skip it.
            if path.with_suffix(".data").exists():
                self._files[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        for path in self.batches_dir.glob("*.json"):
            self._batches[path.stem] = json.loads(path.read_text(encoding="utf-8"))

    # --- files -------------------------------------------------------------------------------

    def add_file(
        self,
        data: bytes | memoryview,
        filename: str,
        purpose: str,
        file_id: str | None = None,
        expires: int | None = None,
    ) -> dict[str, Any]:
        """Persist bytes and their FileObject; a given `file_id` is overwritten (idempotent).
        `expires`: the seconds of an `expires_after` it was given (`Faults.file_cap` counts the others)."""
        file_id = file_id or new_id("file-")
        now = int(time.time())
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": now,
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
            "expires_at": now + (expires or 30 * 24 * 3600) if purpose == "batch" or expires else None,
            "status_details": None,
        }
        if expires:
            obj["sim_expires"] = expires
        with self.lock:
            write_atomic(self.files_dir / f"{file_id}.data", data)
            write_atomic(self.files_dir / f"{file_id}.json", _dump(obj))
            self._files[file_id] = obj
        return dict(obj)

    def get_file(self, file_id: str) -> dict[str, Any] | None:
        with self.lock:
            obj = self._files.get(file_id)
            return dict(obj) if obj else None

    def file_bytes(self, file_id: str) -> bytes:
        with self.lock:
            return (self.files_dir / f"{file_id}.data").read_bytes()

    def list_files(self) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(f) for f in self._files.values()]

    def count_unexpiring(self) -> int:
        """Batch input and output files held without an `expires_after` (`Faults.file_cap`)."""
        with self.lock:
            return sum(
                1
                for f in self._files.values()
                if f["purpose"] in ("batch", "batch_output") and not f.get("sim_expires")
            )

    def delete_file(self, file_id: str) -> bool:
        with self.lock:
            if self._files.pop(file_id, None) is None:
                return False
            # The FileObject goes first so that a crash never leaves an object without bytes.
            (self.files_dir / f"{file_id}.json").unlink(missing_ok=True)
            (self.files_dir / f"{file_id}.data").unlink(missing_ok=True)
            return True

    # --- batches -----------------------------------------------------------------------------

    def put_batch(self, record: dict[str, Any]) -> None:
        batch_id = record["batch"]["id"]
        with self.lock:
            write_atomic(self.batches_dir / f"{batch_id}.json", _dump(record))
            self._batches[batch_id] = record

    def next_seq(self) -> int:
        """A creation counter: orders batches even when their timestamps tie."""
        with self.lock:
            self._seq += 1
            return self._seq

    def get_batch(self, batch_id: str) -> dict[str, Any] | None:
        with self.lock:
            return self._batches.get(batch_id)

    def batches_newest_first(self) -> list[dict[str, Any]]:
        with self.lock:
            records = list(self._batches.values())
        return sorted(records, key=lambda r: r["sim"]["seq"], reverse=True)

    def count_batches(self, digest: str) -> int:
        """How many batches were created from input of this content (`sim.digest`)."""
        with self.lock:
            return sum(1 for r in self._batches.values() if r["sim"].get("digest") == digest)

    def forget_batches(self) -> int:
        """Drop every batch, as a provider that lost its queue in a restart; files stay. Returns how many."""
        with self.lock:
            n = len(self._batches)
            for path in [*self.batches_dir.glob("*.json"), *self.batches_dir.glob("*.results")]:
                path.unlink(missing_ok=True)
            self._batches.clear()
            self.prefixes.load()  # the forgotten batches' prefixes go with them
            return n

    def write_prefixes(self, batch_id: str, new: list[bytes]) -> None:
        """The prefixes a batch's requests left in the cache: before its record, so that a batch never
        recorded leaves none after a restart (`caching.PrefixCache.load`)."""
        if new:
            write_atomic(self.batches_dir / f"{batch_id}.prefixes", b"".join(new))

    def write_results(self, batch_id: str, lines: list[str]) -> None:
        body = "".join(line + "\n" for line in lines)
        write_atomic(self.batches_dir / f"{batch_id}.results", body.encode("utf-8"))

    def read_results(self, batch_id: str) -> list[str]:
        path = self.batches_dir / f"{batch_id}.results"
        if not path.exists():
            return []
        # Only "\n" ends a line: str.splitlines() also breaks at U+2028, U+2029 and U+0085, which
        # json.dumps(ensure_ascii=False) leaves raw inside strings.
        text = path.read_text(encoding="utf-8")
        return text.removesuffix("\n").split("\n") if text else []
