"""Reading provider result files back into request state: ingesting a downloaded batch, or a
result file the user ran elsewhere (the manual backend).

Accepts OpenAI's output and error files and vLLM `run-batch`'s single file (errors inline,
`error` a string or an object), and the result files of the native batch APIs (Anthropic's
Message Batches, Gemini's Batch Mode), each line read as an OpenAI one first (`providers.results`),
every line within the bounds of `result_lines`. Everything one batch's result files change is
applied in one transaction; applying them again changes nothing. What a line means is decided in
`answers`. A request the files do not mention is failed so that it is retried. A judge's own
words (its whole content and its reasoning, `answers.own_words`) are kept in the same transaction
as what they decided, the malformed ones too (`state.judge_words`).

A line is applied only to the request whose custom_id it carries exactly, among the requests of
the files being ingested: the id names the workspace and the request's hash
(`ids.request_check`), so an answer to anything else is never taken in. What is not
applied is recorded as an anomaly, once (the same anomaly seen again, as when a file is ingested
twice, is not recorded again), and counted by `status` and `doctor`:

| kind | the line |
| --- | --- |
| `bad_line` | is not a result object with an id: not JSON, cut, or beyond a bound of `result_lines` with no id found |
| `foreign` | answers another workspace's request (another tag in its id) |
| `stale` | answers a request of this workspace in another file: an earlier attempt, another wave |
| `mismatch` | names a request here (run, case, step, attempt) with another hash: an answer to another prompt |
| `unknown_custom_id` | carries an id that is none of these |
| `conflict` | is a second, different result for a request already decided (by an earlier line or ingest); the first is kept |
| `too_large`, `too_deep`, `invalid_utf8` | is beyond a bound of `result_lines`: its request fails with the reason and is sent again |

A second result the same as the first (the same file ingested again, a line repeated) is no
anomaly: it is only counted (`IngestStats.duplicates`). Workspaces of earlier versions may also
hold `duplicate` anomalies, which every repeated line used to record.

Ingest runs for every request of every wave, so its inner loop is kept lean: lines parsed by one
reused decoder, the file's requests read as plain tuples, each distinct answer of a file parsed
once (judges give the same few answers thousands of times), nothing but a tuple built per line.
Looking into why a line is not applied costs queries, only for such lines.
"""

from __future__ import annotations

import codecs
import json
import operator
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexpilot_batch.engine.answers import INVALID, TRANSPORT, answered_at, judge_line, own_words, read_content
from lexpilot_batch.engine.result_lines import INVALID_UTF8, TOO_DEEP, TOO_LARGE, Flaw, read_lines, result_lines
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.backends import MANUAL
from lexpilot_batch.providers.batch import BatchStatus
from lexpilot_batch.providers.ids import id_parts, id_tag
from lexpilot_batch.providers.lines import any_our_id
from lexpilot_batch.providers.registry import file_api, result_reader
from lexpilot_batch.providers.results import Normalise
from lexpilot_batch.state.anomalies import record_anomaly
from lexpilot_batch.state.compaction import saved_exists
from lexpilot_batch.state.judge_words import Words, record_words
from lexpilot_batch.state.requests import apply_results, fail_requests
from lexpilot_batch.state.states import UNEXECUTED, RequestState
from lexpilot_batch.state.waves import (
    DONE,
    INGESTED,
    FileRow,
    close_finished_waves,
    file_row,
    file_status,
    files_of_requests,
    update_file,
)
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util import clock, collector
from lexpilot_batch.util.fileio import file_sha256, write_atomic
from lexpilot_batch.util.redaction import Scrubber, redact, redact_cut, scrub

BAD_LINE = "bad_line"
FOREIGN = "foreign"
STALE = "stale"
MISMATCH = "mismatch"
UNKNOWN = "unknown_custom_id"
CONFLICT = "conflict"
# What a request whose line is beyond a bound of `result_lines` failed as: an answer too large is
# unusable like a truncated one; a line too deep or not UTF-8 is as unreadable as a cut one.
_FLAW_KIND = {TOO_LARGE: INVALID, INVALID_UTF8: INVALID, TOO_DEEP: TRANSPORT}

_ENCODE_VALUE = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(v, ensure_ascii=False)
_last = operator.itemgetter(-1)
_COPY_CHUNK = 1 << 20


