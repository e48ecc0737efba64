"""What the native batch APIs' routes share: a native batch is an OpenAI-shaped simulated batch.

Anthropic's Message Batches and Gemini's Batch Mode are served over the same machinery as the
OpenAI routes (`batches`): each native request becomes an OpenAI batch line (`to_chat`), run by the
same simulated roles with the same fault dice, and each OpenAI result line is read back into the
native shape when the batch ends. A request draws its answer from its custom_id, so the id the
OpenAI line carries is the workspace's own (an Anthropic id is mapped back with
`lines.our_id`): the same request draws the same answer, and the same faults, on every route.
A native batch takes the latency an OpenAI batch of the same request file would (`latency`: drawn
by the hash of the file the client sent, rebuilt from Anthropic's inline requests).

Batch-level refusals (`fail_batch`, `token_limit`) are OpenAI's and do not apply here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from lexpilot_batch.simulated import batches
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.faults import Faults
from lexpilot_batch.simulated.store import Store

_dumps = json.JSONEncoder(ensure_ascii=False).encode
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def digest(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode("utf-8")).hexdigest()


def text_of(content: Any) -> str:
    """A message's text: a string, or the text of its content blocks (parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def to_chat(custom_id: str, model: str, messages: list[dict[str, Any]], fields: dict[str, Any]) -> bytes:
    """One OpenAI batch input line."""
    body = {"model": model, "messages": messages, **fields}
    line = {"custom_id": custom_id, "method": "POST", "url": batches.ENDPOINT, "body": body}
    return (_dumps(line) + "\n").encode("utf-8")


def run(
    store: Store,
    lines: list[bytes],
    seed: int,
    faults: Faults,
    native: dict[str, Any],
    sent_sha256: str,
    one_model: bool = True,
) -> dict[str, Any]:
    """Create the OpenAI-shaped batch that runs a native batch's requests; its record. `sent_sha256`,
    the hash of the request file the client sent, draws its latency (`latency.batch_seconds`);
    `one_model`: its requests name one model (a Message Batch's may name several)."""
    source = store.add_file(b"".join(lines), "native-batch-input.jsonl", "internal")
    quiet = dataclasses.replace(faults, fail_batch=0.0, token_limit=0)
    return batches.create(
        store,
        input_file_id=source["id"],
        endpoint=batches.ENDPOINT,
        metadata=None,
        seed=seed,
        faults=quiet,
        native=native,
        sent_sha256=sent_sha256,
        one_model=one_model,
    )


def lines_sha256(requests: list[Any]) -> str:
    """The SHA-256 of inline requests as the request file they were read from: a line of compact
    UTF-8 JSON each, as `providers.lines` writes them (keys in the order they came)."""
    digest = hashlib.sha256()
    for request in requests:
        digest.update((_compact(request) + "\n").encode("utf-8"))
    return digest.hexdigest()


def records_of(store: Store, api: str) -> list[dict[str, Any]]:
    """The batches created through `api`'s routes, newest first."""
    return [r for r in store.batches_newest_first() if r["sim"].get("native", {}).get("api") == api]


def record_of(store: Store, batch_id: str, api: str) -> dict[str, Any] | None:
    record = store.get_batch(batch_id)
    if record is None or record["sim"].get("native", {}).get("api") != api:
        return None
    return record


def finished(record: dict[str, Any], status: str) -> int:
    """How many requests an ended batch ran (the others never ran: expired or cancelled)."""
    sim = record["sim"]
    if status == "expired":
        return int(sim["done_target"])
    if status == "cancelled":
        return int(sim["cancel"]["done"]) if sim["cancel"] else 0
    return int(sim["total"])


def counts(record: dict[str, Any], status: str) -> tuple[int, int, int]:
    """(succeeded, errored, never run) of an ended batch."""
    sim = record["sim"]
    ran = finished(record, status)
    succeeded = sim["outcomes"][:ran].count("o")
    return succeeded, ran - succeeded, int(sim["total"]) - ran


def result_lines(store: Store, batch: dict[str, Any]) -> list[dict[str, Any]]:
    """The OpenAI result lines of a finalised batch: successes, failures and never-run requests."""
    out: list[dict[str, Any]] = []
    for key in ("output_file_id", "error_file_id"):
        if batch.get(key):
            text = store.file_bytes(batch[key]).decode("utf-8")
            out.extend(json.loads(line) for line in text.removesuffix("\n").split("\n") if line)
    return out


def now() -> float:
    return time.time()


# --- batch jobs named by a UUID (Mistral's and Together's) ---------------------------------------


def job_id(batch_id: str) -> str:
    """A simulated batch's id as a job id of the APIs that name jobs by a UUID (Mistral's, Together's)."""
    return str(uuid.UUID(batch_id.removeprefix("batch_")))


def job_record(store: Store, api: str, job: str, param: str) -> dict[str, Any]:
    """The record of the batch `job` (`job_id`) names on `api`'s routes; 404 naming `param` for
    an id that is no UUID or no job of that API."""
    try:
        batch_id = "batch_" + uuid.UUID(job).hex
    except ValueError:
        batch_id = ""
    record = record_of(store, batch_id, api) if batch_id else None
    if record is None:
        raise ApiError(404, f"Batch job {job} not found.", param=param)
    return record


def cancel_job(store: Store, record: dict[str, Any], job: str) -> None:
    """Cancel a job's batch; 400 for one that has ended."""
    try:
        batches.cancel(store, record)
    except ApiError:
        raise bad_request(f"Batch job {job} has ended and cannot be cancelled.") from None
