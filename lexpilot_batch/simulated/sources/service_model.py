"""A request checked against an AWS service's model as botocore ships it
(`botocore/data/<service>/<version>/service-2.json`: the same file every AWS SDK is generated
from), for the simulated AWS routes (`apis.bedrock`): an input structure's members, the required
ones, and each value's type, enum, length, range and pattern. Without botocore installed, nothing
is checked here (the route keeps its own structural checks).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any


@cache
def model(service: str) -> dict[str, Any] | None:
    """The service's model (its newest version botocore holds), or None without botocore."""
    try:
        from botocore.loaders import Loader
    except ImportError:
        return None
    try:
        return dict(Loader().load_service_model(service, "service-2"))
    except Exception:  # an older botocore without the service
        return None


def input_problems(service: str, operation: str, value: Any) -> list[str]:
    """What the operation's input shape refuses in `value` (its JSON body), each as `field: why`."""
    found = model(service)
    if found is None:
        return []
    shape = found["operations"][operation]["input"]["shape"]
    body_members = {
        name: member
        for name, member in found["shapes"][shape].get("members", {}).items()
        if member.get("location") is None  # headers, the path and the query are not the body's
    }
    structure = {**found["shapes"][shape], "members": body_members}
    return _check(found["shapes"], structure, value, "")


def _check(shapes: dict[str, Any], shape: dict[str, Any], value: Any, where: str) -> list[str]:
    kind = shape.get("type")
    at = where or "body"
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{at}: must be an object"]
        members = shape.get("members", {})
        out = [f"{where + '.' if where else ''}{k}: is not a member of this request" for k in value if k not in members]
        out += [f"{where + '.' if where else ''}{k}: is required" for k in shape.get("required", []) if k not in value]
        if shape.get("union") and len([k for k in value if k in members]) != 1:
            out.append(f"{at}: exactly one of {', '.join(members)} must be given")
        for name, member in members.items():
            if name in value:
                out += _check(shapes, shapes[member["shape"]], value[name], f"{where + '.' if where else ''}{name}")
        return out
    if kind == "list":
        if not isinstance(value, list):
            return [f"{at}: must be a list"]
        out = _bounds(shape, len(value), at, "items")
        for i, item in enumerate(value):
            out += _check(shapes, shapes[shape["member"]["shape"]], item, f"{at}[{i}]")
        return out
    if kind == "string":
        if not isinstance(value, str):
            return [f"{at}: must be a string"]
        if "enum" in shape and value not in shape["enum"]:
            return [f"{at}: must be one of {', '.join(shape['enum'])}"]
        out = _bounds(shape, len(value), at, "characters")
        if "pattern" in shape and not re.fullmatch(shape["pattern"], value):
            out.append(f"{at}: must match the pattern {shape['pattern']}")
        return out
    if kind in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{at}: must be an integer"]
        return _bounds(shape, value, at, "")
    return []


def _bounds(shape: dict[str, Any], size: int, at: str, unit: str) -> list[str]:
    low, high = shape.get("min"), shape.get("max")
    if (low is not None and size < low) or (high is not None and size > high):
        span = f"{low if low is not None else '-'} to {high if high is not None else '-'}"
        return [f"{at}: must be {span} {unit}".rstrip()]
    return []
