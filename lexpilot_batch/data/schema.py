"""The case models: what one LexPilot case holds, the schema's names, and reading a stored case back."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

Role = Literal["user", "assistant"]
Verdict = Literal["支持", "部分支持", "驳回"]
VERDICTS: tuple[str, ...] = get_args(Verdict)
ROLES: tuple[str, ...] = get_args(Role)
KeyDetails = str | list[str] | dict[str, str | list[str]]

HISTORY_FIELDS: tuple[str, ...] = ("complete_history", "underspecified_history")
# The seed README does not name the history fields; these spellings mean the same thing and are
# renamed on load so that everything downstream sees one name.
HISTORY_ALIASES: dict[str, str] = {
    "complete_consultation": "complete_history",
    "underspecified_consultation": "underspecified_history",
}


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


def dump_messages(messages: Iterable[Message]) -> list[dict[str, str]]:
    """`[m.model_dump() for m in messages]` without pydantic's serializer, a seventh of its cost:
    every finished record holds one or two whole histories. (The test suite checks that these are
    all of `Message`'s fields.)"""
    return [{"role": m.role, "content": m.content} for m in messages]


class Case(BaseModel):
    """One benchmark case. Unknown extra fields are kept, not rejected."""

    model_config = ConfigDict(extra="allow")

    case_number: str | int
    cause_of_action: str
    plaintiff_type: str
    focal_point: str | list[str]
    key_details: KeyDetails
    result_dict: dict[str, Verdict]
    complete_history: list[Message]
    underspecified_history: list[Message]

    @property
    def case_id(self) -> str:
        """The case number as text: how it appears in custom_ids, manifests and result files."""
        return str(self.case_number)

    @property
    def focal_points(self) -> list[str]:
        return [self.focal_point] if isinstance(self.focal_point, str) else list(self.focal_point)

    @property
    def claims(self) -> list[str]:
        """Claim texts in `result_dict` insertion order: the order every verdict list follows."""
        return list(self.result_dict)


# Every field `Case` cannot do without, in its order: the loader names the missing ones in this order.
REQUIRED_FIELDS: tuple[str, ...] = tuple(name for name, info in Case.model_fields.items() if info.is_required())


def stored_case(data: str) -> Case:
    """A case as the workspace holds it (validated when it was copied in).

    `json.loads` then validation is several times faster than pydantic's own JSON parser on
    text this long, and cases are parsed again in every wave.
    """
    return Case.model_validate(json.loads(data))