@dataclass
class IngestStats:
    answered: int = 0
    failed: int = 0
    missing: int = 0
    duplicates: int = 0  # lines repeating the result their request already has: changed nothing
    conflicts: int = 0  # lines with another result for a request already decided: not applied
    unknown: int = 0  # lines answering no request of these files: foreign, stale, mismatched, unknown
    bad_lines: int = 0
    # What `downloads.damage` holds a download to: the lines that are no result line (not JSON, or
    # no id) and not a line too large or too deep either; the files' requests its lines answer.
    unreadable: int = 0
    present: int = 0
    coming: int = 0  # `ingest FILE`'s lines for requests whose answer a provider will deliver: not applied
    anomalies: list[str] = field(default_factory=list)

    def add(self, other: IngestStats) -> None:
        for name in (
            "answered",
            "failed",
            "missing",
            "duplicates",
            "conflicts",
            "unknown",
            "bad_lines",
            "unreadable",
            "present",
            "coming",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.anomalies.extend(other.anomalies)


def file_normaliser(ws: Workspace, row: Mapping[str, Any]) -> Normalise | None:
    """How the saved results of a workspace file read as OpenAI batch output lines."""
    return result_reader(file_api(row), id_tag(ws.workspace_id))


def apply_result_files(
    db: sqlite3.Connection,
    file_pks: list[int],
    paths: list[Path],
    unanswered_reason: str | None,
    unanswered_kind: str = TRANSPORT,
    normalise: Normalise | None = None,
    tag: str = "",
    coming: frozenset[str] = frozenset(),
) -> IngestStats:
    """Apply result files to the requests of these request files (caller holds the transaction).

    `unanswered_reason`, when given, fails every request of the files that no line answered (the
    batch is over); when None (a partial manual ingest), such requests stay pending. `normalise`
    reads a native API's lines as OpenAI ones (`providers.results`). `tag` is the workspace's
    (`ids.id_tag`), to tell another workspace's lines among those it does not apply. A line for a
    request in `coming` (a provider will deliver its answer: `ingest_external`) is only counted.
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
    # custom_id -> what decided it in this call: (True, text) for an answer, (False, error) for a failure
    seen: dict[str, tuple[bool, str | None]] = {}
    updates: list[tuple] = []
    words: list[Words] = []  # each judge attempt's own words, kept beside what it decided
    now = clock.now()
    # Judges answer the same few ways thousands of times: each distinct content is parsed, and its
    # value encoded as stored, once per call. (Pure functions of the key; nothing outlives the call.)
    answers: dict[tuple[str, str, int], tuple[bool, str | None, str | None, str | None]] = {}
    recorded: set[tuple[str, str | None, str]] | None = None  # anomalies already in the table, once needed

    def answer(content: str, parser: str, n_claims: int) -> tuple[bool, str | None, str | None, str | None]:
        key = (content, parser, n_claims)
        known = answers.get(key)
        if known is None:
            ok, text, value, error = read_content(content, parser, n_claims)
            known = answers[key] = (ok, text, _ENCODE_VALUE(value) if ok else None, error)
        return known

    def anomaly(kind: str, custom_id: str | None, detail: str) -> None:
        detail = redact(detail)  # it may quote a line, and so what the provider echoed
        custom_id = redact(custom_id) if custom_id else custom_id  # a stray line's id is the provider's words too
        nonlocal recorded
        if recorded is None:
            recorded = set(cursor.execute("SELECT kind, custom_id, detail FROM anomalies"))
        if (kind, custom_id, detail) in recorded:
            return  # seen before (the same file again): reported then
        recorded.add((kind, custom_id, detail))
        record_anomaly(db, file_pk, kind, custom_id, detail, now)
        stats.anomalies.append(f"{kind}: {detail}")

    earlier: set[str] = set()  # requests decided before this call that its lines answer again
    beyond = 0  # lines beyond a bound of `result_lines`, without an id
    for path in paths:
        for number, line, raw, flaw in result_lines(path, normalise):
            if line is None or not isinstance(line.get("custom_id"), str):
                stats.bad_lines += 1
                if flaw is None or flaw.kind == INVALID_UTF8:
                    stats.unreadable += 1  # not JSON, or cut (in the middle of a character, too)
                else:
                    beyond += 1
                why = flaw.reason if flaw is not None else "is not a result object"
                anomaly(BAD_LINE, None, f"{path.name} line {number}: {why}: {redact_cut(raw, 80)!r}")
                continue
            custom_id = line["custom_id"]
            row = rows.get(custom_id)
            if row is None and custom_id in coming:
                stats.coming += 1
                continue
            if row is None:
                stats.unknown += 1
                kind, why = stray(db, custom_id, tag)
                anomaly(
                    kind, custom_id, f"{path.name} line {number}: {redact_cut(custom_id, 100)!r} {why}; not applied"
                )
                continue
            request_pk, parser, n_claims, status = row
            if flaw is not None:
                anomaly(flaw.kind, custom_id, f"{path.name} line {number}: {flaw.reason}")
                result = _flawed(line, flaw)
            else:
                result = judge_line(line, parser, n_claims, answer)
            ok, text, value_json, error, error_kind, usage = result
            decided = (True, text) if ok else (False, error)
            if custom_id in seen or status != RequestState.PENDING:
                if custom_id not in seen:
                    earlier.add(custom_id)
                first = seen.get(custom_id) or _stored(db, request_pk)
                if decided == first:
                    stats.duplicates += 1  # the same result again: nothing to apply, nothing to report
                elif flaw is None:  # (an unreadable line is no second result: its anomaly says it all)
                    stats.conflicts += 1
                    anomaly(
                        CONFLICT,
                        custom_id,
                        f"{path.name} line {number}: another result for {custom_id!r}, {_said(decided)}, than the "
                        f"{_said(first)} it already has, which is kept",
                    )
                continue
            seen[custom_id] = decided
            if parser != "text":  # a judge's answer: its words too, usable or not (`state.judge_words`)
                said, reasoning = own_words(line)
                if said is not None or reasoning is not None:
                    words.append((request_pk, said, reasoning))
            prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, written_tokens, cost = usage
            used = (prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, written_tokens, cost)
            when = answered_at(line, now)  # (`answers.answered_at`: what a price by the hour reads)
            if ok:
                stats.answered += 1
                updates.append((RequestState.ANSWERED, text, value_json, None, None, *used, when, request_pk))
            else:
                stats.failed += 1
                updates.append((RequestState.FAILED, None, None, error, error_kind, *used, when, request_pk))
    # In key order rather than the shuffled order of the lines, so that each page of the table is
    # visited once (every request is written at most once: the order changes nothing else).
    updates.sort(key=_last)
    apply_results(db, updates)
    stats.present = len(seen) + len(earlier) + beyond
    record_words(db, words)
    if unanswered_reason is not None:
        leftover = [
            (unanswered_reason, unanswered_kind, r[0])
            for cid, r in rows.items()
            if cid not in seen and r[3] == RequestState.PENDING
        ]
        stats.missing = len(leftover)
        fail_requests(db, leftover)
    return stats


def _flawed(line: dict, flaw: Flaw) -> tuple:
    """A request's result from a line beyond a bound of `result_lines`: failed with the reason (and
    the tokens it used, when the line could be read at all)."""
    usage = judge_line(line, "text", 0)[5] if flaw.kind == INVALID_UTF8 else (None, None, None, None, None, None)
    return False, None, None, f"unusable result line: {flaw.reason}", _FLAW_KIND[flaw.kind], usage


def _stored(db: sqlite3.Connection, request_pk: int) -> tuple[bool, str | None]:
    """What decided a request in an earlier ingest, as `apply_result_files` compares results."""
    status, text, error = db.execute("SELECT status, text, error FROM requests WHERE pk = ?", (request_pk,)).fetchone()
    return (True, text) if status in (RequestState.ANSWERED, RequestState.DISCARDED) else (False, error)


def _said(result: tuple[bool, str | None]) -> str:
    ok, what = result
    return f"answer {redact_cut(what or '', 40)!r}" if ok else f"failure {redact_cut(what or '', 80)!r}"


def stray(db: sqlite3.Connection, custom_id: str, tag: str) -> tuple[str, str]:
    """Why a result line's id is no request of the files being ingested: (anomaly kind, why)."""
    # An id another workspace mapped (Anthropic's, `anthropic.ids`) stays mapped in its result line: read it too.
    parts = id_parts(custom_id) or id_parts(any_our_id(custom_id) or "")
    if parts is not None and parts.tag != tag:
        return FOREIGN, f"is another workspace's request (tag {parts.tag}; this workspace's is {tag})"
    other = db.execute("SELECT wave, attempt FROM requests WHERE custom_id = ?", (custom_id,)).fetchone()
    if other is not None:
        return STALE, f"is a request of wave {other[0]} (attempt {other[1]}), not of this file"
    if parts is not None:
        # The ids that share its stem (run, case, step, attempt): a range of the custom_id index.
        stem = parts.stem + "-"
        for (named,) in db.execute(
            "SELECT custom_id FROM requests WHERE custom_id >= ? AND custom_id < ?", (stem, parts.stem + ".")
        ):
            if (named_parts := id_parts(named)) is not None and named_parts.stem == parts.stem:
                return MISMATCH, f"names the request {named!r} with another request's hash (another prompt)"
    return UNKNOWN, "is not a request of this workspace"


