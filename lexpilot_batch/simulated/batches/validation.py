"""A batch's input, checked as the real service checks it: each bad line an `errors.data` entry
naming its 1-based line, a file that is not UTF-8, empty or too long one error; and the batch's
metadata (a 400 at create).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lexpilot_batch.providers.openai.lines import CHAT_URLS
from lexpilot_batch.simulated.errors import bad_request

ENDPOINT = "/v1/chat/completions"
# The batch endpoints (and line urls) it runs: OpenAI's, Azure's v1 API's (Azure OpenAI batch
# how-to: `"url": "/chat/completions"`, `endpoint="/chat/completions"`), Zhipu BigModel's and Baidu
# Qianfan's (their lines and batches name /v4/... and /v2/...): `openai.lines.CHAT_URLS`.
ENDPOINTS = CHAT_URLS
MAX_REQUESTS = 50_000


def error_entry(code: str, message: str, line: int | None = None, param: str | None = None) -> dict[str, Any]:
    """An entry of a failed batch's `errors.data`."""
    return {"code": code, "line": line, "message": message, "param": param}


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
            return 0, None, [error_entry("invalid_file_format", _NOT_UTF8)]
        if text.isspace():
            return 0, None, [error_entry("empty_file", _EMPTY)]
        return (
            0,
            None,
            [
                error_entry(
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
            return 0, None, [error_entry("invalid_file_format", _NOT_UTF8)]
        start = end + 1
        if blank and raw and not raw.isspace():
            blank = False
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            errors.append(error_entry("invalid_json_line", "This line is not parseable as valid JSON.", number))
            continue
        missing = [f for f in ("custom_id", "method", "url", "body") if f not in obj]
        if missing:
            errors.append(
                error_entry(
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
        return 0, None, [error_entry("empty_file", _EMPTY)]
    return valid, model, errors


def _line_problem(
    obj: dict[str, Any], endpoint: str, seen: set[str], model: str | None, number: int
) -> dict[str, Any] | None:
    custom_id, body = obj["custom_id"], obj["body"]
    if not isinstance(custom_id, str) or not custom_id:
        return error_entry("invalid_value", "custom_id must be a non-empty string.", number, "custom_id")
    if custom_id in seen:
        return error_entry(
            "duplicate_custom_id",
            "The custom_id for this request is a duplicate of another request. "
            "The custom_id parameter must be unique for each request in a batch.",
            number,
            "custom_id",
        )
    if obj["method"] != "POST":
        return error_entry("invalid_value", "Only the POST method is supported.", number, "method")
    if obj["url"] != endpoint:
        return error_entry(
            "invalid_url",
            f"The URL provided for this request does not match the batch endpoint {endpoint}.",
            number,
            "url",
        )
    if not isinstance(body, dict):
        return error_entry("invalid_value", "body must be a JSON object.", number, "body")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return error_entry(
            "missing_required_parameter", "Missing required parameter: 'body.model'.", number, "body.model"
        )
    if model is not None and body["model"] != model:
        return error_entry(
            "mismatched_model",
            f"The provided model '{body['model']}' does not match the model '{model}' of the "
            "previous lines. All requests in a batch must use the same model.",
            number,
            "body.model",
        )
    return None


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
