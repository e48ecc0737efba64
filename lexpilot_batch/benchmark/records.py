"""Finished records as the workspace stores them: the case's histories by reference.

A protocol's record copies one of the case's histories (Interaction LJP's continued history
starts with the underspecified one), so stored verbatim the records would hold every history
once per task and run: most of the database, serialised and written again by every wave that
finishes threads, and read again by every export. They are stored with each such run of
messages replaced by a reference, `{"$case": "<history field>"}`, and expanded from the case
(which the workspace holds anyway) when read. Records without references (stored by earlier
versions) read back unchanged.
"""

from __future__ import annotations

from typing import Any

from lexpilot_batch.data import HISTORY_FIELDS, Case, dump_messages

REF = "$case"


def compact(record: dict[str, Any], case: Case) -> dict[str, Any]:
    """The record with every list that starts with one of the case's histories referencing it."""
    histories = _dumped_histories(case)
    out = dict(record)
    for key, value in record.items():
        if not isinstance(value, list):
            continue
        for name, messages in histories:
            if messages and value[: len(messages)] == messages:
                out[key] = [{REF: name}, *value[len(messages) :]]
                break
    return out


_last: list[Any] = [None, None]  # (case, its dumped histories): a wave finishes a case's threads together


def _dumped_histories(case: Case) -> list[tuple[str, list[dict[str, Any]]]]:
    if _last[0] is not case:
        _last[:] = [case, [(name, dump_messages(getattr(case, name))) for name in HISTORY_FIELDS]]
    return _last[1]


def has_references(record: dict[str, Any]) -> bool:
    return any(_reference(value) is not None for value in record.values())


def expand(record: dict[str, Any], case: Case) -> dict[str, Any]:
    """The record as the protocol made it: every reference replaced by the history it names."""
    out = dict(record)
    for key, value in record.items():
        name = _reference(value)
        if name is not None:
            out[key] = dump_messages(getattr(case, name)) + value[1:]
    return out


def _reference(value: Any) -> str | None:
    if isinstance(value, list) and value and isinstance(value[0], dict) and REF in value[0]:
        name = value[0][REF]
        if name in HISTORY_FIELDS:
            return name
    return None