class DamagedDownload(LexpilotError):
    """A batch's saved results fail the check of `ingest_file`: nothing of them was applied."""


def ingest_file(ws: Workspace, row: FileRow, check: Callable[[IngestStats], str | None] | None = None) -> IngestStats:
    """Apply a downloaded batch's results in one transaction; the file is then `ingested`.

    `check` says what is wrong with results that must not be believed (`downloads.damage`), from
    what applying them found: then the transaction is rolled back whole and `DamagedDownload`
    raised, saying it. A file taken as it is (held, then accepted) keeps why it was held."""
    paths = [ws.path(rel) for rel in (row["output_path"], row["error_path"]) if rel]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise LexpilotError(
            f"saved result file(s) missing: {', '.join(missing)}; they were downloaded for batch "
            f"{row['batch_id']} — restore them, or run `{ws.command('doctor --repair')}` to download them again"
        )
    reason = f"not in the results of batch {row['batch_id']} ({row['batch_status']})"
    # Requests an expired or cancelled batch never reached were not tried; neither were those of
    # a batch refused for the enqueued-token limit. Any other failed batch counts as a failure.
    kind = UNEXECUTED if row["batch_status"] in (BatchStatus.EXPIRED, BatchStatus.CANCELLED) else TRANSPORT
    errors = json.loads(row["batch_errors"] or "[]")
    if row["batch_status"] == BatchStatus.FAILED and errors:
        first = errors[0]
        reason = f"batch {row['batch_id']} failed: {first.get('code')}: {first.get('message')}"
        if first.get("code") == "token_limit_exceeded":
            kind = UNEXECUTED
    with collector.paused(), ws.store.transaction() as db:
        if file_status(db, row["pk"]) == INGESTED:
            return IngestStats()
        stats = apply_result_files(
            db, [row["pk"]], paths, reason, kind, file_normaliser(ws, row), id_tag(ws.workspace_id)
        )
        if check is not None and (why := check(stats)) is not None:
            raise DamagedDownload(why)
        update_file(db, row["pk"], status=INGESTED, **({"held": None} if check is not None else {}))
    return stats


