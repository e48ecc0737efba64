"""Reading provider result files back into request state.

Accepts OpenAI's output and error files and vLLM `run-batch`'s single file (errors inline,
`error` a string or an object). Everything one batch's result files change is applied in one
transaction; applying them again changes nothing. A line that cannot be read, a custom_id the
workspace does not know, or one answered twice is recorded as an anomaly and reported, never
silently dropped. A request the files do not mention is failed so that it is retried.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexpilot_batch import judges
from lexpilot_batch.judges import MalformedOutput


# Error codes of requests a batch never ran: not the request's fault, so they do not use up its
# --retries (they have a budget of their own, see compiler.UNEXECUTED_ATTEMPTS).
UNEXECUTED_CODES = frozenset({"batch_expired", "batch_cancelled"})


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


def _usage(body: dict) -> dict[str, int]:
    usage = body.get("usage") or {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return {
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": int(usage.get("completion_tokens") or 0),
        "cached_tokens": int(prompt_details.get("cached_tokens") or 0),
        "reasoning_tokens": int(completion_details.get("reasoning_tokens") or 0),
    }


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
    error = line.get("error")
    response = line.get("response")
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        kind = "unexecuted" if code in UNEXECUTED_CODES else "transport"
        return Outcome(False, error=_error_text(error), error_kind=kind)
    if not isinstance(response, dict):
        return Outcome(False, error="no response and no error in the result line", error_kind="transport")
    status = response.get("status_code")
    body = response.get("body")
    if status != 200:
        detail = body.get("error") if isinstance(body, dict) else body
        return Outcome(False, error=f"HTTP {status}: {_error_text(detail)}", error_kind="transport")
    if not isinstance(body, dict) or not body.get("choices"):
        return Outcome(False, error="response body has no choices", error_kind="transport")
    usage = _usage(body)
    choice = body["choices"][0] or {}
    message = choice.get("message") or {}
    content = message.get("content")
    if choice.get("finish_reason") == "length":
        return Outcome(False, error="truncated (finish_reason=length)", error_kind="invalid", usage=usage)
    if not isinstance(content, str) or not content.strip():
        return Outcome(False, error="empty content", error_kind="invalid", usage=usage)
    try:
        text, value = parse_answer(content, parser, n_claims)
    except MalformedOutput as exc:
        return Outcome(False, error=f"malformed: {exc}", error_kind="invalid", usage=usage)
    return Outcome(True, text=text, value=value, usage=usage)


def read_lines(path: Path) -> Iterator[tuple[int, dict | None, str]]:
    """(line number, parsed object or None, raw text) for every non-blank line, streaming."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, 1):
            text = raw.decode("utf-8", errors="replace").strip()
            if not text:
                continue
            try:
                obj = json.loads(text)
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
    rows = {}
    for pk in file_pks:
        rows.update(
            (r["custom_id"], r)
            for r in db.execute(
                "SELECT pk, custom_id, parser, n_claims, status FROM requests WHERE file_pk = ?", (pk,)
            )
        )
    seen: set[str] = set()
    updates: list[tuple] = []
    now = time.time()

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
                anomaly("unknown_custom_id", custom_id, f"{path.name} line {number}: {custom_id!r} is not a pending request here")
                continue
            if custom_id in seen or row["status"] != "pending":
                stats.duplicates += 1
                anomaly("duplicate", custom_id, f"{path.name} line {number}: {custom_id!r} was already ingested")
                continue
            seen.add(custom_id)
            outcome = outcome_of(line, row["parser"], row["n_claims"])
            usage = outcome.usage
            if outcome.ok:
                stats.answered += 1
            else:
                stats.failed += 1
            updates.append(
                (
                    "answered" if outcome.ok else "failed",
                    outcome.text,
                    json.dumps(outcome.value, ensure_ascii=False) if outcome.ok else None,
                    outcome.error,
                    outcome.error_kind,
                    usage.get("prompt_tokens"),
                    usage.get("completion_tokens"),
                    usage.get("reasoning_tokens"),
                    usage.get("cached_tokens"),
                    row["pk"],
                )
            )
    db.executemany(
        "UPDATE requests SET status = ?, text = ?, value = ?, error = ?, error_kind = ?, prompt_tokens = ?,"
        " completion_tokens = ?, reasoning_tokens = ?, cached_tokens = ? WHERE pk = ?",
        updates,
    )
    if unanswered_reason is not None:
        leftover = [
            (unanswered_reason, unanswered_kind, r["pk"])
            for cid, r in rows.items()
            if cid not in seen and r["status"] == "pending"
        ]
        stats.missing = len(leftover)
        db.executemany(
            "UPDATE requests SET status = 'failed', error = ?, error_kind = ? WHERE pk = ?", leftover
        )
    return stats
