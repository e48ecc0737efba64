"""Reading provider result files back into request state: ingesting a downloaded batch, or a
result file the user ran elsewhere (the manual backend).

Accepts OpenAI's output and error files and vLLM `run-batch`'s single file (errors inline,
`error` a string or an object), and the result files of the native batch APIs (Anthropic's
Message Batches, Gemini's Batch Mode), each line read as an OpenAI one first (`providers.shapes`). Everything one batch's result files change is applied in one
transaction; applying them again changes nothing. A line that cannot be read, a custom_id the
workspace does not know, or one answered twice is recorded as an anomaly and reported, never
silently dropped. A request the files do not mention is failed so that it is retried. What a line
means is decided in `answers`.

Ingest runs for every request of every wave, so its inner loop is kept lean: lines parsed by one
reused decoder, the file's requests read as plain tuples, each distinct answer of a file parsed
once (judges give the same few answers thousands of times), nothing but a tuple built per line.
"""

from __future__ import annotations

import hashlib
import json
import operator
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexpilot_batch.answers import judge_line, read_content
from lexpilot_batch.compaction import open_saved, saved_exists
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.fileio import write_atomic
from lexpilot_batch.providers.shapes import Normalise, file_api, normaliser
from lexpilot_batch.redaction import redact
from lexpilot_batch.request_lines import id_tag
from lexpilot_batch.waves import INGESTED, close_finished_waves, file_status, files_of_requests, update_file
from lexpilot_batch.workspace import Workspace

_DECODER = json.JSONDecoder()
_ENCODE_VALUE = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(v, ensure_ascii=False)
_last = operator.itemgetter(-1)


