"""Claude on Vertex AI in the simulated provider: `rawPredict`, and the Claude side of Vertex's batch
prediction jobs (`vertex`'s routes create, list, get and cancel the jobs of both publishers; what a
Claude job reads and writes is here).

Learned from Google's and Anthropic's documentation and Anthropic's SDK, taken 2026-12-06:

- **Batch input** (https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/batch,
  "Prepare input"): a JSONL file in Cloud Storage, each line `{"custom_id", "request"}`, `request`
  "the Anthropic Claude API Schema" (its example: `messages`, `anthropic_version`
  "vertex-2023-10-16", `max_tokens`); `custom_id` "An ID for each request to match the input with the
  output". A job's model is `publishers/anthropic/models/<id>`.
- **Batch output** (the same page): the rows keep the input's columns and add the two "reserved ...
  for the batch prediction output: response(JSON) and status". No output row is shown: the
  simulator writes `{"custom_id", "request", "response": <Message>, "status": ""}` for a request
  answered and, for one refused, its `status` as Gemini's rows word it (`vertex`: the simulator's
  guess), under `<prefix>/prediction-model-<time>/predictions.jsonl`.
- **Bodies** (Anthropic's "Claude on Vertex AI", https://docs.claude.com/en/api/claude-on-vertex-ai):
  no `model` in the body ("specified in the Google Cloud endpoint URL"), `anthropic_version`
  "vertex-2023-10-16" in it, or the version the installed `anthropic` SDK's `AnthropicVertex` puts
  there when a body has none (`_constants.ANTHROPIC_API_VERSION`, "2026-10-21" in 2.17.0: newer
  than the page); otherwise Anthropic's Messages rules (`anthropic`'s checks). Model ids
  are Anthropic's with `@` before the date (its table of "Vertex AI API model ID"s), checked against
  Anthropic's published models (`sources.names`).
- **rawPredict**: `POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict`,
  the path the `anthropic` SDK's `AnthropicVertex` sends `messages.create` to (`lib/vertex/_client.py`,
  `_prepare_options`), answered with the Message the same request gets in a job; its errors in
  Anthropic's error body (the Messages API's, which Claude's answers on Vertex are).
"""

from __future__ import annotations

import json
from typing import Any

from lexpilot_batch.providers.lines import our_id
from lexpilot_batch.providers.vertex_anthropic.spec import NAME as VERTEX_ANTHROPIC
from lexpilot_batch.simulated import chat
from lexpilot_batch.simulated.apis import anthropic as claude
from lexpilot_batch.simulated.errors import ApiError, bad_request
from lexpilot_batch.simulated.native import to_chat
from lexpilot_batch.simulated.routes import Handlers, Route, SimulatedApi
from lexpilot_batch.simulated.sources import names

NAME = "vertex_anthropic"  # its jobs' mark in the store (`native`), beside Gemini's `vertex`
PUBLISHED = "publishers/anthropic/models/"
VERSION = "vertex-2023-10-16"


def versions() -> frozenset[str]:
    """The `anthropic_version`s taken: the documented one, and the installed SDK's default."""
    try:
        from anthropic._constants import ANTHROPIC_API_VERSION
    except ImportError:
        return frozenset({VERSION})
    return frozenset({VERSION, ANTHROPIC_API_VERSION})


def anthropic_name(model: str) -> str:
    """A Vertex AI Claude id as Anthropic names the model: `claude-sonnet-4-5@20250929` -> `claude-sonnet-4-5-20250929`."""
    return model.replace("@", "-", 1)


def check_model(project: str, location: str, model: str) -> None:
    """A 404 for a model Vertex AI serves no Claude under (as for Gemini's, `vertex._check_model`)."""
    name = anthropic_name(model)
    if names.is_sim(model):  # the simulator's own models, answered alike on every route
        return
    if not names.CLAUDE.fullmatch(name) or name not in names.anthropic():
        raise ApiError(
            404,
            f"Publisher Model `projects/{project}/locations/{location}/{PUBLISHED}{model}` was not found "
            "or your project does not have access to it.",
        )