def ingest_external(ws: Workspace, source: Path, wave: int | None = None) -> tuple[IngestStats, list[str]]:
    """Ingest a result file produced elsewhere (OpenAI output/error shape, or vLLM `run-batch`).

    The file is first saved under `responses/` (any key in it replaced, `redaction.Scrubber`),
    then applied in one transaction to the request files its custom_ids belong to (only files of
    `wave` when given). A request file all of whose requests are answered or failed is then done;
    the others stay in flight for a further file. Ingesting the same file again changes nothing.
    The file is read a line at a time (`result_lines`), and copied in chunks: a huge line costs no
    memory.

    A late `ingest` never takes the place of an answer a provider will deliver: lines for requests
    of a file still with a provider (`answers_coming`: its batch running, its sync or flex file not
    yet run) are not applied, only counted (`IngestStats.coming`), and a file of nothing else is
    refused, naming the batches. Their answers are paid for; holding the lines until the batch ends
    would gain nothing, since the batch's own answer wins and a request it fails is asked again.
    """
    if not source.is_file():
        raise LexpilotError(f"{source}: no such file to ingest")
    with open(source, "rb") as fh:
        start = fh.read(2)
    if start == b"\x1f\x8b":
        raise LexpilotError(
            f"{source}: a gzip-compressed file (the workspace keeps finished waves' files so, and has "
            f"ingested them); to ingest one, decompress it first: python -m gzip -d {source}"
        )
    if start in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        # What Windows PowerShell 5.1's `>` and `Out-File` write.
        raise LexpilotError(
            f"{source}: UTF-16 text (as PowerShell 5.1's > writes); result files are UTF-8: save it again "
            "as UTF-8 (Get-Content FILE | Set-Content -Encoding utf8 NEW) or download it with a tool "
            "that writes the provider's bytes (curl -o, Invoke-WebRequest -OutFile)"
        )
    digest = file_sha256(source) or ""
    ids: set[str] = set()
    for _number, line, _raw, _flaw in read_lines(source):
        if line is not None and isinstance(line.get("custom_id"), str):
            ids.add(line["custom_id"])
    if not ids:
        raise LexpilotError(
            f"{source}: no result lines with a custom_id; expected the batch output shape "
            '{"custom_id": ..., "response": {...}, "error": ...} one JSON object per line'
        )
    found = files_of_requests(ws.store.conn, ids)
    targets = [f for f in found if wave is None or f["wave"] == wave]
    tag = id_tag(ws.workspace_id)
    # A provider will deliver these files' answers, paid for: a line of this file must not take
    # their place (then the paid answer would be dropped as a conflict). They are not applied.
    coming_files = [f for f in targets if answers_coming(f)]
    targets = [f for f in targets if not answers_coming(f)]
    coming = frozenset(_ids_of_files(ws, coming_files, ids))
    if coming_files and not targets:
        named = "; ".join(
            f"{f['path']} (batch {f['batch_id'] or 'not yet created'}, {f['status']})" for f in coming_files[:3]
        )
        more = f"; and {len(coming_files) - 3} more" if len(coming_files) > 3 else ""
        raise LexpilotError(
            f"{source}: its {len(coming)} result line(s) answer requests a provider will answer: {named}{more}. "
            "Their answers are paid for and are taken when their batch ends "
            f"(`{ws.command('poll-and-advance')}`), so nothing of this file was applied: `ingest` is for "
            "the requests of files on the manual backend (or of batches already ended, whose answers it never replaces)"
        )
    if not targets:
        where = f" of wave {wave}" if wave is not None else ""
        foreign = sum(stray(ws.store.conn, cid, tag)[0] == FOREIGN for cid in ids)
        whose = (
            f"; {foreign} of them are another workspace's requests (another tag than this workspace's {tag}): "
            "this is the output of another workspace, nothing was applied"
            if foreign
            else ""
        )
        raise LexpilotError(
            f"{source}: none of its {len(ids)} custom_ids belong to a request file{where} of this workspace"
            f"{whose}; check --root and --wave"
        )
    first = min(f["wave"] for f in targets)
    saved = ws.wave_dir("responses", first) / f"ingested-{digest[:12]}-{source.name}"
    scrubber = Scrubber()
    if not saved_exists(saved):
        write_atomic(saved, scrub(_chunks(source), scrubber))  # its keys replaced, as a download's
    with ws.store.transaction() as tx:
        stats = apply_result_files(tx, [f["pk"] for f in targets], [saved], None, tag=tag, coming=coming)
        if scrubber.replaced:
            first_target = file_row(tx, targets[0]["pk"])
            update_file(tx, first_target["pk"], redacted=first_target["redacted"] + scrubber.replaced)
        done = []
        for f in targets:
            pending = tx.execute(
                f"SELECT COUNT(*) FROM requests WHERE file_pk = ? AND status = '{RequestState.PENDING}'", (f["pk"],)
            ).fetchone()[0]
            if pending == 0 and f["status"] != INGESTED:
                update_file(
                    tx,
                    f["pk"],
                    status=INGESTED,
                    batch_status=BatchStatus.COMPLETED,
                    output_path=ws.relative(saved),
                    finished_at=clock.now(),
                )
                done.append(f["path"])
    close_finished_waves(ws)
    return stats, done


def answers_coming(row: FileRow) -> bool:
    """Whether a provider (a batch, the sync or flex backend) will deliver the answers of a file's
    requests: one not on the manual backend, not yet ingested nor lost."""
    return row["backend"] != MANUAL and row["status"] not in DONE


def _ids_of_files(ws: Workspace, rows: list[FileRow], ids: set[str]) -> set[str]:
    """Which of `ids` are requests of these files."""
    pks = {r["pk"] for r in rows}
    if not pks:
        return set()
    owners = dict(
        ws.store.conn.execute(
            f"SELECT custom_id, file_pk FROM requests WHERE file_pk IN ({','.join('?' * len(pks))})", tuple(pks)
        ).fetchall()
    )
    return {cid for cid in ids if owners.get(cid) in pks}


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while chunk := fh.read(_COPY_CHUNK):
            yield chunk
