"""What the contract checks share: a refusal (`Problem`), and strict validators built from an
official SDK's request types.

The SDKs describe their request bodies as TypedDicts (`openai`, `anthropic`) or pydantic models
(`google-genai`). A TypedDict read by pydantic ignores unknown keys and reads an `Iterable` field
lazily, so `strict_validator` rebuilds its schema with every object closed (`extra_behavior`
forbid, as the APIs refuse unknown fields), every iterable read as a list (checked at once, not
when consumed), and strict scalars (`"0.7"` is no number, `true` no integer: the APIs' JSON
parsers take neither). Building one costs about a second, so each is built once, when first used.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# Kinds of refusal, which also choose each API's error code (`simulated`): a field the API does not
# know, a value of the wrong type or shape, a value outside its range, a parameter the model (its
# family) does not take, a required field missing, a model the API does not serve (`served`).
UNKNOWN, TYPE, RANGE, UNSUPPORTED, MISSING = "unknown", "type", "range", "unsupported", "missing"
NOT_FOUND = "not_found"
# The text of the one user message a role's body is checked with (`bodies.contract`): a request's
# lines differ only in their id and that text, which our prompts fill.
PLACEHOLDER = "x"


@dataclass(frozen=True)
class Problem:
    """One thing an API's contract refuses in a request: the field (a dotted path) and why."""

    field: str
    reason: str
    kind: str = TYPE

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


Validate = Callable[[Any], list[Problem]]


def strict_validator(tp: Any) -> Validate:
    """A check of a value against the type `tp` of an SDK, as strict as the API: unknown keys,
    lazily read iterables and lax scalars all refused (module docstring)."""
    from pydantic import TypeAdapter, ValidationError
    from pydantic_core import SchemaValidator

    schema = copy.deepcopy(TypeAdapter(tp).core_schema)
    _close(schema)
    validator = SchemaValidator(schema)

    def validate(value: Any) -> list[Problem]:
        try:
            validator.validate_python(value, strict=True)
        except ValidationError as exc:
            return problems_of(exc.errors(include_url=False))
        return []

    return validate


def fields_validator(tp: Any) -> Validate:
    """`strict_validator` of a request TypedDict, field by field: each field's check is built when a
    body first holds the field (a whole request type, tools and all, takes seconds to build)."""
    import typing

    hints = typing.get_type_hints(tp, include_extras=True)
    # `Required[...]` written as a string (the SDKs' `from __future__ import annotations`) is not
    # seen by the TypedDict's `__required_keys__`: read it from the resolved hints.
    required = frozenset(k for k, v in hints.items() if _wrapper(v) == "Required") | frozenset(
        k for k in tp.__required_keys__ if _wrapper(hints.get(k)) != "NotRequired"
    )
    checks: dict[str, Validate] = {}

    def validate(body: Any) -> list[Problem]:
        if not isinstance(body, Mapping):
            return [Problem("body", "must be a JSON object", TYPE)]
        out = [Problem(key, "required, and missing", MISSING) for key in sorted(required) if key not in body]
        for key, value in body.items():
            if key not in hints:
                out.append(Problem(str(key), "not a field this API takes", UNKNOWN))
                continue
            if key not in checks:
                checks[key] = strict_validator(_bare(hints[key]))
            out.extend(
                Problem(f"{key}.{p.field}" if p.field != "body" else key, p.reason, p.kind) for p in checks[key](value)
            )
        return out

    return validate


def _wrapper(tp: Any) -> str | None:
    """ "Required" or "NotRequired" when `tp` is wrapped so, else None."""
    import typing

    name = getattr(typing.get_origin(tp), "_name", None) or str(typing.get_origin(tp))
    for wrapper in ("NotRequired", "Required"):
        if name == wrapper or name.endswith("." + wrapper):
            return wrapper
    return None


def _bare(tp: Any) -> Any:
    """A TypedDict field's type without its `Required[...]` / `NotRequired[...]` wrapper."""
    import typing

    while getattr(typing.get_origin(tp), "_name", None) in ("Required", "NotRequired") or str(
        typing.get_origin(tp)
    ).endswith(("Required", "NotRequired")):
        tp = typing.get_args(tp)[0]
    return tp


