"""Together batch result lines read as OpenAI batch output lines (`providers.results`).

A job's output file holds `{"custom_id", "response": {"status_code": 200, "body"}}` lines, each body
a chat completion, and its error file `{"custom_id", "error": {"message", "code"}}` lines
(`togethercomputer/skills`, `skills/together-batch-inference/references/api-reference.md`, "Output
File Format" and "Error Handling"; https://docs.together.ai/docs/inference/batch/manage, "Error file
format"). Both are OpenAI's shape already but for the message of a reasoning model: Together's
chat completion message has a `reasoning` field beside `reasoning_content` (the `together` SDK's
`types/chat/chat_completion_message.py`), read here as `reasoning_content` so that thinking is
never taken for the answer and is counted as OpenAI's is. An error line carries no HTTP status, so
its request is retried as a transport failure (`engine.answers`), whatever its code.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers import results as outputs


def result(line: dict) -> dict:
    """One Together result line as an OpenAI batch output line."""
    return outputs.map_choices(line, _choice)


def _choice(choice: dict[str, Any]) -> dict[str, Any]:
    message = outputs.as_dict(choice.get("message"))
    reasoning = message.get("reasoning")
    if not isinstance(reasoning, str) or message.get("reasoning_content"):
        return choice
    flat = {k: v for k, v in message.items() if k != "reasoning"}
    return {**choice, "message": {**flat, "reasoning_content": reasoning}}
