"""A simulated batch: input validation, the simulated run, and its lifecycle over time.

At creation the input file is validated like the real service does (each bad line becomes an
`errors.data` entry naming the 1-based line) and, when it is valid, every request is answered at
once into a private results file, in a shuffled processing order. Validating and answering are one
pass over the lines, so that no more than one request is held parsed at a time. What a client then
sees is a pure function of the stored record and the wall clock:

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

import contextlib
import hashlib
import json
import math
import os
import random
import re
import time
from collections.abc import Callable
from typing import Any

from lexpilot_batch.providers.ids import id_stem
from lexpilot_batch.providers.openai.lines import CHAT_URLS
from lexpilot_batch.simulated import completions
from lexpilot_batch.simulated.caching import PrefixCache
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.faults import Faults, draw
from lexpilot_batch.simulated.latency import batch_seconds
from lexpilot_batch.simulated.store import Store

ENDPOINT = "/v1/chat/completions"
# The batch endpoints (and line urls) it runs: OpenAI's, Azure's v1 API's (Azure OpenAI batch
# how-to: `"url": "/chat/completions"`, `endpoint="/chat/completions"`), Zhipu BigModel's and Baidu
# Qianfan's (their lines and batches name /v4/... and /v2/...): `openai.lines.CHAT_URLS`.
ENDPOINTS = CHAT_URLS
COMPLETION_WINDOW = "24h"
WINDOW_SECONDS = 24 * 3600
MAX_REQUESTS = 50_000
CANCEL_SECONDS = 0.2  # how long `cancelling` lasts
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})

# json.dumps(obj, ensure_ascii=False), without building an encoder for every result line
_dumps = json.JSONEncoder(ensure_ascii=False).encode


def _error(code: str, message: str, line: int | None = None, param: str | None = None) -> dict[str, Any]:
    return {"code": code, "line": line, "message": message, "param": param}


# --- validation ---------------------------------------------------------------------------------


_NOT_UTF8 = "The input file is not valid UTF-8 text."
_EMPTY = "The batch input file is empty."


def validate_input(
    data: bytes,
    endpoint: str,
    each: Callable[[dict[str, Any]], None] | None = None,
    max_requests: int | None = None,
) -> tuple[int, str | None, list[dict[str, Any]]]:
    """How many requests are valid, their one model, and the errors (each naming its 1-based line).

    A file that is not UTF-8, or empty, or longer than `max_requests` (a platform's limit:
    `profiles`; `MAX_REQUESTS` when None) has that one error. Each valid request is
    handed to `each` as it is read, as long as no error has been found: a valid file is answered
    in the same pass, and never held decoded or parsed whole.
    """
    # Lines end at "\n" only; the newline that ends the last line does not start another. A "\n"
    # byte is never part of a longer UTF-8 sequence, so the file is UTF-8 if and only if each of
    # its lines is, and a line decodes to the same text alone as inside the file.
    count = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    limit = MAX_REQUESTS if max_requests is None else max_requests
    if count > limit:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return 0, None, [_error("invalid_file_format", _NOT_UTF8)]
        if text.isspace():
            return 0, None, [_error("empty_file", _EMPTY)]
        return (
            0,
            None,
            [
                _error(
                    "too_many_requests",
                    f"The batch input file has {count} requests; the maximum is {limit}.",
                )
            ],
        )
    valid = 0
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    model: str | None = None
    blank = True  # so far, no line holds anything but whitespace
    start = 0
    for number in range(1, count + 1):
        end = data.find(b"\n", start)
        try:
            raw = (data[start:] if end < 0 else data[start:end]).decode("utf-8")
        except UnicodeDecodeError:
            return 0, None, [_error("invalid_file_format", _NOT_UTF8)]
        start = end + 1
        if blank and raw and not raw.isspace():
            blank = False
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            errors.append(_error("invalid_json_line", "This line is not parseable as valid JSON.", number))
            continue
        missing = [f for f in ("custom_id", "method", "url", "body") if f not in obj]
        if missing:
            errors.append(
                _error(
                    "missing_required_parameter",
                    f"Missing required parameter: '{missing[0]}'.",
                    number,
                    missing[0],
                )
            )
            continue
        problem = _line_problem(obj, endpoint, seen, model, number)
        if problem:
            errors.append(problem)
            continue
        seen.add(obj["custom_id"])
        model = model or obj["body"]["model"]
        valid += 1
        if each is not None and not errors:
            each(obj)
    if blank:
        return 0, None, [_error("empty_file", _EMPTY)]
    return valid, model, errors


def _line_problem(
    obj: dict[str, Any], endpoint: str, seen: set[str], model: str | None, number: int
) -> dict[str, Any] | None:
    custom_id, body = obj["custom_id"], obj["body"]
    if not isinstance(custom_id, str) or not custom_id:
        return _error("invalid_value", "custom_id must be a non-empty string.", number, "custom_id")
    if custom_id in seen:
        return _error(
            "duplicate_custom_id",
            "The custom_id for this request is a duplicate of another request. "
            "The custom_id parameter must be unique for each request in a batch.",
            number,
            "custom_id",
        )
    if obj["method"] != "POST":
        return _error("invalid_value", "Only the POST method is supported.", number, "method")
    if obj["url"] != endpoint:
        return _error(
            "invalid_url",
            f"The URL provided for this request does not match the batch endpoint {endpoint}.",
            number,
            "url",
        )
    if not isinstance(body, dict):
        return _error("invalid_value", "body must be a JSON object.", number, "body")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return _error("missing_required_parameter", "Missing required parameter: 'body.model'.", number, "body.model")
    if model is not None and body["model"] != model:
        return _error(
            "mismatched_model",
            f"The provided model '{body['model']}' does not match the model '{model}' of the "
            "previous lines. All requests in a batch must use the same model.",
            number,
            "body.model",
        )
    return None


# --- the simulated run --------------------------------------------------------------------------


def _hex(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode("utf-8")).hexdigest()


def _hits(faults: Faults, name: str, probability: float, custom_id: str) -> bool:
    """Whether a fault of this probability strikes this request (a draw is always < 1 and >= 0,
    so a fault that is off or certain needs none)."""
    return probability > 0 and draw(faults.seed, name, custom_id) < probability


def run_request(
    request: dict[str, Any],
    batch_id: str,
    seed: int,
    faults: Faults,
    created: int,
    prefixes: PrefixCache | None = None,
    new_prefixes: list[bytes] | None = None,
) -> dict[str, Any]:
    """One output/error-file line for one input request; faults drawn per custom_id. Its cached
    tokens are what `prefixes` holds of it (`completions.complete`)."""
    custom_id = request["custom_id"]
    line: dict[str, Any] = {"id": "batch_req_" + _hex("req", batch_id, custom_id)[:32]}
    line["custom_id"] = custom_id
    request_id = "req_" + _hex("rid", batch_id, custom_id)[:32]
    key = draw_key(custom_id)
    if _hits(faults, "line_error", faults.line_error, key):
        # Both shapes seen in real error files: a bare error, or a 5xx response with an error body.
        if draw(faults.seed, "line_error_shape", key) < 0.5:
            line.update(
                response=None,
                error={"code": "server_error", "message": "The server had an error processing your request."},
            )
        else:
            error = {"message": "Internal server error.", "type": "server_error", "param": None, "code": None}
            body = {"error": error}
            line.update(response={"status_code": 500, "request_id": request_id, "body": body}, error=None)
        return line
    if _hits(faults, "line_400", faults.line_400, key):
        error = {
            "message": "Invalid request: the request could not be processed (simulated).",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
        line.update(response={"status_code": 400, "request_id": request_id, "body": {"error": error}}, error=None)
        return line
    try:
        body = completions.complete(
            request["body"],
            seed,
            key=key,
            sample=sample_key(custom_id),
            truncate=_hits(faults, "truncate", faults.truncate, key),
            # Applies to judge prompts only: `complete` recognises the prompt anyway.
            malformed=_hits(faults, "malformed", faults.malformed_judge, key),
            empty=_hits(faults, "empty_content", faults.empty_content, key),
            filtered=_hits(faults, "content_filter", faults.content_filter, key),
            refused=_hits(faults, "refusal", faults.refusal, key),
            created=created,
            prefixes=prefixes,
            new_prefixes=new_prefixes,
        )
    except ApiError as exc:
        # A request the endpoint itself rejects: a 4xx response in the error file.
        response = {"status_code": exc.status, "request_id": request_id, "body": exc.body()}
        line.update(response=response, error=None)
        return line
    line.update(response={"status_code": 200, "request_id": request_id, "body": body}, error=None)
    return line


def is_success(line: dict[str, Any]) -> bool:
    response = line.get("response")
    return isinstance(response, dict) and response.get("status_code") == 200 and not line.get("error")


# --- creation -----------------------------------------------------------------------------------


def check_metadata(metadata: Any) -> dict[str, str] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise bad_request("metadata must be an object of string keys and values.", param="metadata")
    if len(metadata) > 16:
        raise bad_request(f"metadata has {len(metadata)} pairs; at most 16 are allowed.", param="metadata")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise bad_request(f"metadata value for '{key}' must be a string.", param=f"metadata.{key}")
        if len(key) > 64:
            raise bad_request(f"metadata key '{key[:20]}...' is longer than 64 characters.", param="metadata")
        if len(value) > 512:
            raise bad_request(f"metadata value for '{key}' is longer than 512 characters.", param=f"metadata.{key}")
    return dict(metadata)


def create(
    store: Store,
    *,
    input_file_id: str,
    endpoint: str,
    metadata: dict[str, str] | None,
    seed: int,
    faults: Faults,
    native: dict[str, Any] | None = None,
    sent_sha256: str | None = None,
    output_expiry: int | None = None,
    max_requests: int | None = None,
    completion_window: str = COMPLETION_WINDOW,
    window_seconds: int = WINDOW_SECONDS,
    profile: str | None = None,
) -> dict[str, Any]:
    """Validate and run a new batch (its output files to expire after `output_expiry` seconds, its
    `output_expires_after`); returns its record (already persisted). A batch of a platform's
    profile (`profiles`) names it in `profile`, takes at most its `max_requests` and expires after
    its `completion_window` (`window_seconds`). `native` marks a batch
    created through Anthropic's or Gemini's routes (`sim.native`), which the OpenAI routes do not show;
    `sent_sha256` is then the hash of the request file the client sent, which draws its latency as
    an OpenAI batch's input file draws its own."""
    data = store.file_bytes(input_file_id)
    digest = hashlib.sha256(data).hexdigest()
    drawn = draw_digest(data)
    now = time.time()
    batch_id = "batch_" + _hex("batch", now, digest, os.urandom(8).hex())[:32]
    # Drawn first, so that a batch refused for the token limit answers none of its requests. A
    # batch created again from the same content draws again (the earlier ones are in the store).
    again = store.count_batches(digest) + store.refused_creates.get(digest, 0)
    refused = _hits(faults, "fail_batch", faults.fail_batch, drawn if not again else f"{drawn}|{again}")
    answered: list[tuple[str, bool]] = []  # (result line, success), in input order
    usages: list[dict[str, Any]] = []  # of the successes
    crash: list[Exception] = []
    tokens = [0]  # the batch's prompt tokens, as the enqueued-token quota counts them
    new_prefixes: list[bytes] = []  # what its requests leave in the provider's cache (`caching`)

    def answer(request: dict[str, Any]) -> None:
        if faults.token_limit:
            with contextlib.suppress(KeyError, TypeError, AttributeError):  # a body the request fails on
                tokens[0] += completions.count_prompt_tokens(request["body"])
        if crash or refused:
            return
        try:
            line = run_request(request, batch_id, seed, faults, int(now), store.prefixes, new_prefixes)
        except Exception as exc:  # raised below if the file is valid (a bad line fails it first)
            crash.append(exc)
            return
        ok = is_success(line)
        answered.append((_dumps(line), ok))
        if ok:
            usages.append(line["response"]["body"].get("usage") or {})

    valid, model, errors = validate_input(
        data, endpoint, answer if faults.token_limit or not refused else None, max_requests
    )
    del data
    quota = faults.token_limit
    if not errors and quota and not refused:
        waiting = enqueued_tokens(store, model, now)
        if waiting + tokens[0] > quota:
            refused = True
    if not errors and refused:
        # Refused after its requests were answered (the token quota): it left nothing in the cache.
        store.prefixes.forget(new_prefixes)
        message = (
            f"Enqueued token limit reached for {model} in organization org-simulated. "
            f"Limit: {quota or 2_000_000:,} enqueued tokens. Please try submitting your batch again later."
        )
        if faults.refuse_at_create:  # Azure's way: refused at once, no batch
            store.refused_creates[digest] = store.refused_creates.get(digest, 0) + 1
            raise bad_request(message, None, "token_limit_exceeded")
        errors = [_error("token_limit_exceeded", message)]
        answered.clear()
    lines: list[str] = []
    outcomes = ""
    fate = "failed" if errors else "completed"
    done_target = 0
    if not errors:
        if crash:
            raise crash[0]
        order = list(range(valid))
        # The real service returns lines out of input order; clients must match on custom_id.
        random.Random(_hex("shuffle", seed, drawn)).shuffle(order)
        lines = [answered[i][0] for i in order]
        outcomes = "".join("o" if answered[i][1] else "e" for i in order)
        done_target = len(lines)
        if draw(faults.seed, "expire_batch", drawn) < faults.expire_batch:
            fate = "expired"
            share = 0.3 + 0.4 * draw(faults.seed, "expire_share", drawn)
            done_target = min(len(lines) - 1, math.floor(len(lines) * share)) if len(lines) > 1 else 0
        elif draw(faults.seed, "stall_batch", drawn) < faults.stall_batch:
            # Progresses like any batch until part-way, then never again: in_progress until the
            # window ends. Only a cancel (keeping what it finished) ends it sooner.
            fate = "stalled"
            share = 0.3 + 0.4 * draw(faults.seed, "stall_share", drawn)
            done_target = min(len(lines) - 1, math.floor(len(lines) * share)) if len(lines) > 1 else 0
    latency = batch_seconds(faults, sent_sha256 or digest)
    batch = {
        "id": batch_id,
        "object": "batch",
        "endpoint": endpoint,
        "model": model,
        "errors": None,
        "input_file_id": input_file_id,
        "completion_window": completion_window,
        "status": "validating",
        "output_file_id": None,
        "error_file_id": None,
        "created_at": int(now),
        "in_progress_at": None,
        "expires_at": int(now) + window_seconds,
        "finalizing_at": None,
        "completed_at": None,
        "failed_at": None,
        "expired_at": None,
        "cancelling_at": None,
        "cancelled_at": None,
        "request_counts": {"total": 0, "completed": 0, "failed": 0},
        "usage": _usage([]),
        "metadata": metadata,
    }
    sim = {
        "output_expiry": output_expiry,
        "created": now,
        "seq": store.next_seq(),
        "validated": now + 0.1 * latency,
        "finalizing": now + 0.9 * latency,
        "end": now + (window_seconds if fate == "stalled" else latency),
        "fate": fate,
        "errors": errors,
        "total": len(lines),
        "outcomes": outcomes,
        "done_target": done_target,
        "cancel": None,
        "finalized": False,
        # The usage of every successful line, for the output file of a batch that completes.
        "usage": _totals(usages),
        "digest": digest,
        "tokens": tokens[0],
    }
    if native is not None:
        sim["native"] = native
    if profile is not None:
        sim["profile"] = profile
    record = {"batch": batch, "sim": sim}
    if lines:
        store.write_results(batch_id, lines)
        store.write_prefixes(batch_id, new_prefixes)
    store.put_batch(record)
    return record


