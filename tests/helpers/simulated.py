"""Helpers for tests that drive the simulated provider through the `openai` SDK."""

from __future__ import annotations

import json
import time
from typing import Any

from openai import OpenAI

TERMINAL = ("completed", "failed", "expired", "cancelled")


def request_line(custom_id: str, prompt: str, model: str = "sim-model", **body: Any) -> dict[str, Any]:
    """One batch input line: a chat completion with the prompt as its one user message."""
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": prompt}], **body},
    }


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")


def submit(client: OpenAI, data: bytes, metadata: dict[str, str] | None = None) -> str:
    """Upload `data` as a batch input file and create its batch; returns the batch id."""
    file = client.files.create(file=("input.jsonl", data), purpose="batch")
    batch = client.batches.create(
        input_file_id=file.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata=metadata,
    )
    return batch.id


def wait(client: OpenAI, batch_id: str, timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll until the batch is terminal; returns the Batch."""
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in TERMINAL:
            return batch
        if time.monotonic() > deadline:
            raise TimeoutError(f"batch {batch_id} still {batch.status} after {timeout} s")
        time.sleep(interval)


def read_lines(client: OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    """The JSON lines of an output or error file ([] for no file)."""
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).text.split("\n") if line]
