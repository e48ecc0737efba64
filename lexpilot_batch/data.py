"""The LexPilot dataset: pydantic models of a case and the loader that validates a whole file."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict

Role = Literal["user", "assistant"]
Verdict = Literal["支持", "部分支持", "驳回"]
VERDICTS: tuple[str, ...] = ("支持", "部分支持", "驳回")
KeyDetails = Union[str, list[str], dict[str, Union[str, list[str]]]]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


class Case(BaseModel):
    """One benchmark case. Unknown extra fields are kept, not rejected."""

    model_config = ConfigDict(extra="allow")

    case_number: Union[str, int]
    cause_of_action: str
    plaintiff_type: str
    focal_point: Union[str, list[str]]
    key_details: KeyDetails
    result_dict: dict[str, Verdict]
    complete_history: list[Message]
    underspecified_history: list[Message]

    @property
    def focal_points(self) -> list[str]:
        return [self.focal_point] if isinstance(self.focal_point, str) else list(self.focal_point)

    @property
    def claims(self) -> list[str]:
        """Claim texts in `result_dict` insertion order: the order every verdict list follows."""
        return list(self.result_dict)
