"""Reading provider result files back into request state.

Accepts OpenAI's output and error files and vLLM `run-batch`'s single file (errors inline,
`error` a string or an object). Everything one batch's result files change is applied in one
transaction; applying them again changes nothing. A line that cannot be read, a custom_id the
workspace does not know, or one answered twice is recorded as an anomaly and reported, never
silently dropped. A request the files do not mention is failed so that it is retried.

Ingest runs for every request of every wave, so its inner loop is kept lean: lines parsed by one
reused decoder, the file's requests read as plain tuples, each distinct answer of a file parsed
once (judges give the same few answers thousands of times), no `Outcome` built per line.
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexpilot_batch import judges
from lexpilot_batch.judges import MalformedOutput

# Error codes of requests a batch never ran: not the request's fault, so they do not use up its
# --retries (they have a budget of their own, see compiler.UNEXECUTED_ATTEMPTS).
UNEXECUTED_CODES = frozenset({"batch_expired", "batch_cancelled"})

_DECODER = json.JSONDecoder()
_ENCODE_VALUE = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(v, ensure_ascii=False)
_USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")
_NO_USAGE = (None, None, None, None)
_last = operator.itemgetter(-1)


@dataclass(frozen=True)
class Outcome:
    """What one result line means for its request."""

    ok: bool
    text: str | None = None
    value: Any = None
    error: str | None = None
    # transport (provider or network) | invalid (unusable content) | unexecuted (the batch ended
    # before running it: expired, cancelled, over the enqueued-token limit)
    error_kind: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


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


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        return f"{code}: {message}" if code else str(message or error)
    return str(error)


def _usage(body: dict) -> tuple[int, int, int, int]:
    """(prompt, completion, cached, reasoning) tokens, as `_USAGE_FIELDS` names them."""
    usage = body.get("usage") or {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return (
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        int(prompt_details.get("cached_tokens") or 0),
        int(completion_details.get("reasoning_tokens") or 0),
    )


def parse_answer(content: str, parser: str, n_claims: int) -> tuple[str, Any]:
    """The usable text and value of a response, or `MalformedOutput`."""
    text = judges.parse_text(content)
    if parser == "text":
        return text, text
    if parser == "lca_label":
        return text, judges.parse_lca_label(content)
    if parser == "dcg_decision":
        return text, judges.parse_dcg_decision(content)
    if parser == "verdicts":
        return text, judges.parse_verdicts(content, n_claims)
    raise ValueError(f"unknown parser {parser!r}")


def outcome_of(line: dict, parser: str, n_claims: int) -> Outcome:
    """Apply SPEC §6's validation to one result line."""
    ok, text, value, error, error_kind, usage = _judge_line(line, parser, n_claims)
    return Outcome(
        ok,
        text=text,
        value=value,
        error=error,
        error_kind=error_kind,
        usage=dict(zip(_USAGE_FIELDS, usage, strict=True)) if usage is not _NO_USAGE else {},
    )


def _answer(content: str, parser: str, n_claims: int) -> tuple[bool, str | None, Any, str | None]:
    """(ok, text, value, error) of a response's content."""
    try:
        text, value = parse_answer(content, parser, n_claims)
    except MalformedOutput as exc:
        return False, None, None, f"malformed: {exc}"
    return True, text, value, None


def _judge_line(
    line: dict, parser: str, n_claims: int, answer: Callable[[str, str, int], tuple] = _answer
) -> tuple[bool, str | None, Any, str | None, str | None, tuple]:
    """`outcome_of` as a plain tuple (ok, text, value, error, error_kind, usage as `_usage`
    gives it or `_NO_USAGE`): what ingest stores, without building an `Outcome` per line.
    `answer` reads the content (`_answer`, or ingest's memo of it)."""
    error = line.get("error")
    response = line.get("response")
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        kind = "unexecuted" if code in UNEXECUTED_CODES else "transport"
        return False, None, None, _error_text(error), kind, _NO_USAGE
    if not isinstance(response, dict):
        return False, None, None, "no response and no error in the result line", "transport", _NO_USAGE
    status = response.get("status_code")
    body = response.get("body")
    if status != 200:
        detail = body.get("error") if isinstance(body, dict) else body
        return False, None, None, f"HTTP {status}: {_error_text(detail)}", "transport", _NO_USAGE
    if not isinstance(body, dict) or not body.get("choices"):
        return False, None, None, "response body has no choices", "transport", _NO_USAGE
    usage = _usage(body)
    choice = body["choices"][0] or {}
    message = choice.get("message") or {}
    content = message.get("content")
    if choice.get("finish_reason") == "length":
        return False, None, None, "truncated (finish_reason=length)", "invalid", usage
    if not isinstance(content, str) or not content.strip():
        return False, None, None, "empty content", "invalid", usage
    ok, text, value, error = answer(content, parser, n_claims)
    if not ok:
        return False, None, None, error, "invalid", usage
    return True, text, value, None, None, usage


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
    """(line number, parsed object or None, raw text) for every non-blank line, streaming."""
    with open(path, "rb") as fh:
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


def apply_result_files(
    db: Any,
    file_pks: list[int],
    paths: list[Path],
    unanswered_reason: str | None,
    unanswered_kind: str = "transport",
) -> IngestStats:
    """Apply result files to the requests of these request files (caller holds the transaction).

    `unanswered_reason`, when given, fails every request of the files that no line answered (the
    batch is over); when None (a partial manual ingest), such requests stay pending.
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
            ok, text, value, error = _answer(content, parser, n_claims)
            known = answers[key] = (ok, text, _ENCODE_VALUE(value) if ok else None, error)
        return known

    def anomaly(kind: str, custom_id: str | None, detail: str) -> None:
        db.execute(
            "INSERT INTO anomalies (file_pk, kind, custom_id, detail, at) VALUES (?, ?, ?, ?, ?)",
            (file_pk, kind, custom_id, detail, now),
        )
        stats.anomalies.append(f"{kind}: {detail}")

    for path in paths:
        for number, line, raw in read_lines(path):
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
            ok, text, value_json, error, error_kind, usage = _judge_line(line, parser, n_claims, answer)
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