def enqueued_tokens(store: Store, model: str | None, now: float) -> int:
    """Prompt tokens of the model's batches not yet finished: what its quota counts."""
    total = 0
    for record in store.batches_newest_first():
        if record["batch"].get("model") == model and _status(record["sim"], now) not in TERMINAL:
            total += record["sim"].get("tokens", 0)
    return total


# --- what a client sees at a given time ---------------------------------------------------------


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
            errors.append(_dumps(unrun))
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
            batch["usage"] = _usage([json.loads(line) for line in output])
    record = {"batch": batch, "sim": {**sim, "finalized": True}}
    store.put_batch(record)
    return dict(batch)


def _write_lines(store: Store, batch_id: str, which: str, lines: list[str], expiry: int | None = None) -> str | None:
    """Save result lines (JSON text) as a file of the batch; returns its id."""
    if not lines:
        return None  # e.g. every request failed: no output file, as the real service does
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    file_id = "file-" + _hex("batch-file", batch_id, which)[:24]
    store.add_file(data, f"{batch_id}_{which}.jsonl", "batch_output", file_id=file_id, expires=expiry)
    return file_id


def _usage(output: list[dict[str, Any]]) -> dict[str, Any]:
    return _totals([line["response"]["body"].get("usage") or {} for line in output])


