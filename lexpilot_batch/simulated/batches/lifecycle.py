"""A batch's life after it was run, as a pure function of its stored record and the wall clock:

    validating -> in_progress -> finalizing -> completed       (latency L: 10% / 80% / 10% of L, `latency`)
    validating -> failed                                       (bad input, or the fail_batch fault)
    validating -> in_progress -> expired                       (expire_batch fault: part done)
    validating -> in_progress ... (24 h) ... -> expired        (stall_batch fault: stops part-way)
    ... -> cancelling -> cancelled                             (after a cancel request)

`request_counts` advance with time while in progress. When a batch first reaches a terminal state
its output and error files are written with ids derived from the batch id, so finalising again
after a crash or a restart rewrites the same files instead of orphaning them. Because nothing
depends on the server's memory, a batch created before a restart finishes after it.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from lexpilot_batch.simulated.batches.answers import dumps, hex_of, is_success, usage_of
from lexpilot_batch.simulated.errors import bad_request
from lexpilot_batch.simulated.store import Store

COMPLETION_WINDOW = "24h"
WINDOW_SECONDS = 24 * 3600
CANCEL_SECONDS = 0.2  # how long `cancelling` lasts
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


def _done(sim: dict[str, Any], now: float) -> int:
    """Requests finished by `now` while in progress: linear in time up to the target."""
    start = sim["validated"]
    stop = sim["end"] if sim["fate"] == "expired" else sim["finalizing"]
    if now >= stop or stop <= start:
        return sim["done_target"]
    return min(sim["done_target"], math.floor(sim["done_target"] * max(0.0, now - start) / (stop - start)))


def _counts(sim: dict[str, Any], done: int) -> dict[str, int]:
    completed = sim["outcomes"][:done].count("o")
    return {"total": sim["total"], "completed": completed, "failed": done - completed}


def _status(sim: dict[str, Any], now: float) -> str:
    cancel = sim["cancel"]
    if cancel:
        return "cancelled" if now >= cancel["until"] else "cancelling"
    if now < sim["validated"]:
        return "validating"
    if sim["fate"] == "failed":
        return "failed"
    if sim["fate"] in ("expired", "stalled"):
        return "expired" if now >= sim["end"] else "in_progress"
    if now < sim["finalizing"]:
        return "in_progress"
    return "finalizing" if now < sim["end"] else "completed"


def view(record: dict[str, Any], now: float) -> dict[str, Any]:
    """The Batch object at time `now` (before finalisation: no output files yet)."""
    batch, sim = dict(record["batch"]), record["sim"]
    if sim["finalized"]:
        return batch
    status = _status(sim, now)
    batch["status"] = status
    cancelled_early = bool(sim["cancel"]) and sim["cancel"]["at"] < sim["validated"]
    if sim["fate"] != "failed" and now >= sim["validated"] and not cancelled_early:
        batch["in_progress_at"] = int(sim["validated"])
    if status == "failed":
        batch["failed_at"] = int(sim["validated"])
        batch["errors"] = {"object": "list", "data": sim["errors"]}
        return batch
    if status == "validating":
        pass  # nothing is known about the requests yet
    elif status == "in_progress":
        batch["request_counts"] = _counts(sim, _done(sim, now))
    elif status in ("finalizing", "completed"):
        batch["finalizing_at"] = int(sim["finalizing"])
        batch["request_counts"] = _counts(sim, sim["total"])
        if status == "completed":
            batch["completed_at"] = int(sim["end"])
    elif status == "expired":
        batch["expired_at"] = int(sim["end"])
        batch["request_counts"] = _counts(sim, sim["done_target"])
    else:  # cancelling / cancelled
        batch["cancelling_at"] = int(sim["cancel"]["at"])
        batch["request_counts"] = _counts(sim, sim["cancel"]["done"])
        if status == "cancelled":
            batch["cancelled_at"] = int(sim["cancel"]["until"])
    return batch


def current(store: Store, record: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """The Batch object now, writing its output and error files the first time it is terminal."""
    now = time.time() if now is None else now
    batch = view(record, now)
    if batch["status"] not in TERMINAL or record["sim"]["finalized"]:
        return batch
    with store.lock:
        # Another thread may have finalised or cancelled it meanwhile: decide on the stored record.
        fresh = store.get_batch(batch["id"]) or record
        batch = view(fresh, now)
        if batch["status"] in TERMINAL and not fresh["sim"]["finalized"]:
            return _finalize(store, fresh, batch)
        return batch


def _finalize(store: Store, record: dict[str, Any], batch: dict[str, Any]) -> dict[str, Any]:
    sim = record["sim"]
    if batch["status"] != "failed":
        # The result lines are copied as they were written: each is `json.dumps` of its line, so
        # parsing and dumping it again would give the same text. `outcomes` says which succeeded.
        lines = store.read_results(batch["id"])
        outcomes = sim["outcomes"]
        as_written = len(outcomes) == len(lines)
        if not as_written:  # not the results file this record describes: read what it holds
            outcomes = "".join("o" if is_success(json.loads(line)) else "e" for line in lines)
        if batch["status"] == "completed":
            finished = len(lines)
        elif batch["status"] == "expired":
            finished = sim["done_target"]
        else:
            finished = sim["cancel"]["done"]
        done = list(zip(lines[:finished], outcomes, strict=False))
        output = [line for line, outcome in done if outcome == "o"]
        errors = [line for line, outcome in done if outcome != "o"]
        code, message = (
            ("batch_expired", "This request could not be executed before the completion window expired.")
            if batch["status"] == "expired"
            else ("batch_cancelled", "This request was not executed because the batch was cancelled.")
        )
        error = {"code": code, "message": message}
        for raw in lines[finished:]:
            line = json.loads(raw)
            unrun = {"id": line["id"], "custom_id": line["custom_id"], "response": None, "error": error}
            errors.append(dumps(unrun))
        expiry = sim.get("output_expiry")
        batch["output_file_id"] = _write_lines(store, batch["id"], "output", output, expiry)
        batch["error_file_id"] = _write_lines(store, batch["id"], "error", errors, expiry)
        batch["request_counts"] = {
            "total": len(lines),
            "completed": len(output),
            "failed": len(lines) - len(output),
        }
        if finished == len(lines) and as_written and "usage" in sim:  # summed when they were made
            batch["usage"] = sim["usage"]
        else:
            batch["usage"] = usage_of([json.loads(line) for line in output])
    record = {"batch": batch, "sim": {**sim, "finalized": True}}
    store.put_batch(record)
    return dict(batch)


def _write_lines(store: Store, batch_id: str, which: str, lines: list[str], expiry: int | None = None) -> str | None:
    """Save result lines (JSON text) as a file of the batch; returns its id."""
    if not lines:
        return None  # e.g. every request failed: no output file, as the real service does
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    file_id = "file-" + hex_of("batch-file", batch_id, which)[:24]
    store.add_file(data, f"{batch_id}_{which}.jsonl", "batch_output", file_id=file_id, expires=expiry)
    return file_id


def cancel(store: Store, record: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """Request cancellation: `cancelling` now, `cancelled` CANCEL_SECONDS later."""
    now = time.time() if now is None else now
    with store.lock:
        record = store.get_batch(record["batch"]["id"]) or record
        batch = current(store, record, now)
        status = batch["status"]
        if status in ("cancelling", "cancelled"):
            return batch
        if status in TERMINAL:
            raise bad_request(f"Cannot cancel a batch with status '{status}'.", None, "invalid_state")
        sim = record["sim"]
        done = {"in_progress": _done(sim, now), "finalizing": sim["total"]}.get(status, 0)
        request = {"at": now, "until": now + CANCEL_SECONDS, "done": done}
        record = {**record, "sim": {**sim, "cancel": request}}
        store.put_batch(record)
        return view(record, now)


def enqueued_tokens(store: Store, model: str | None, now: float) -> int:
    """Prompt tokens of the model's batches not yet finished: what its quota counts."""
    total = 0
    for record in store.batches_newest_first():
        if record["batch"].get("model") == model and _status(record["sim"], now) not in TERMINAL:
            total += record["sim"].get("tokens", 0)
    return total
