"""A new batch run at once, as the simulated provider runs it: its input file validated and, when
valid, every request answered into a private results file in a shuffled processing order.
Validating and answering are one pass over the lines, so that no more than one request is held
parsed at a time. Its fate (completed, failed, expired part-way, stalled) is drawn from the hash of
its input, and its timeline (`lifecycle`) recorded with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import random
import time
from typing import Any

from lexpilot_batch.simulated import completions
from lexpilot_batch.simulated.batches.answers import (
    draw_digest,
    dumps,
    hex_of,
    hits,
    is_success,
    run_request,
    totals,
    usage_of,
)
from lexpilot_batch.simulated.batches.lifecycle import COMPLETION_WINDOW, WINDOW_SECONDS, enqueued_tokens
from lexpilot_batch.simulated.batches.validation import error_entry, validate_input
from lexpilot_batch.simulated.errors import bad_request
from lexpilot_batch.simulated.faults import Faults, draw
from lexpilot_batch.simulated.latency import batch_seconds, stuck
from lexpilot_batch.simulated.store import Store


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
    batch_id = "batch_" + hex_of("batch", now, digest, os.urandom(8).hex())[:32]
    # Drawn first, so that a batch refused for the token limit answers none of its requests. A
    # batch created again from the same content draws again (the earlier ones are in the store).
    again = store.count_batches(digest) + store.refused_creates.get(digest, 0)
    refused = hits(faults, "fail_batch", faults.fail_batch, drawn if not again else f"{drawn}|{again}")
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
        answered.append((dumps(line), ok))
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
        errors = [error_entry("token_limit_exceeded", message)]
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
        random.Random(hex_of("shuffle", seed, drawn)).shuffle(order)
        lines = [answered[i][0] for i in order]
        outcomes = "".join("o" if answered[i][1] else "e" for i in order)
        done_target = len(lines)
        if draw(faults.seed, "expire_batch", drawn) < faults.expire_batch:
            fate = "expired"
            share = 0.3 + 0.4 * draw(faults.seed, "expire_share", drawn)
            done_target = min(len(lines) - 1, math.floor(len(lines) * share)) if len(lines) > 1 else 0
        elif draw(faults.seed, "stall_batch", drawn) < faults.stall_batch or stuck(
            faults, sent_sha256 or digest, window_seconds
        ):
            # Progresses like any batch until part-way, then never again: in_progress until the
            # window ends. Only a cancel (keeping what it finished) ends it sooner.
            fate = "stalled"
            share = 0.3 + 0.4 * draw(faults.seed, "stall_share", drawn)
            done_target = min(len(lines) - 1, math.floor(len(lines) * share)) if len(lines) > 1 else 0
    latency = min(batch_seconds(faults, sent_sha256 or digest), window_seconds)
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
        "usage": usage_of([]),
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
        "usage": totals(usages),
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
