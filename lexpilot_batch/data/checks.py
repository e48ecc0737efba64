"""The checks of one case object: every schema rule, field by field.

Each problem names the case and the field and says what was expected.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.data.problems import Problems, kind, show
from lexpilot_batch.data.schema import HISTORY_ALIASES, HISTORY_FIELDS, REQUIRED_FIELDS, ROLES, VERDICTS
from lexpilot_batch.util.text import has_unsafe_characters

# How deeply arrays and objects may nest inside one field of a case. Real cases need two levels;
# a case is stored as JSON and read back, and pydantic's JSON reader gives up near 200.
MAX_NESTING = 64


def _key_path(name: str, key: str) -> str:
    return f"{name}[{show(key, 32)}]"


def valid_case_number(value: Any) -> bool:
    # bool is an int subclass in Python; `true` is no case number.
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    # Case numbers are printed in every problem line, status and report: none may drive a terminal.
    return isinstance(value, str) and bool(value.strip()) and not has_unsafe_characters(value)


def case_label(index: int, raw: Any) -> str:
    """How problem lines name a case: its position (from 1) and, when usable, its number."""
    number = raw.get("case_number") if isinstance(raw, dict) else None
    if not valid_case_number(number):
        return f"case #{index}"
    text = str(number)
    return f"case #{index} (case_number {text if len(text) <= 40 else text[:39] + '…'})"


class CaseCheck:
    """Collects the problems of one case, each prefixed with the case's label and field path."""

    def __init__(self, label: str, problems: Problems) -> None:
        self.label = label
        self.problems = problems

    def add(self, path: str, text: str) -> None:
        self.problems.add(f"{self.label}: {path}: {text}" if path else f"{self.label}: {text}")

    def duplicates(self, path: str, obj: Any) -> None:
        for key in getattr(obj, "duplicate_keys", []):
            what = "key" if path else "field"
            self.add(path, f"{what} {show(key)} appears more than once; give it only once")


def _check_text(check: CaseCheck, path: str, value: Any, expected: str) -> bool:
    if not isinstance(value, str):
        check.add(path, f"is {kind(value)}; expected {expected}")
        return False
    if not value.strip():
        check.add(path, f"is {'empty' if not value else 'whitespace only'}; expected {expected}")
        return False
    return True


def _check_text_list(check: CaseCheck, path: str, value: list[Any], expected: str) -> None:
    if not value:
        check.add(path, f"is an empty array; expected at least one {expected}")
    for i, item in enumerate(value):
        _check_text(check, f"{path}[{i}]", item, f"a non-empty {expected}")


def _check_focal_point(check: CaseCheck, value: Any) -> None:
    if isinstance(value, list):
        _check_text_list(check, "focal_point", value, "focal-point string")
    else:
        expected = "the focal point as a non-empty string, or an array of them"
        _check_text(check, "focal_point", value, expected)


def _check_key_details(check: CaseCheck, value: Any) -> None:
    expected = "a non-empty string, an array of strings, or an object {focal point: details}"
    if isinstance(value, list):
        _check_text_list(check, "key_details", value, "detail string")
    elif isinstance(value, dict):
        check.duplicates("key_details", value)
        if not value:
            check.add("key_details", f"is an empty object; expected {expected}")
        for key, details in value.items():
            path = _key_path("key_details", key)
            if not key.strip():
                check.add(path, "has an empty focal-point key; name the focal point")
            if isinstance(details, list):
                _check_text_list(check, path, details, "detail string")
            else:
                _check_text(check, path, details, "a non-empty string or an array of strings")
    else:
        _check_text(check, "key_details", value, expected)


def _check_result_dict(check: CaseCheck, value: Any) -> None:
    labels = " / ".join(VERDICTS)
    if not isinstance(value, dict):
        check.add("result_dict", f"is {kind(value)}; expected an object {{claim text: {labels}}}")
        return
    check.duplicates("result_dict", value)
    if not value:
        check.add("result_dict", "is empty; a case needs at least one claim with its verdict")
    for claim, verdict in value.items():
        path = _key_path("result_dict", claim)
        if not claim.strip():
            check.add(path, "has an empty claim text; write the claim as the key")
        if verdict not in VERDICTS:
            check.add(path, f"verdict is {show(verdict)}; expected one of {labels}")


