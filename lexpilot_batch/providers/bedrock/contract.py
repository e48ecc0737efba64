"""What a Bedrock Claude record's `modelInput` may hold: Anthropic's Messages body as Bedrock takes
it (https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages-request-response.html,
taken 2026-12-06): `anthropic_version` "bedrock-2023-05-31" (required), no `model` (the job, or
`InvokeModel`'s path, names it), and otherwise Anthropic's own contract (`anthropic.contract`: the
installed `anthropic` SDK's request types where it is installed, the model family's rules), checked
with the model's Anthropic name (`claude_name`).

Only Claude is sent through `bedrock/` (issue 50: "Claude first"): a model id that names no Claude
model is refused before anything is compiled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lexpilot_batch.providers.anthropic import contract as anthropic
from lexpilot_batch.providers.bodies.schema import MISSING, UNKNOWN, UNSUPPORTED, Problem

VERSION = "bedrock-2023-05-31"
# A Claude model id on Bedrock (`anthropic.claude-sonnet-4-5-20250929-v1:0`), or a cross-Region
# inference profile of one (`us.anthropic.claude-...`, `global.anthropic.claude-...`): the Region
# set, the provider, the Anthropic name, the version.
_CLAUDE = re.compile(r"(?:[a-z]{2,6}\.)?anthropic\.(claude-[a-z0-9.-]+?)(?:-v\d+)?(?::\d+)?")
# A model of the simulated provider (`bedrock-sim`, `sim-eval`: `bodies.model_names.is_simulator_name`'s
# names), which a rehearsal may send through `bedrock/` as through any prefix.
_SIM = re.compile(r"(?:.*-)?sim|sim-.*", re.IGNORECASE)


def claude_name(model: str) -> str | None:
    """The Anthropic name of a Bedrock Claude model id (`claude-sonnet-4-5-20250929`); None for another model."""
    found = _CLAUDE.fullmatch(model)
    return found.group(1) if found else None


def problems(model: str, body: Mapping[str, Any]) -> list[Problem]:
    """What Bedrock refuses in a Claude record's `modelInput` (module docstring)."""
    name = claude_name(model) or (model if _SIM.fullmatch(model) else None)
    if name is None:
        why = (
            f"{model!r} is no Claude model id: bedrock/ sends Claude only, as anthropic.claude-... or an "
            "inference profile such as us.anthropic.claude-... (Bedrock console, Model catalog)"
        )
        return [Problem("model", why, UNSUPPORTED)]
    out: list[Problem] = []
    if "model" in body:
        out.append(
            Problem("model", "Bedrock names the model in the job (or InvokeModel's path), not in the body", UNKNOWN)
        )
    if body.get("anthropic_version") != VERSION:
        out.append(Problem("anthropic_version", f'must be "{VERSION}" on Bedrock', MISSING))
    rest = {k: v for k, v in body.items() if k not in ("anthropic_version", "model")}
    return out + anthropic.problems({"model": name, **rest})
