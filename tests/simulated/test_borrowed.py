"""The simulated provider validates requests from what the providers publish (`simulated.sources`),
never from `lexpilot_batch.providers` (issue 45): a rule the product gets wrong would be wrong on
both sides and no rehearsal could show it. What it may still import from there validates nothing,
as `simulated/sources/__init__.py` says: the APIs' names and lexpilot-batch's own request ids."""

from __future__ import annotations

import ast
from pathlib import Path

import lexpilot_batch.providers as providers
import lexpilot_batch.simulated as simulated

# (module, name) pairs the simulated provider may import from `lexpilot_batch.providers`.
ALLOWED = {
    ("registry", "BARE"),
    ("ids", "id_stem"),
    ("ids", "TAG_LENGTH"),
    ("lines", "our_id"),
    ("lines", "line_id"),
} | {(f"{spec.parent.name}.spec", "NAME") for spec in Path(providers.__file__).parent.glob("*/spec.py")}


def _borrowed() -> set[tuple[str, str, str]]:
    root = Path(simulated.__file__).parent
    found = set()
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {(path.name, a.name, "*") for a in node.names if a.name.startswith("lexpilot_batch.providers")}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lexpilot_batch.providers"):
                module = (node.module or "").removeprefix("lexpilot_batch.providers").lstrip(".")
                found |= {(path.name, module, a.name) for a in node.names}
    return found


def test_the_simulated_provider_borrows_only_names_and_ids_from_the_product() -> None:
    borrowed = _borrowed()
    assert borrowed, "the scan found no import at all: it reads nothing"
    assert {(module, name) for _, module, name in borrowed} <= ALLOWED, sorted(
        b for b in borrowed if (b[1], b[2]) not in ALLOWED
    )
