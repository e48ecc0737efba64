"""Mistral batch result lines read as OpenAI batch output lines (`providers.results`).

A job's output file holds `{"id", "custom_id", "response": {"status_code", "body"}, "error"}`
lines (the shape the `mistralai` SDK's own example reads, `res["response"]["body"]`), each body a
chat completion. What differs from OpenAI's is the message: Mistral's reasoning models (Magistral)
answer with `content` as a list of chunks, `{"type": "thinking", "thinking": [{"type": "text",
"text"}]}` then `{"type": "text", "text"}` (https://docs.mistral.ai/capabilities/reasoning): the
text chunks are the answer, the thinking chunks its `reasoning_content`, never the answer. A line
of the error file, or an OpenAI-shaped line written by the `sync` backend, reads as it is.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.providers import results as outputs


def result(line: dict) -> dict:
    """One Mistral result line as an OpenAI batch output line."""
    return outputs.map_choices(line, _choice)


def _choice(choice: dict[str, Any]) -> dict[str, Any]:
    message = outputs.as_dict(choice.get("message"))
    content = message.get("content")
    if not isinstance(content, list):
        return choice
    text: list[str] = []
    thinking: list[str] = []
    for chunk in content:
        if not isinstance(chunk, dict):
            continue
        if chunk.get("type") == "text" and isinstance(chunk.get("text"), str):
            text.append(chunk["text"])
        elif chunk.get("type") == "thinking":
            thinking.append(_text_of(chunk.get("thinking")))
    flat: dict[str, Any] = {**message, "content": "".join(text)}
    if thinking:
        flat["reasoning_content"] = "\n".join(t for t in thinking if t)
    return {**choice, "message": flat}


def _text_of(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if isinstance(parts, list):
        return "".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