@dataclass
class IngestStats:
    answered: int = 0
    failed: int = 0
    missing: int = 0
    duplicates: int = 0
    unknown: int = 0
    bad_lines: int = 0
    anomalies: list[str] = field(default_factory=list)

    def add(self, other: IngestStats) -> None:
        for name in ("answered", "failed", "missing", "duplicates", "unknown", "bad_lines"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.anomalies.extend(other.anomalies)


def _loads(text: str) -> Any:
    """`json.loads(text)` for a stripped, non-empty line, minus its per-call overhead.

    Same result and same `JSONDecodeError`s: json.loads refuses a BOM, skips JSON whitespace
    (which a stripped line has at neither end) and refuses anything after the value.
    """
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    obj, end = _DECODER.raw_decode(text)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return obj


def read_lines(path: Path) -> Iterator[tuple[int, dict | None, str]]:
    """(line number, parsed object or None, raw text) for every non-blank line, streaming; a saved
    file of a finished wave is read from its compacted copy (`compaction`)."""
    with open_saved(path) as fh:
        for number, raw in enumerate(fh, 1):
            text = raw.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            try:
                obj = _loads(text)
            except json.JSONDecodeError:
                yield number, None, text
                continue
            yield number, obj if isinstance(obj, dict) else None, text


def result_lines(path: Path, normalise: Normalise | None = None) -> Iterator[tuple[int, dict | None, str]]:
    """`read_lines`, each object read as an OpenAI batch output line by `normalise` (None: it is one);
    an object it cannot read is a bad line."""
    if normalise is None:
        yield from read_lines(path)
        return
    for number, line, raw in read_lines(path):
        if line is not None:
            try:
                line = normalise(line)
            except (TypeError, AttributeError, ValueError):
                line = None
        yield number, line, raw


def file_normaliser(ws: Workspace, row: dict) -> Normalise | None:
    """How the saved results of a workspace file read as OpenAI batch output lines."""
    return normaliser(file_api(row), id_tag(ws.workspace_id))


def apply_result_files(
    db: sqlite3.Connection,
    file_pks: list[int],
    paths: list[Path],
    unanswered_reason: str | None,
    unanswered_kind: str = "transport",
    normalise: Normalise | None = None,
) -> IngestStats:
    """Apply result files to the requests of these request files (caller holds the transaction).

    `unanswered_reason`, when given, fails every request of the files that no line answered (the
    batch is over); when None (a partial manual ingest), such requests stay pending. `normalise`
    reads a native API's lines as OpenAI ones (`providers.shapes`).
    """
    stats = IngestStats()
    file_pk = file_pks[0] if len(file_pks) == 1 else None  # where anomalies are filed
    # custom_id -> (pk, parser, n_claims, status): plain tuples, this reads every request of the file
    rows: dict[str, tuple[int, str, int, str]] = {}
    cursor = db.cursor()
    cursor.row_factory = None
    for pk in file_pks:
        for request_pk, custom_id, parser, n_claims, status in cursor.execute(
            "SELECT pk, custom_id, parser, n_claims, status FROM requests WHERE file_pk = ?", (pk,)
        ):
            rows[custom_id] = (request_pk, parser, n_claims, status)
    seen: set[str] = set()
    updates: list[tuple] = []
    now = time.time()
    # Judges answer the same few ways thousands of times: each distinct content is parsed, and its
    # value encoded as stored, once per call. (Pure functions of the key; nothing outlives the call.)
    answers: dict[tuple[str, str, int], tuple[bool, str | None, str | None, str | None]] = {}

    def answer(content: str, parser: str, n_claims: int) -> tuple[bool, str | None, str | None, str | None]:
        key = (content, parser, n_claims)
        known = answers.get(key)
        if known is None:
            ok, text, value, error = read_content(content, parser, n_claims)
            known = answers[key] = (ok, text, _ENCODE_VALUE(value) if ok else None, error)
        return known

    def anomaly(kind: str, custom_id: str | None, detail: str) -> None:
        detail = redact(detail)  # it may quote a line, and so what the provider echoed
        db.execute(
            "INSERT INTO anomalies (file_pk, kind, custom_id, detail, at) VALUES (?, ?, ?, ?, ?)",
            (file_pk, kind, custom_id, detail, now),
        )
        stats.anomalies.append(f"{kind}: {detail}")

    for path in paths:
        for number, line, raw in result_lines(path, normalise):
            if line is None or not isinstance(line.get("custom_id"), str):
                stats.bad_lines += 1
                anomaly("bad_line", None, f"{path.name} line {number} is not a result object: {raw[:80]!r}")
                continue
            custom_id = line["custom_id"]
            row = rows.get(custom_id)
            if row is None:
                stats.unknown += 1
                anomaly(
                    "unknown_custom_id",
                    custom_id,
                    f"{path.name} line {number}: {custom_id!r} is not a pending request here",
                )
                continue
            request_pk, parser, n_claims, status = row
            if custom_id in seen or status != "pending":
                stats.duplicates += 1
                anomaly("duplicate", custom_id, f"{path.name} line {number}: {custom_id!r} was already ingested")
                continue
            seen.add(custom_id)
            ok, text, value_json, error, error_kind, usage = judge_line(line, parser, n_claims, answer)
            prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens = usage
            if ok:
                stats.answered += 1
                updates.append(
                    (
                        "answered",
                        text,
                        value_json,
                        None,
                        None,
                        prompt_tokens,
                        completion_tokens,
                        reasoning_tokens,
                        cached_tokens,
                        request_pk,
                    )
                )
            else:
                stats.failed += 1
                updates.append(
                    (
                        "failed",
                        None,
                        None,
                        error,
                        error_kind,
                        prompt_tokens,
                        completion_tokens,
                        reasoning_tokens,
                        cached_tokens,
                        request_pk,
                    )
                )
    # In key order rather than the shuffled order of the lines, so that each page of the table is
    # visited once (every request is written at most once: the order changes nothing else).
    updates.sort(key=_last)
    db.executemany(
        "UPDATE requests SET status = ?, text = ?, value = ?, error = ?, error_kind = ?, prompt_tokens = ?,"
        " completion_tokens = ?, reasoning_tokens = ?, cached_tokens = ? WHERE pk = ?",
        updates,
    )
    if unanswered_reason is not None:
        leftover = [
            (unanswered_reason, unanswered_kind, r[0])
            for cid, r in rows.items()
            if cid not in seen and r[3] == "pending"
        ]
        stats.missing = len(leftover)
        db.executemany("UPDATE requests SET status = 'failed', error = ?, error_kind = ? WHERE pk = ?", leftover)
    return stats


def ingest_file(ws: Workspace, row: dict) -> IngestStats:
    """Apply a downloaded batch's results in one transaction; the file is then `ingested`."""
    paths = [ws.path(row[k]) for k in ("output_path", "error_path") if row[k]]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise LexpilotError(
            f"saved result file(s) missing: {', '.join(missing)}; they were downloaded for batch "
            f"{row['batch_id']} — restore them, or run `{ws.command('doctor --repair')}` to download them again"
        )
    reason = f"not in the results of batch {row['batch_id']} ({row['batch_status']})"
    # Requests an expired or cancelled batch never reached were not tried; neither were those of
    # a batch refused for the enqueued-token limit. Any other failed batch counts as a failure.
    kind = "unexecuted" if row["batch_status"] in ("expired", "cancelled") else "transport"
    errors = json.loads(row["batch_errors"] or "[]")
    if row["batch_status"] == "failed" and errors:
        first = errors[0]
        reason = f"batch {row['batch_id']} failed: {first.get('code')}: {first.get('message')}"
        if first.get("code") == "token_limit_exceeded":
            kind = "unexecuted"
    with ws.store.transaction() as db:
        if file_status(db, row["pk"]) == INGESTED:
            return IngestStats()
        stats = apply_result_files(db, [row["pk"]], paths, reason, kind, file_normaliser(ws, row))
        update_file(db, row["pk"], status=INGESTED)
    return stats


def ingest_external(ws: Workspace, source: Path, wave: int | None = None) -> tuple[IngestStats, list[str]]:
    """Ingest a result file produced elsewhere (OpenAI output/error shape, or vLLM `run-batch`).

    The file is first saved untouched under `responses/`, then applied in one transaction to the
    request files its custom_ids belong to (only files of `wave` when given). A request file all
    of whose requests are answered or failed is then done; the others stay in flight for a
    further file. Ingesting the same file again changes nothing.
    """
    if not source.is_file():
        raise LexpilotError(f"{source}: no such file to ingest")
    data = source.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    ids: set[str] = set()
    for _number, line, _raw in read_lines(source):
        if line is not None and isinstance(line.get("custom_id"), str):
            ids.add(line["custom_id"])
    if not ids:
        raise LexpilotError(
            f"{source}: no result lines with a custom_id; expected the batch output shape "
            '{"custom_id": ..., "response": {...}, "error": ...} one JSON object per line'
        )
    found = files_of_requests(ws.store.conn, ids)
    targets = [f for f in found if wave is None or f["wave"] == wave]
    if not targets:
        where = f" of wave {wave}" if wave is not None else ""
        raise LexpilotError(
            f"{source}: none of its {len(ids)} custom_ids belong to a request file{where} of this workspace; "
            "check --root and --wave"
        )
    first = min(f["wave"] for f in targets)
    saved = ws.wave_dir("responses", first) / f"ingested-{digest[:12]}-{source.name}"
    if not saved_exists(saved):
        write_atomic(saved, data)
    with ws.store.transaction() as tx:
        stats = apply_result_files(tx, [f["pk"] for f in targets], [saved], None)
        done = []
        for f in targets:
            pending = tx.execute(
                "SELECT COUNT(*) FROM requests WHERE file_pk = ? AND status = 'pending'", (f["pk"],)
            ).fetchone()[0]
            if pending == 0 and f["status"] != INGESTED:
                update_file(
                    tx,
                    f["pk"],
                    status=INGESTED,
                    batch_status="completed",
                    output_path=ws.relative(saved),
                    finished_at=time.time(),
                )
                done.append(f["path"])
    close_finished_waves(ws)
    return stats, done