def _check_history(check: CaseCheck, name: str, value: Any) -> int | None:
    """Check one history; return its length when it is an array at all."""
    if not isinstance(value, list):
        check.add(name, f"is {kind(value)}; expected an array of {{role, content}} messages")
        return None
    if not value:
        check.add(name, "is empty; a history needs at least one user message")
        return 0
    roles: list[str | None] = []
    for i, message in enumerate(value):
        path = f"{name}[{i}]"
        if not isinstance(message, dict):
            check.add(path, f'is {kind(message)}; expected {{"role": ..., "content": ...}}')
            roles.append(None)
            continue
        check.duplicates(path, message)
        role = message.get("role")
        if "role" not in message:
            check.add(path, f"has no role; it has fields: {', '.join(message) or 'none'}")
        elif role not in ROLES:
            check.add(f"{path}.role", f'is {show(role)}; expected "user" or "assistant"')
        roles.append(role if role in ROLES else None)
        if "content" not in message:
            check.add(path, f"has no content; it has fields: {', '.join(message) or 'none'}")
        else:
            _check_text(check, f"{path}.content", message["content"], "the message text")
    if roles[0] == "assistant":
        check.add(f"{name}[0].role", 'is "assistant"; a history must start with a user message')
    for i in range(1, len(roles)):
        if roles[i] is not None and roles[i] == roles[i - 1]:
            check.add(
                f"{name}[{i}].role",
                f'is "{roles[i]}" right after another "{roles[i]}" message; roles must alternate user/assistant',
            )
    last = len(roles) - 1
    if last > 0 and roles[last] == "assistant":
        check.add(
            f"{name}[{last}].role",
            'is "assistant"; a history must end with a user message (the next turn is the model\'s)',
        )
    return len(value)


def normalise_aliases(check: CaseCheck, raw: dict[str, Any]) -> dict[str, Any]:
    """The case with alias history fields renamed, keeping the file's field order."""
    record: dict[str, Any] = {}
    for key, value in raw.items():
        canonical = HISTORY_ALIASES.get(key)
        if canonical is None:
            record[key] = value
        elif canonical in raw:
            check.add("", f"has both {canonical} and its alias {key}; keep only one of them")
        else:
            record[canonical] = value
    return record


def _too_deep(value: Any) -> bool:
    """Whether arrays and objects nest more than MAX_NESTING levels in `value` (read level by level:
    no recursion, and no further than one level past the bound)."""
    level = [value]
    for _ in range(MAX_NESTING + 1):
        containers = [v for v in level if isinstance(v, (list, dict))]
        if not containers:
            return False
        level = [child for c in containers for child in (c.values() if isinstance(c, dict) else c)]
    return True


def check_case(check: CaseCheck, raw: dict[str, Any]) -> dict[str, Any]:
    """Check every rule on one case object; return it with aliases normalised."""
    check.duplicates("", raw)
    record = normalise_aliases(check, raw)
    for name, value in record.items():
        if _too_deep(value):
            check.add(
                name,
                f"nests arrays or objects more than {MAX_NESTING} levels deep; a case is stored as JSON "
                "and read back, which fails that deep: flatten it",
            )
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        aliases = [a for a, c in HISTORY_ALIASES.items() if c in missing]
        also = f" (also accepted: {', '.join(aliases)})" if aliases else ""
        check.add(
            "",
            f"missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)}{also}; "
            f"the case has fields: {', '.join(raw) or 'none'}",
        )
    number = record.get("case_number")
    if "case_number" in record and not valid_case_number(number):
        if isinstance(number, str) and number.strip():
            check.add(
                "case_number",
                f"is {show(number)}, which holds control or invisible formatting characters (shown "
                "escaped); remove them",
            )
        else:
            check.add("case_number", f"is {show(number)}; expected a non-empty string or an integer")
    if "cause_of_action" in record:
        _check_text(check, "cause_of_action", record["cause_of_action"], "the cause of action")
    if "plaintiff_type" in record and not isinstance(record["plaintiff_type"], str):
        # Only the type is checked: no protocol reads it, and real data may leave it blank.
        check.add("plaintiff_type", f"is {kind(record['plaintiff_type'])}; expected a string")
    if "focal_point" in record:
        _check_focal_point(check, record["focal_point"])
    if "key_details" in record:
        _check_key_details(check, record["key_details"])
    if "result_dict" in record:
        _check_result_dict(check, record["result_dict"])
    lengths = {name: _check_history(check, name, record[name]) for name in HISTORY_FIELDS if name in record}
    complete, under = lengths.get("complete_history"), lengths.get("underspecified_history")
    if complete and under and complete != under:
        check.add(
            "underspecified_history",
            f"has {under} messages but complete_history has {complete}; both histories of a "
            "case must have the same number of messages",
        )
    return record