def _totals(usages: list[dict[str, Any]]) -> dict[str, Any]:
    """The Batch object's `usage`: the chat.completion usages added up."""

    def total(field: str, details: str | None = None) -> int:
        if details is None:
            return sum(u.get(field, 0) for u in usages)
        return sum((u.get(details) or {}).get(field, 0) for u in usages)

    prompt, completion = total("prompt_tokens"), total("completion_tokens")
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": total("cached_tokens", "prompt_tokens_details")},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": total("reasoning_tokens", "completion_tokens_details")},
        "total_tokens": prompt + completion,
    }


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


# The check at the end of an engine's custom_id (`ids.request_check`), as a line holds it.
_CHECK = re.compile(rb'-[0-9a-f]{16}(?=")')


def draw_digest(data: bytes) -> str:
    """What a batch's faults and the order of its result lines are drawn by: the hash of its input
    file as every workspace would send it, its custom_ids' checks left out (as `draw_key` does)."""
    return hashlib.sha256(_CHECK.sub(b"", data)).hexdigest()


def draw_key(custom_id: str) -> str:
    """What a request's faults and answer envelope are drawn by: its custom_id without the check
    the engine's ids end with (`ids.id_stem`: the workspace's tag and the request's hash).
    So a request draws alike in every workspace, and as it did before ids carried a check."""
    return id_stem(custom_id)


def sample_key(custom_id: str) -> str:
    """What a simulated model's sample depends on besides the prompt.

    A trailing `-<digits>` of a custom_id (after its check, `draw_key`) is taken as an attempt
    counter and left out, so every attempt of one request draws the same answer while distinct
    requests (other runs, other cases) draw independently. Faults still draw on the attempt too.
    This is what lets a test compare a run that retried through faults with a fault-free run,
    record for record.
    """
    key = draw_key(custom_id)
    stem, sep, tail = key.rpartition("-")
    return stem if sep and tail.isdigit() else key