def problem(model: str, given: Any) -> str | None:
    """Why Vertex AI would refuse this Claude body for `model`, or None."""
    if not isinstance(given, dict):
        return "request: must be a JSON object"
    if given.get("anthropic_version") not in versions():
        return f"anthropic_version: must be {VERSION}"
    if "model" in given:
        return "model: Extra inputs are not permitted"
    return claude._problem(
        {"model": anthropic_name(model), **{k: v for k, v in given.items() if k != "anthropic_version"}}
    )


def key(line: Any, row: int) -> str:
    """A line's request id: its custom_id mapped back to an id of lexpilot-batch's, else as it is, else its row."""
    cid = line.get("custom_id") if isinstance(line, dict) else None
    if not isinstance(cid, str) or not cid:
        return f"row-{row}"
    return our_id(cid, VERTEX_ANTHROPIC) or cid


def job_lines(data: bytes, model: str, uri: str) -> tuple[list[bytes], dict[str, str]]:
    """A Claude job's input as OpenAI batch lines for the shared machinery, and the refused requests' reasons."""
    lines: list[bytes] = []
    problems: dict[str, str] = {}
    for number, raw in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            line = None
        if not isinstance(line, dict) or "request" not in line:
            raise bad_request(f"{uri} line {number}: each line is a JSON object with a custom_id and a request.")
        cid, given = key(line, len(lines)), line["request"]
        why = problem(model, given)
        if why is not None:
            problems[cid] = why
            lines.append(to_chat(cid, model, [], {}))
            continue
        lines.append(to_chat(cid, model, *claude._chat_parts(given)))
    return lines, problems


def inputs(data: bytes) -> dict[str, dict[str, Any]]:
    """A Claude job's input lines by request id (`key`)."""
    found = [json.loads(x) for x in data.decode("utf-8").splitlines() if x.strip()]
    return {key(line, i): line for i, line in enumerate(found)}


def row(batch_id: str, line: dict[str, Any], given: dict[str, Any], failed: str | None) -> dict[str, Any]:
    """One output row: the input's columns, then `response` or a failed row's `status`."""
    out: dict[str, Any] = {"custom_id": given.get("custom_id"), "request": given.get("request"), "status": ""}
    if failed is not None:
        out["status"] = failed
    else:
        out["response"] = claude._message(batch_id, line["custom_id"], line["response"]["body"])
    return out


class VertexClaudeApi(Handlers):
    """`rawPredict` over one simulated provider's store."""

    def raw_predict(self, project: str, location: str, model: str, given: Any, call_id: str | None) -> dict[str, Any]:
        check_model(project, location, model)
        why = problem(model, given)
        if why is not None:
            raise bad_request(why)
        cid = (our_id(call_id, VERTEX_ANTHROPIC) or call_id) if call_id else None
        messages, fields = claude._chat_parts(given)
        body = {"model": model, "messages": messages, **fields}
        answer = chat.answer(body, cid, self.seed, self.faults, self.roll, self.store.prefixes)
        return claude._message("sync", cid or answer["id"], answer, "standard")


_MODEL = r"/(?:v1|v1beta1)/projects/([^/]+)/locations/([^/]+)/publishers/anthropic/models/([^/:]+)"

API = SimulatedApi[VertexClaudeApi](
    NAME,
    VERTEX_ANTHROPIC,
    VertexClaudeApi,
    (
        Route(
            "POST",
            _MODEL + r":rawPredict",
            "vertex_anthropic_raw_predict",
            lambda a, r: a.raw_predict(r.args[0], r.args[1], r.args[2], r.json(), r.call_id),
            chat=True,
        ),
    ),
    prefixes=(),  # a path under Vertex's no route has is answered in `vertex`'s error shape
    batches_at="vertex",  # its jobs are created, listed, read and cancelled through `vertex`'s routes
    base_path="",  # the server itself (`GOOGLE_VERTEX_BASE_URL`), beside Vertex's other routes
    error_body=claude.error_body,
    overloaded=529,  # Anthropic's overloaded_error, which Claude's answers carry on Vertex too
)
