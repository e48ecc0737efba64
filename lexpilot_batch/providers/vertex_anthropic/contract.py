"""What a Claude-on-Vertex line's `request` may hold: Anthropic's Messages body as Vertex AI takes it
(Anthropic's "Claude on Vertex AI", https://docs.claude.com/en/api/claude-on-vertex-ai, taken
2026-12-06: "model is not passed in the request body. Instead, it is specified in the Google Cloud
endpoint URL"; "anthropic_version is passed in the request body ... and must be set to the value
vertex-2023-10-16"), and otherwise Anthropic's own contract (`anthropic.contract`: the installed
`anthropic` SDK's request types, the model family's rules), checked with the model's Anthropic name
(`claude_name`).

Vertex AI's Claude model ids are Anthropic's with `@` before the date (`claude-sonnet-4-5@20250929`
for `claude-sonnet-4-5-20250929`; newer ones, `claude-opus-4-6`, without a date): the same page's
table of "Vertex AI API model ID"s. A name that is no Claude model is refused before anything is
compiled: `vertex/` sends Gemini.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.anthropic import contract as anthropic
from lexpilot_batch.providers.bodies.schema import MISSING, UNKNOWN, UNSUPPORTED, Problem
from lexpilot_batch.providers.vertex_anthropic.lines import VERSION

_CLAUDE = re.compile(r"(claude-[a-z0-9.-]+?)(?:@(\d{8}))?")
# A model of the simulated provider (`claude-sim`, `sim-eval`), which a rehearsal may send as any.
_SIM = re.compile(r"(?:.*-)?sim|sim-.*", re.IGNORECASE)


def claude_name(model: str) -> str | None:
    """The Anthropic name of a Vertex AI Claude model id (`claude-sonnet-4-5-20250929`); None for another model."""
    found = _CLAUDE.fullmatch(model)
    if found is None:
        return None
    return f"{found.group(1)}-{found.group(2)}" if found.group(2) else found.group(1)


def problems(model: str, body: Mapping[str, Any]) -> list[Problem]:
    """What Vertex AI refuses in a Claude line's `request` (module docstring)."""
    name = claude_name(model) or (model if _SIM.fullmatch(model) else None)
    if name is None:
        why = (
            f"{model!r} is no Claude model id: Claude on Vertex AI takes Anthropic's publisher models, "
            "claude-sonnet-4-5@20250929 and the like (Model Garden); a Gemini model goes through vertex/"
        )
        return [Problem("model", why, UNSUPPORTED)]
    out: list[Problem] = []
    if "model" in body:
        out.append(
            Problem("model", "Vertex AI names the model in the job (or rawPredict's URL), not in the body", UNKNOWN)
        )
    if body.get("anthropic_version") != VERSION:
        out.append(Problem("anthropic_version", f'must be "{VERSION}" on Vertex AI', MISSING))
    rest = {k: v for k, v in body.items() if k not in ("anthropic_version", "model")}
    return out + anthropic.problems({"model": name, **rest})
