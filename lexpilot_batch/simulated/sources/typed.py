"""A JSON value checked against a type of an official SDK, in the SDK's own terms: a request
`TypedDict` (the `openai`, `anthropic`, `groq`, `zhipuai` and Ark SDKs type their request bodies so:
`Required` keys, `Literal` values, unions, lists, mappings), or a pydantic model (`google-genai`'s
and `mistralai`'s, validated by pydantic itself). The first problem of each field is kept, as
`(field, message)`: the simulated routes word them in their API's error shape.

Written for the simulated provider alone (`simulated.sources`): the product's guard reads the same
SDKs its own way (`providers.bodies.schema`), so that a slip in one reading shows against the other.
"""

from __future__ import annotations

import collections.abc
import typing
from functools import cache
from typing import Any

import typing_extensions

Problem = tuple[str, str]  # (field, what is wrong)

_SEQUENCES = {list, tuple, collections.abc.Iterable, collections.abc.Sequence, collections.abc.Collection}
_MAPPINGS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}
_WRAPPERS = {typing_extensions.Required, typing_extensions.NotRequired, typing_extensions.ReadOnly}


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) in _WRAPPERS or typing.get_origin(tp) is typing_extensions.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _required(tp: Any) -> bool | None:
    """True for `Required[...]`, False for `NotRequired[...]`, None when the key says neither."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing_extensions.Required:
            return True
        if origin is typing_extensions.NotRequired:
            return False
        if origin is typing_extensions.Annotated or origin is typing_extensions.ReadOnly:
            tp = typing.get_args(tp)[0]
            continue
        return None


@cache
def fields_of(typed: type) -> dict[str, Any]:
    """The keys of a `TypedDict` and their types (`Required` kept), read once per type."""
    return typing.get_type_hints(typed, include_extras=True)


@cache
def required_keys(typed: type) -> frozenset[str]:
    """The keys a `TypedDict` requires: those marked `Required`, and those its class says are
    (`__required_keys__`, by the totality of the class that declared them) but not `NotRequired`.
    (With postponed annotations the class cannot see a `Required` mark: both are read.)"""
    marks = {key: _required(tp) for key, tp in fields_of(typed).items()}
    declared = set(getattr(typed, "__required_keys__", ()))
    return frozenset(key for key, mark in marks.items() if mark or (mark is None and key in declared))


def problems(value: Any, tp: Any, where: str = "", *, closed: bool = True, nulls: bool = False) -> list[Problem]:
    """What `value` does that the type `tp` does not allow. `closed`: a `TypedDict` takes no other
    key (OpenAI's and Anthropic's APIs refuse one); `nulls`: a `null` stands for a field left out
    (Ark's SDK sends every optional field, null when not given)."""
    tp = _unwrap(tp)
    if tp is Any or tp is object:
        return []
    if nulls and value is None:
        return []
    origin = typing.get_origin(tp)
    if origin is typing.Literal or origin is typing_extensions.Literal:
        choices = typing.get_args(tp)
        return [] if value in choices and type(value) in {type(c) for c in choices} else [(where, _literal(choices))]
    if origin is typing.Union or (origin is not None and getattr(origin, "__name__", "") == "UnionType"):
        branches = typing.get_args(tp)
        found = [problems(value, b, where, closed=closed, nulls=nulls) for b in branches]
        if any(not f for f in found):
            return []
        return _closest(found)
    if tp is type(None):
        return [] if value is None else [(where, "must be null")]
    if typing_extensions.is_typeddict(tp):
        return _typed_dict(value, tp, where, closed, nulls)
    if isinstance(tp, type) and hasattr(tp, "model_validate"):  # a pydantic model of an SDK
        return _model(value, tp, where)
    if origin in _SEQUENCES or tp in _SEQUENCES or getattr(origin, "__name__", "") == "SequenceNotStr":
        if not isinstance(value, list):
            return [(where, "must be an array")]
        args = typing.get_args(tp)
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{where}[{i}]", closed=closed, nulls=nulls)]
    if origin in _MAPPINGS or tp in _MAPPINGS:
        if not isinstance(value, dict):
            return [(where, "must be an object")]
        args = typing.get_args(tp)
        item = args[1] if len(args) == 2 else Any
        return [p for k, v in value.items() for p in problems(v, item, _join(where, k), closed=closed, nulls=nulls)]
    return _scalar(value, tp, where)


def _typed_dict(value: Any, tp: type, where: str, closed: bool, nulls: bool) -> list[Problem]:
    if not isinstance(value, dict):
        return [(where, "must be an object")]
    fields = fields_of(tp)
    out: list[Problem] = [(_join(where, k), "is required") for k in sorted(required_keys(tp) - set(value))]
    for key, item in value.items():
        if key not in fields:
            if closed:
                out.append((_join(where, key), "is not a field of this request"))
            continue
        out += problems(item, fields[key], _join(where, key), closed=closed, nulls=nulls)
    return out


def _model(value: Any, model: Any, where: str) -> list[Problem]:
    from pydantic import ValidationError

    try:
        model.model_validate(value)
    except ValidationError as exc:
        return [(_join(where, ".".join(str(p) for p in e["loc"])), e["msg"]) for e in exc.errors()[:5]]
    return []


def _scalar(value: Any, tp: Any, where: str) -> list[Problem]:
    if tp is bool:
        return [] if isinstance(value, bool) else [(where, "must be a boolean")]
    if tp is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [(where, "must be an integer")]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [(where, "must be a number")]
    if tp is str:
        return [] if isinstance(value, str) else [(where, "must be a string")]
    return []  # a construct these SDKs do not use for request bodies: taken as it is


def _closest(found: list[list[Problem]]) -> list[Problem]:
    """The problems of the union branch the value comes closest to; where every branch fails on
    one field's value alone (the `role` of a message, say), that field with every value taken."""
    literal = [{f: m for f, m in branch if m.startswith(_ONE_OF)} for branch in found]
    for field in literal[0]:
        if all(field in branch for branch in literal):
            values = dict.fromkeys(v for branch in literal for v in branch[field][len(_ONE_OF) :].split(", "))
            return [(field, _ONE_OF + ", ".join(values))]
    return min(found, key=len)


_ONE_OF = "must be one of "


def _literal(choices: tuple[Any, ...]) -> str:
    return _ONE_OF + ", ".join(repr(c) for c in choices)


def _join(where: str, key: object) -> str:
    return f"{where}.{key}" if where else str(key)
