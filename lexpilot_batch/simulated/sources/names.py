"""The model names each simulated API serves, from what its maker publishes (`published`) and what
its installed SDK lists, read here and nowhere else: OpenAI's `openai.types.ChatModel`, Anthropic's
`anthropic.types.Model` and the ids its history held, the Gemini models of the Gemini API's models
page and of google-genai's own tables, Mistral's documentation's API names, Groq's
`CompletionCreateParams.model` literal, BigModel's model pages.

How a name is told apart, by the APIs' own naming (each maker's documentation names its models
so): Anthropic's models are `claude-...`, Google's `gemini-...`, `gemma-...` or `learnlm-...`;
a name holding a `/` before a listed name is a provider prefix left on (`openai/gpt-4o`); a name
one or two letters from a listed one, with the same version numbers, is a slip of it. The
simulated provider's own models are named `*-sim` or `sim-*` and served wherever their maker's
naming is (`claude-sim` on Anthropic's routes, `gpt-sim` or `sim-eval` on OpenAI's).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import typing
from functools import cache
from pathlib import Path

from lexpilot_batch.simulated.sources import published

_SIM = re.compile(r"(?:.*-)?sim|sim-.*", re.IGNORECASE)
_NUMBERS = re.compile(r"\d+")
CLAUDE = re.compile(r"claude-.+", re.IGNORECASE)
GOOGLE = re.compile(r"(?:gemini|gemma|learnlm)-.+", re.IGNORECASE)


# The simulator's own models its listings name (it answers any `*-sim` or `sim-*` name alike): those
# the docs and tests use, each route listing those it serves.
SIMULATED = (
    "sim-eval",
    "sim-a",
    "sim-b",
    "gpt-sim",
    "claude-sim",
    "gemini-sim",
    "mistral-sim",
    "magistral-sim",
    "glm-sim",
    "llama-sim",
    "ernie-sim",
    "kimi-sim",
)


def joined(model: str, known: frozenset[str]) -> str | None:
    """Why a name is several names given as one (`--model a,b`, a quoted shell variable): parts
    split at commas or whitespace, one of them a listed name (`known`, after a provider prefix
    too) or the simulator's own; None for any other name (a compatible server's own may hold a
    space)."""
    parts = [p for p in re.split(r"[,\s]+", model.strip()) if p]
    if len(parts) > 1 and any(p in known or p.rpartition("/")[2] in known or is_sim(p) for p in parts):
        return "several names were given as one, split at a comma or whitespace"
    return None


def is_sim(model: str) -> bool:
    """A model of the simulated provider itself."""
    return _SIM.fullmatch(model) is not None


def _literals(tp: object) -> set[str]:
    if typing.get_origin(tp) is typing.Literal:
        return {a for a in typing.get_args(tp) if isinstance(a, str)}
    return {x for arg in typing.get_args(tp) for x in _literals(arg)}


@cache
def sdk_literal(module: str, attribute: str, field: str | None = None) -> frozenset[str]:
    """The names an installed SDK's type lists (empty when the SDK is not installed)."""
    try:
        found = getattr(importlib.import_module(module), attribute)
        if field is not None:
            found = typing.get_type_hints(found)[field]
    except (ImportError, AttributeError, KeyError, NameError, TypeError):
        return frozenset()
    return frozenset(_literals(found))


@cache
def _genai_tables() -> frozenset[str]:
    """The Gemini model codes of the installed google-genai's own tables
    (`_local_tokenizer_loader._GEMINI_*`), read from its source: importing the module needs
    `sentencepiece`, which counting tokens locally needs and nothing here does."""
    spec = importlib.util.find_spec("google.genai._local_tokenizer_loader")
    if spec is None or spec.origin is None:
        return frozenset()
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id.startswith(("_GEMINI_MODELS", "_GEMINI_STABLE")):
            found |= {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return frozenset(found)


def openai() -> frozenset[str]:
    return sdk_literal("openai.types", "ChatModel")


def anthropic() -> frozenset[str]:
    return sdk_literal("anthropic.types", "Model") | published.ANTHROPIC.names


def gemini() -> frozenset[str]:
    return _genai_tables() | published.GEMINI.names


def mistral() -> frozenset[str]:
    return published.MISTRAL.names


def groq() -> frozenset[str]:
    return sdk_literal("groq.types.chat.completion_create_params", "CompletionCreateParams", "model")


def zhipu() -> frozenset[str]:
    return published.ZHIPU.names


def near_miss(model: str, names: frozenset[str], *, same_start: bool = False) -> str | None:
    """The listed name `model` is a slip of: one or two letters off (one in a name of five letters
    or fewer), with the same version numbers; None when it is none's. `same_start`: only a name of
    six letters or more starting as the listed one does (`gpt-4o-mnii`), where a short or other
    name may be a compatible server's own (`m1`)."""
    numbers = _NUMBERS.findall(model)
    best: tuple[int, str] | None = None
    for name in names:
        if _NUMBERS.findall(name) != numbers or abs(len(name) - len(model)) > 2:
            continue
        if same_start and (len(model) < 6 or model[:3].lower() != name[:3].lower()):
            continue
        distance = _distance(model.lower(), name.lower())
        if 0 < distance <= (1 if len(name) <= 5 else 2) and (best is None or (distance, name) < best):
            best = (distance, name)
    return best[1] if best else None


def prefix_left_on(model: str, names: frozenset[str]) -> str | None:
    """The listed name after a prefix left on (`openai/gpt-4o`: `gpt-4o`), or None."""
    head, sep, rest = model.partition("/")
    return rest if sep and head and rest in names else None


def _distance(a: str, b: str) -> int:
    """Levenshtein distance."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]