def typed_dict_keys(tp: Any) -> frozenset[str]:
    """The keys a TypedDict of an SDK takes, inherited ones included."""
    return frozenset(tp.__required_keys__ | tp.__optional_keys__)


def _close(schema: Any) -> None:
    """Every TypedDict of a core schema closed, every iterable read as a list (in place)."""
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "typed-dict":
            schema["extra_behavior"] = "forbid"
        elif kind == "generator":
            schema["type"] = "list"
        for value in schema.values():
            _close(value)
    elif isinstance(schema, list):
        for value in schema:
            _close(value)


# A union member's tag in an error location: the SDK's class name (`ChatCompletionUserMessageParam`)
# or pydantic's tag of a union branch (`function-after[...]`, `list[...]`, `str`); not a field name.
_TAG = re.compile(r"[A-Z]\w*|.*[\[\(].*|str|int|float|bool|none|bytes|dict|list|any|typed-dict")


def problems_of(errors: list[Any]) -> list[Problem]:
    """pydantic's errors as `Problem`s, one per field. A value that matches none of the shapes a
    field takes fails once per shape; only the shape it came closest to (the fewest errors) is
    reported, as the API would read it."""
    # Per place where a union was tried (the location before its first tag): the branch, by tag.
    unions: dict[tuple[str, ...], dict[str, list[Any]]] = {}
    closest: list[Any] = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ())]
        tag = next((i for i, p in enumerate(loc) if _TAG.fullmatch(p)), None)
        if tag is None:
            closest.append(error)
        else:
            unions.setdefault(tuple(loc[:tag]), {}).setdefault(loc[tag], []).append(error)
    for tried in unions.values():
        branches: list[list[Any]] = list(tried.values())
        fewest = min(range(len(branches)), key=lambda i: len(branches[i]))
        closest.extend(branches[fewest])
    out: dict[str, Problem] = {}
    for error in closest:
        loc = [str(part) for part in error.get("loc", ()) if not _TAG.fullmatch(str(part))]
        kind = {"extra_forbidden": UNKNOWN, "missing": MISSING}.get(error.get("type"), TYPE)
        if kind == UNKNOWN:
            reason = "not a field this API takes"
        elif kind == MISSING:
            reason = "required, and missing"
        else:
            reason = f"{error.get('msg')} (got {_shown(error.get('input'))})"
        where = ".".join(loc) or "body"
        out.setdefault(where, Problem(where, reason, kind))
    return list(out.values())


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def unknown_fields(body: Mapping[str, Any], known: frozenset[str] | set[str]) -> list[Problem]:
    """A problem for each top-level field of `body` outside `known` (a cited schema's fields)."""
    return [Problem(key, "not a field this API takes", UNKNOWN) for key in body if key not in known]


def number_in(value: Any, low: float | None, high: float | None) -> bool:
    """Whether `value` is a JSON number (not a boolean) within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return (low is None or value >= low) and (high is None or value <= high)


def integer_in(value: Any, low: int | None, high: int | None) -> bool:
    """Whether `value` is a JSON integer (not a boolean) within [low, high]."""
    return isinstance(value, int) and not isinstance(value, bool) and number_in(value, low, high)


def near_miss(key: str, known: frozenset[str] | set[str]) -> str | None:
    """The known field `key` is most likely a misspelling of (`temprature`, `top-p`, `max_token`), or None."""
    folded = key.lower().replace("-", "_")
    best: tuple[int, str] | None = None
    for name in known:
        if folded == name:
            return name
        distance = edit_distance(folded, name)
        if distance <= (1 if len(name) <= 5 else 2) and (best is None or distance < best[0]):
            best = (distance, name)
    return best[1] if best else None


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, with a swap of two neighbours counting one (`opneai` is one edit from `openai`)."""
    previous2: list[int] | None = None
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (ca != cb))
            if previous2 is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, previous2[j - 2] + 1)
            row.append(cost)
        previous2, previous = previous, row
    return previous[-1]


def chat_sample(model: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A chat body (`{"model", "messages"}`: OpenAI's, Anthropic's params, Mistral's) with a
    placeholder message and a role's other fields, as every line of the role sends them."""
    return {"model": model, "messages": [{"role": "user", "content": PLACEHOLDER}], **fields}
