"""Each request of a batch answered into its result line (an output line, or an error line), its
faults drawn from its custom_id, never from counters in memory; what a request and a batch draw by;
and the usage of answered lines added up, as the Batch object reports it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from lexpilot_batch.providers.ids import id_stem
from lexpilot_batch.simulated import completions
from lexpilot_batch.simulated.caching import PrefixCache
from lexpilot_batch.simulated.errors import ApiError
from lexpilot_batch.simulated.faults import Faults, draw

# json.dumps(obj, ensure_ascii=False), without building an encoder for every result line
dumps = json.JSONEncoder(ensure_ascii=False).encode


def hex_of(*parts: object) -> str:
    """The SHA-256 of the parts joined by `|`, as hex: the ids a batch derives (its lines, its files)."""
    return hashlib.sha256("|".join(map(str, parts)).encode("utf-8")).hexdigest()


def hits(faults: Faults, name: str, probability: float, custom_id: str) -> bool:
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
    line: dict[str, Any] = {"id": "batch_req_" + hex_of("req", batch_id, custom_id)[:32]}
    line["custom_id"] = custom_id
    request_id = "req_" + hex_of("rid", batch_id, custom_id)[:32]
    key = draw_key(custom_id)
    if hits(faults, "line_error", faults.line_error, key):
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
    if hits(faults, "line_400", faults.line_400, key):
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
            truncate=hits(faults, "truncate", faults.truncate, key),
            # Applies to judge prompts only: `complete` recognises the prompt anyway.
            malformed=hits(faults, "malformed", faults.malformed_judge, key),
            empty=hits(faults, "empty_content", faults.empty_content, key),
            filtered=hits(faults, "content_filter", faults.content_filter, key),
            refused=hits(faults, "refusal", faults.refusal, key),
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


def usage_of(output: list[dict[str, Any]]) -> dict[str, Any]:
    return totals([line["response"]["body"].get("usage") or {} for line in output])


def totals(usages: list[dict[str, Any]]) -> dict[str, Any]:
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
