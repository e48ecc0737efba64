"""The LexPilot dataset: the case models, the cause-of-action → class mapping, and the loader.

The loader reads a dataset file in chunks, one case at a time, checks every rule of the schema
and either accepts the whole file or raises one `DataError` listing the problems it found (case
and field named, what was expected said; the first MAX_PROBLEMS are shown, and checking stops
after MAX_COUNTED). Nothing is ever half-loaded. `load_dataset` keeps every case in memory;
`open_dataset` keeps only what is small (case numbers, classes, thread variants) and reads the
cases again when they are copied, so that a dataset of any size fits in bounded memory. Values
quoted in problem lines are escaped so that none can act on a terminal. `validate_file` backs the
`validate-data` command and returns a printable `DatasetSummary`.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from lexpilot_batch import resources
from lexpilot_batch.errors import DataError
from lexpilot_batch.text import display_width, has_unsafe_characters, pad, terminal_safe

Role = Literal["user", "assistant"]
Verdict = Literal["支持", "部分支持", "驳回"]
VERDICTS: tuple[str, ...] = ("支持", "部分支持", "驳回")
ROLES: tuple[str, ...] = ("user", "assistant")
KeyDetails = str | list[str] | dict[str, str | list[str]]

HISTORY_FIELDS: tuple[str, ...] = ("complete_history", "underspecified_history")
# The seed README does not name the history fields; these spellings mean the same thing and are
# renamed on load so that everything downstream sees one name.
HISTORY_ALIASES: dict[str, str] = {
    "complete_consultation": "complete_history",
    "underspecified_consultation": "underspecified_history",
}
REQUIRED_FIELDS: tuple[str, ...] = (
    "case_number",
    "cause_of_action",
    "plaintiff_type",
    "focal_point",
    "key_details",
    "result_dict",
    *HISTORY_FIELDS,
)
# A broken file can hold thousands of problems; past this many the rest is noise on screen.
MAX_PROBLEMS = 50
# Past this many problems checking stops, so that a file of millions of wrong cases fails at once,
# in bounded time and memory; below it the count stays exact.
MAX_COUNTED = 1000
# How deeply arrays and objects may nest inside one field of a case. Real cases need two levels;
# a case is stored as JSON and read back, and pydantic's JSON reader gives up near 200.
MAX_NESTING = 64
# Characters a terminal acts on, or that reorder or hide what it shows: controls (C0, DEL, C1),
# format characters (bidi overrides, zero-width ones) and the Unicode line and paragraph separators.


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: Role
    content: str


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


# --- reading JSON files ----------------------------------------------------------------------


def stored_case(data: str) -> Case:
    """A case as the workspace holds it (validated when it was copied in).

    `json.loads` then validation is several times faster than pydantic's own JSON parser on
    text this long, and cases are parsed again in every wave.
    """
    return Case.model_validate(json.loads(data))


class _JsonObject(dict):  # type: ignore[type-arg]
    """A JSON object that remembers the keys the file gave more than once.

    `json` silently keeps the last of duplicate keys; in `result_dict` that would drop a claim
    without a word, so the loader reports them instead.
    """

    duplicate_keys: list[str]


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    duplicates: list[str] = []
    for key, _ in pairs:
        if key in seen and key not in duplicates:
            duplicates.append(key)
        seen.add(key)
    marked = _JsonObject(obj)
    marked.duplicate_keys = duplicates
    return marked


def _not_utf8(what: str, path: Path, byte: int, line: int, offset: int) -> DataError:
    return DataError(
        f"{what} {path} is not UTF-8 text (byte 0x{byte:02x} at line {line}, byte offset {offset}); "
        "save it as UTF-8 and try again."
    )


def _not_json(what: str, path: Path, msg: str, line: int, column: int, truncated: bool) -> DataError:
    where = f"line {line} column {column}"
    if truncated:
        return DataError(
            f"{what} {path} ends unexpectedly ({msg} at {where}): the file looks truncated; copy or download it again."
        )
    return DataError(f"{what} {path} is not valid JSON: {msg} at {where}; fix the file there.")


def _too_deep_to_read(what: str, path: Path) -> DataError:
    return DataError(
        f"{what} {path} nests arrays or objects too deeply to be read; it is not a LexPilot file, or it is corrupted."
    )


def _unreadable(what: str, path: Path, hint: str, exc: OSError) -> DataError:
    """The error for a path that could not be opened or read."""
    if path.is_dir():  # Windows refuses to open a folder with "permission denied"
        return DataError(f"{what} {path} is a folder; {hint}.")
    if isinstance(exc, FileNotFoundError):
        return DataError(f"{what} {path} does not exist; {hint}.")
    return DataError(f"{what} {path} cannot be read ({exc.strerror}); {hint}.")


def _read_json(path: Path, what: str, hint: str) -> tuple[bytes, Any]:
    """The file's bytes and parsed JSON, or one `DataError` line saying what is wrong with it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _unreadable(what, path, hint, exc) from None
    bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        # utf-8-sig: editors on Windows often save UTF-8 with a byte-order mark.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # The codec counts from after the byte-order mark; the message counts from the file's start.
        at = bom + exc.start
        raise _not_utf8(what, path, raw[at], raw.count(b"\n", 0, at) + 1, at) from None
    if not text.strip():
        raise DataError(f"{what} {path} is empty; {hint}.")
    try:
        data = json.loads(text, object_pairs_hook=_object_pairs)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        raise _not_json(what, path, exc.msg, exc.lineno, exc.colno, truncated) from None
    except RecursionError:
        raise _too_deep_to_read(what, path) from None
    return raw, data


# --- reading a dataset file in chunks ------------------------------------------------------


# Bytes read from a dataset file at a time: besides the case being parsed, all the reader holds.
CHUNK_SIZE = 1 << 20
# How far past a fault json's scanner may look before it reports one (the longest literal is
# -Infinity; a \uXXXX\uXXXX pair is 12 characters): a fault this close to the end of the text read
# so far may only be where a chunk ends, so it is parsed again with more of the file.
_LOOKAHEAD = 16
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")


class _CaseStream:
    """The elements of a dataset file's top-level JSON array, parsed one by one as the file is read.

    Iterating yields each element as `json.loads` would have parsed it (duplicate keys marked) and
    holds only the element being parsed and a chunk of the file. A broken file raises the very
    `DataError` that reading it whole would raise, same wording, line and column, and as there, a
    byte that is not UTF-8 anywhere in the file comes before any JSON fault: past a fault the rest
    of the file is still decoded, not parsed. A file whose top level is no array is read whole, as
    before: it holds no cases, only its error is wanted. `sha256` is the digest of every byte of
    the file once iterating has ended (or `skip_rest` was called).
    """

    def __init__(self, path: Path, hint: str, chunk_size: int = CHUNK_SIZE) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        self.path = path
        self.hint = hint
        self.chunk_size = chunk_size
        self.sha256 = ""
        self._digest = hashlib.sha256()
        self._file: BinaryIO | None = None
        self._eof = False
        # Bytes: a multi-byte character cut by the end of a chunk waits in `_pending`.
        self._pending = b""
        self._bom_checked = False
        self._offset = 0  # where `_pending` starts in the file
        self._newlines = 0  # newlines before `_offset`
        # Text: `_text` is what is decoded and not yet dropped; `_pos` is where parsing stands in it.
        self._text = ""
        self._pos = 0
        self._dropped = 0  # characters dropped before `_text`
        self._line = 1  # line and column of `_text[0]`, counted as json counts them
        self._column = 1
        self._decoded = 0  # characters decoded so far
        self._content_end = 0  # the text past here is whitespace so far (as `str.rstrip` sees it)
        self._decoder = json.JSONDecoder(object_pairs_hook=_object_pairs)

    def __iter__(self) -> Iterator[Any]:
        try:
            with open(self.path, "rb") as self._file:
                yield from self._elements()
        except OSError as exc:
            raise _unreadable("Dataset file", self.path, self.hint, exc) from None

    def skip_rest(self) -> None:
        """Read the rest of the file into the digest only, when no more elements are wanted."""
        assert self._file is not None
        while not self._eof:
            chunk = self._read_bytes()
            self._digest.update(chunk)
            if not chunk:
                self._finish()

    # -- parsing --

    def _elements(self) -> Iterator[Any]:
        if self._skip_space() != "[":
            self._whole_file()
        self._pos += 1
        if self._skip_space() == "]":
            self._pos += 1
        else:
            while True:
                yield self._value()
                # Most often a comma, then the next element within the text read: one regex call.
                comma = _COMMA.match(self._text, self._pos)
                if comma and comma.end() < len(self._text) and self._text[comma.end()] != "]":
                    self._pos = comma.end()
                    continue
                after = self._skip_space()
                if after == "]":
                    self._pos += 1
                    break
                if after != ",":
                    raise self._invalid("Expecting ',' delimiter", self._pos)
                comma = self._pos
                self._pos += 1
                if self._skip_space() == "]":
                    raise self._trailing_comma(comma)
        if self._skip_space():
            raise self._invalid("Extra data", self._pos)

    def _skip_space(self) -> str:
        """Move past JSON whitespace; return the next character, "" at the end of the file."""
        while True:
            self._pos = _JSON_SPACE.match(self._text, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._read_more():
                return ""

    def _value(self) -> Any:
        """The JSON value at the current position, reading more of the file until it is whole."""
        fault: json.JSONDecodeError | None = None
        while True:
            near_end = len(self._text) - _LOOKAHEAD
            try:
                value, end = self._decoder.raw_decode(self._text, self._pos)
            except json.JSONDecodeError as exc:
                if self._eof or not (exc.msg.startswith("Unterminated string") or exc.pos >= near_end):
                    fault = exc
                    break
                # Read until the element has twice the text it had: a long one is parsed log(n) times.
                self._read_more(max(1, len(self._text) - self._pos))
            except RecursionError:
                break
            else:
                # A number or a literal ending where the text read so far ends may go on after it.
                if self._eof or end < near_end:
                    self._pos = end
                    return value
                self._read_more()
        if fault is None:
            self._drain()
            raise _too_deep_to_read("Dataset file", self.path)
        raise self._invalid(fault.msg, fault.pos)

    def _trailing_comma(self, comma: int) -> DataError:
        # json names this fault differently across Python versions (and blames the comma or the
        # bracket): ask it, on the smallest array with the same fault.
        try:
            json.loads("[0,]")
        except json.JSONDecodeError as exc:
            return self._invalid(exc.msg, comma if exc.pos == 2 else self._pos)
        raise AssertionError("json accepted a trailing comma")

    def _whole_file(self) -> None:
        """Raise the error of a file that is empty or holds no array, reading it whole as before."""
        self._file.close()  # type: ignore[union-attr]
        _, data = _read_json(self.path, "Dataset file", self.hint)
        if isinstance(data, list):  # it did not start with "[" a moment ago
            raise _changed_while_read(self.path)
        raise DataError(
            f"Dataset file {self.path} holds {_kind(data)} at the top level; expected a JSON array "
            'of case objects ([{"case_number": ..., ...}, ...]).'
        )

    def _invalid(self, msg: str, pos: int) -> DataError:
        """The error of a JSON fault at `pos` in `_text`, once the rest of the file is decoded."""
        before = self._text.count("\n", 0, pos)
        line = self._line + before
        column = pos - self._text.rfind("\n", 0, pos) if before else self._column + pos
        at = self._dropped + pos
        self._drain()
        truncated = at >= self._content_end or msg.startswith("Unterminated string")
        return _not_json("Dataset file", self.path, msg, line, column, truncated)

    # -- reading --

    def _read_more(self, at_least: int = 1) -> bool:
        """Drop the text parsed so far, then decode `at_least` more characters (or the rest of
        the file); False when the file had nothing more."""
        if self._eof:
            return False
        newlines = self._text.count("\n", 0, self._pos)
        self._line += newlines
        self._column = self._pos - self._text.rfind("\n", 0, self._pos) if newlines else self._column + self._pos
        self._dropped += self._pos
        parts = [self._text[self._pos :]]
        self._pos = 0
        got = 0
        while got < at_least and not self._eof:
            text = self._decode_chunk()
            parts.append(text)
            got += len(text)
        self._text = "".join(parts)
        return True

    def _drain(self) -> None:
        """Decode the rest of the file without keeping it: a later byte that is not UTF-8 wins."""
        while not self._eof:
            self._decode_chunk()

    def _read_bytes(self) -> bytes:
        assert self._file is not None
        try:
            return self._file.read(self.chunk_size)
        except OSError as exc:
            raise _unreadable("Dataset file", self.path, self.hint, exc) from None

    def _decode_chunk(self) -> str:
        chunk = self._read_bytes()
        self._digest.update(chunk)
        final = not chunk
        data = self._pending + chunk
        if not self._bom_checked:
            # utf-8-sig: editors on Windows often save UTF-8 with a byte-order mark.
            if not final and len(data) < len(codecs.BOM_UTF8) and codecs.BOM_UTF8.startswith(data):
                self._pending = data
                return ""
            self._bom_checked = True
            if data.startswith(codecs.BOM_UTF8):
                data = data[len(codecs.BOM_UTF8) :]
                self._offset = len(codecs.BOM_UTF8)
        try:
            text, used = codecs.utf_8_decode(data, "strict", final)
        except UnicodeDecodeError as exc:
            line = self._newlines + data.count(b"\n", 0, exc.start) + 1
            raise _not_utf8("Dataset file", self.path, data[exc.start], line, self._offset + exc.start) from None
        self._newlines += data.count(b"\n", 0, used)
        self._offset += used
        self._pending = data[used:]
        kept = len(text.rstrip())
        if kept:
            self._content_end = self._decoded + kept
        self._decoded += len(text)
        if final:
            self._finish()
        return text

    def _finish(self) -> None:
        self._eof = True
        self.sha256 = self._digest.hexdigest()


def _kind(value: Any) -> str:
    """A JSON value's type, as a reader of the JSON file would name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _show(value: Any, limit: int = 40) -> str:
    """A short JSON rendering of a value for a problem line, safe to print."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = _kind(value)
    return terminal_safe(text if len(text) <= limit else text[: limit - 1] + "…")


def _key_path(name: str, key: str) -> str:
    return f"{name}[{_show(key, 32)}]"


# --- collecting problems -------------------------------------------------------------------


class _TooManyProblems(Exception):
    """Raised by `_Problems.add` at MAX_COUNTED problems: the rest of the file is not checked."""


class _Problems:
    """The problems found in one file: the first MAX_PROBLEMS kept as lines, the others counted."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0
        self.stopped_at: str | None = None  # where checking stopped, once MAX_COUNTED were found

    def __bool__(self) -> bool:
        return self.count > 0

    def add(self, line: str) -> None:
        self.count += 1
        if len(self.lines) < MAX_PROBLEMS:
            # Lines quote the file's own keys and values: none of them may act on the terminal.
            self.lines.append(terminal_safe(line))
        if self.count >= MAX_COUNTED:
            raise _TooManyProblems

    def listed(self) -> list[str]:
        """The lines to show, with one more saying what was left out."""
        hidden = self.count - len(self.lines)
        if self.stopped_at:
            stopped = f"checking stopped at {self.stopped_at}, so the rest of the file was not checked"
            return [*self.lines, f"… and {hidden} more problems; {stopped}"]
        return [*self.lines, f"… and {hidden} more problems"] if hidden else list(self.lines)


# --- categories ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Categories:
    path: Path
    class_names: tuple[str, ...]
    cause_to_class: dict[str, str]


def _default_path(locate: Callable[[], Path], what: str) -> Path:
    try:
        return Path(locate())
    except FileNotFoundError:
        raise DataError(
            f"The bundled {what} is missing (no data folder found); reinstall lexpilot-batch "
            "or pass the file explicitly."
        ) from None


def _read_categories(path: Path | None) -> _Categories:
    hint = "pass a JSON object {class name: [cause of action, ...]} with --categories FILE"
    if path is None:
        path = _default_path(resources.default_categories, "categories file")
        hint = f"the bundled mapping is missing, reinstall lexpilot-batch or {hint}"
    path = Path(path)
    _, data = _read_json(path, "Categories file", hint)
    if not isinstance(data, dict) or not data:
        shape = "an empty object" if isinstance(data, dict) else _kind(data)
        raise DataError(
            f"Categories file {path} holds {shape}; expected a JSON object "
            '{"class name": ["cause of action", ...], ...}. Fix it or pass another with '
            "--categories FILE."
        )
    problems = _Problems()
    cause_to_class: dict[str, str] = {}
    class_name = ""
    try:
        for key in getattr(data, "duplicate_keys", []):
            problems.add(f"class {_show(key)} appears more than once; merge its causes in one list")
        for class_name, causes in data.items():
            if not class_name.strip():
                problems.add("a class has an empty name; give every class a name")
            if not isinstance(causes, list):
                problems.add(f"class {_show(class_name)}: is {_kind(causes)}; expected an array of causes")
                continue
            for i, cause in enumerate(causes):
                if not isinstance(cause, str) or not cause.strip():
                    problems.add(
                        f"class {_show(class_name)}[{i}]: is {_show(cause)}; expected a non-empty "
                        "cause-of-action string"
                    )
                    continue
                other = cause_to_class.get(cause)
                if other is not None and other != class_name:
                    problems.add(
                        f"cause {_show(cause)} is listed under both {_show(other)} and "
                        f"{_show(class_name)}; keep it under one class"
                    )
                    continue
                cause_to_class[cause] = class_name
    except _TooManyProblems:
        problems.stopped_at = f"class {_show(class_name)}" if class_name else "the repeated class names"
    if problems:
        raise DataError(
            f"Categories file {path} is invalid; fix it or pass another with --categories FILE.",
            problems.listed(),
        )
    return _Categories(path, tuple(data), cause_to_class)


def load_categories(path: Path | None = None) -> dict[str, str]:
    """Cause of action → class name, from a JSON object `{class name: [cause, ...]}`.

    `None` reads the bundled mapping. Raises `DataError` when the file is missing, not JSON, of
    the wrong shape, or lists one cause under two classes.
    """
    return dict(_read_categories(path).cause_to_class)


# --- validating cases ------------------------------------------------------------------------


def _valid_case_number(value: Any) -> bool:
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
    if not _valid_case_number(number):
        return f"case #{index}"
    text = str(number)
    return f"case #{index} (case_number {text if len(text) <= 40 else text[:39] + '…'})"


class _CaseCheck:
    """Collects the problems of one case, each prefixed with the case's label and field path."""

    def __init__(self, label: str, problems: _Problems) -> None:
        self.label = label
        self.problems = problems

    def add(self, path: str, text: str) -> None:
        self.problems.add(f"{self.label}: {path}: {text}" if path else f"{self.label}: {text}")

    def duplicates(self, path: str, obj: Any) -> None:
        for key in getattr(obj, "duplicate_keys", []):
            what = "key" if path else "field"
            self.add(path, f"{what} {_show(key)} appears more than once; give it only once")


def _check_text(check: _CaseCheck, path: str, value: Any, expected: str) -> bool:
    if not isinstance(value, str):
        check.add(path, f"is {_kind(value)}; expected {expected}")
        return False
    if not value.strip():
        check.add(path, f"is {'empty' if not value else 'whitespace only'}; expected {expected}")
        return False
    return True


def _check_text_list(check: _CaseCheck, path: str, value: list[Any], expected: str) -> None:
    if not value:
        check.add(path, f"is an empty array; expected at least one {expected}")
    for i, item in enumerate(value):
        _check_text(check, f"{path}[{i}]", item, f"a non-empty {expected}")


def _check_focal_point(check: _CaseCheck, value: Any) -> None:
    if isinstance(value, list):
        _check_text_list(check, "focal_point", value, "focal-point string")
    else:
        expected = "the focal point as a non-empty string, or an array of them"
        _check_text(check, "focal_point", value, expected)


def _check_key_details(check: _CaseCheck, value: Any) -> None:
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


def _check_result_dict(check: _CaseCheck, value: Any) -> None:
    labels = " / ".join(VERDICTS)
    if not isinstance(value, dict):
        check.add("result_dict", f"is {_kind(value)}; expected an object {{claim text: {labels}}}")
        return
    check.duplicates("result_dict", value)
    if not value:
        check.add("result_dict", "is empty; a case needs at least one claim with its verdict")
    for claim, verdict in value.items():
        path = _key_path("result_dict", claim)
        if not claim.strip():
            check.add(path, "has an empty claim text; write the claim as the key")
        if verdict not in VERDICTS:
            check.add(path, f"verdict is {_show(verdict)}; expected one of {labels}")


def _check_history(check: _CaseCheck, name: str, value: Any) -> int | None:
    """Check one history; return its length when it is an array at all."""
    if not isinstance(value, list):
        check.add(name, f"is {_kind(value)}; expected an array of {{role, content}} messages")
        return None
    if not value:
        check.add(name, "is empty; a history needs at least one user message")
        return 0
    roles: list[str | None] = []
    for i, message in enumerate(value):
        path = f"{name}[{i}]"
        if not isinstance(message, dict):
            check.add(path, f'is {_kind(message)}; expected {{"role": ..., "content": ...}}')
            roles.append(None)
            continue
        check.duplicates(path, message)
        role = message.get("role")
        if "role" not in message:
            check.add(path, f"has no role; it has fields: {', '.join(message) or 'none'}")
        elif role not in ROLES:
            check.add(f"{path}.role", f'is {_show(role)}; expected "user" or "assistant"')
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


def _normalise_aliases(check: _CaseCheck, raw: dict[str, Any]) -> dict[str, Any]:
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


def _check_case(check: _CaseCheck, raw: dict[str, Any]) -> dict[str, Any]:
    """Check every rule on one case object; return it with aliases normalised."""
    check.duplicates("", raw)
    record = _normalise_aliases(check, raw)
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
    if "case_number" in record and not _valid_case_number(number):
        if isinstance(number, str) and number.strip():
            check.add(
                "case_number",
                f"is {_show(number)}, which holds control or invisible formatting characters (shown "
                "escaped); remove them",
            )
        else:
            check.add("case_number", f"is {_show(number)}; expected a non-empty string or an integer")
    if "cause_of_action" in record:
        _check_text(check, "cause_of_action", record["cause_of_action"], "the cause of action")
    if "plaintiff_type" in record and not isinstance(record["plaintiff_type"], str):
        # Only the type is checked: no protocol reads it, and real data may leave it blank.
        check.add("plaintiff_type", f"is {_kind(record['plaintiff_type'])}; expected a string")
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


def _unmapped_problem(unmapped: dict[str, list[str]], categories: _Categories) -> str:
    """One problem listing every unmapped cause and the cases using it."""
    shown_cases = 5
    lines = [
        f"cause_of_action: {len(unmapped)} cause{'s' if len(unmapped) > 1 else ''} of action "
        f"{'are' if len(unmapped) > 1 else 'is'} not in the categories mapping "
        f"{categories.path}; add each to one of its classes ({', '.join(categories.class_names)}) "
        "or pass another mapping with --categories FILE:"
    ]
    mapped_stripped = {cause.strip(): cause for cause in categories.cause_to_class}
    for cause, labels in unmapped.items():
        used = ", ".join(labels[:shown_cases])
        if len(labels) > shown_cases:
            used += f", and {len(labels) - shown_cases} more cases"
        near = mapped_stripped.get(cause.strip())
        hint = f" (differs from the mapped {_show(near)} only in spaces)" if near else ""
        lines.append(f"    {_show(cause)}{hint}: {used}")
    return "\n".join(lines)


@dataclass(frozen=True)
class DatasetFile:
    """A dataset file validated whole whose cases stay in the file; what is small is kept.

    `read_cases` reads the cases again, refusing a file that no longer has the bytes it had.
    """

    path: Path
    sha256: str
    case_ids: tuple[str, ...]  # every case number as text, in file order
    case_classes: tuple[str, ...]  # the cause class of every case, in file order
    classes: dict[str, str]  # cause of action -> class name
    class_names: tuple[str, ...]  # every class of the mapping, in the mapping's order
    categories_path: Path | None = None
    # Per case, task -> the names of its threads, for the tasks `open_dataset` was given.
    variants: tuple[Mapping[str, tuple[str, ...]], ...] = ()
    chunk_size: int = field(default=CHUNK_SIZE, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.case_ids)

    def read_cases(self, limit: int | None = None) -> Iterator[Case]:
        """The first `limit` cases (every case with `None`) in file order, read from the file again.

        Raises `DataError` if the file is not the one that was validated any more. That is known
        only once its last byte is read, after the last case: write what this yields inside a
        transaction, so that such a file leaves nothing behind.
        """
        wanted = len(self) if limit is None else min(limit, len(self))
        stream = _CaseStream(self.path, "pass a LexPilot JSON file with --dataset FILE", self.chunk_size)
        elements = iter(stream)
        read = 0
        try:
            for index, raw in zip(range(wanted), elements, strict=False):
                case = _case_again(raw)
                if case is None or case.case_id != self.case_ids[index]:
                    break
                yield case
                read += 1
            stream.skip_rest()
        except DataError as exc:  # no JSON array, or no UTF-8, any more
            raise _changed_while_read(self.path, exc.args[0]) from None
        finally:
            elements.close()
        if read < wanted or stream.sha256 != self.sha256:
            raise _changed_while_read(self.path)


def _case_again(raw: Any) -> Case | None:
    """A case of a file validated before, or None when the file no longer holds a valid case there."""
    if not isinstance(raw, dict):
        return None
    try:
        # Checked already: only the history aliases need renaming.
        return Case.model_validate(_normalise_aliases(_CaseCheck("", _Problems()), raw))
    except ValidationError:
        return None


def _changed_while_read(path: Path, now: str | None = None) -> DataError:
    return DataError(
        f"Dataset file {path} changed while it was being read, so nothing was taken from it; run "
        "the command again once whatever writes the file is done.",
        [f"now: {now}"] if now else None,
    )


@dataclass(frozen=True)
class Dataset:
    """A fully validated dataset file with every case in memory, and the cause-class mapping."""

    path: Path
    sha256: str
    cases: list[Case]
    classes: dict[str, str]  # cause of action -> class name
    class_names: tuple[str, ...] = ()  # every class of the mapping, in the mapping's order
    categories_path: Path | None = None
    _by_id: dict[str, Case] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {case.case_id: case for case in self.cases})
        if not self.class_names:
            object.__setattr__(self, "class_names", tuple(dict.fromkeys(self.classes.values())))

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    def class_of(self, case: Case) -> str:
        """The cause class of a case (every cause is mapped: loading checked it)."""
        return self.classes[case.cause_of_action]

    def case(self, case_id: str | int) -> Case:
        """The case with this case number, compared as text."""
        try:
            return self._by_id[str(case_id)]
        except KeyError:
            raise DataError(f"Dataset {self.path} has no case numbered {case_id}.") from None

    @property
    def case_ids(self) -> list[str]:
        """Every case number as text, in file order."""
        return [case.case_id for case in self.cases]


def _scan(
    path: Path | None, categories: Path | None, on_case: Callable[[Case, str], None], chunk_size: int
) -> DatasetFile:
    """Read a dataset file once, in chunks, checking every case against the schema and the mapping.

    `on_case(case, class)` sees the cases in file order as long as no problem is found; they are
    valid only if this returns. Raises one `DataError` naming every problem otherwise.
    """
    cats = _read_categories(categories)
    hint = "pass a LexPilot JSON file with --dataset FILE"
    if path is None:
        path = _default_path(resources.sample_dataset, "sample dataset")
        hint = f"the bundled sample is missing, reinstall lexpilot-batch or {hint}"
    path = Path(path)
    stream = _CaseStream(path, hint, chunk_size)
    elements = iter(stream)
    problems = _Problems()
    first_with_number: dict[str, str] = {}
    unmapped: dict[str, list[str]] = {}
    case_ids: list[str] = []
    case_classes: list[str] = []
    index = 0
    try:
        for index, raw in enumerate(elements, 1):
            check = _CaseCheck(case_label(index, raw), problems)
            if not isinstance(raw, dict):
                check.add("", f"is {_kind(raw)}; expected an object with the case's fields")
                continue
            record = _check_case(check, raw)
            number = record.get("case_number")
            if _valid_case_number(number):
                # Compared as text: 12 and "12" both become "12" in custom_ids and result files.
                key = str(number)
                if key in first_with_number:
                    check.add(
                        "case_number",
                        f"duplicates {first_with_number[key]}; case numbers must be unique "
                        '(12 and "12" count as the same)',
                    )
                else:
                    first_with_number[key] = check.label
            cause = record.get("cause_of_action")
            if isinstance(cause, str) and cause.strip() and cause not in cats.cause_to_class:
                unmapped.setdefault(cause, []).append(check.label)
            if problems or unmapped:
                continue  # nothing will be loaded: the cases left are only checked
            try:
                case = Case.model_validate(record)
            except ValidationError as exc:
                # The checks above should have caught everything; this keeps a gap in them
                # from ever surfacing as a pydantic traceback.
                for error in exc.errors():
                    check.add(".".join(str(part) for part in error["loc"]), error["msg"])
                continue
            cause_class = cats.cause_to_class[case.cause_of_action]
            case_ids.append(case.case_id)
            case_classes.append(cause_class)
            on_case(case, cause_class)
    except _TooManyProblems:
        problems.stopped_at = check.label
        for _ in elements:
            pass  # parsed, not checked: a JSON fault or a byte not UTF-8 further on still comes first

    if index == 0:
        raise DataError(f"Dataset file {path} is an empty array; it needs at least one case.")
    if problems or unmapped:
        total = problems.count + (1 if unmapped else 0)
        listed = problems.listed()
        if unmapped:
            # Kept out of the cap: the user needs every unmapped cause to fix the mapping at once.
            listed = [*listed, _unmapped_problem(unmapped, cats)]
        raise DataError(
            f"Dataset file {path} is invalid: {'at least ' if problems.stopped_at else ''}{total} "
            f"problem{'s' if total != 1 else ''}, nothing was loaded (cases are counted from 1 in "
            f"file order). Fix them and run `lexpilot-batch validate-data --dataset {path}` again.",
            listed,
        )
    return DatasetFile(
        path=path,
        sha256=stream.sha256,
        case_ids=tuple(case_ids),
        case_classes=tuple(case_classes),
        classes=dict(cats.cause_to_class),
        class_names=cats.class_names,
        categories_path=cats.path,
        chunk_size=chunk_size,
    )


def load_dataset(path: Path | None = None, categories: Path | None = None) -> Dataset:
    """Read and validate a whole dataset file against the schema and the cause-class mapping.

    `None` reads the bundled sample and the bundled mapping. Returns a complete `Dataset` or
    raises one `DataError` whose problems name every case and field at fault. Besides the schema, a
    case_number may hold no control or formatting characters, and no field may nest arrays and
    objects more than MAX_NESTING levels deep. `open_dataset` checks the same and keeps no case.
    """
    cases: list[Case] = []
    dataset = _scan(path, categories, lambda case, _: cases.append(case), CHUNK_SIZE)
    return Dataset(
        path=dataset.path,
        sha256=dataset.sha256,
        cases=cases,
        classes=dataset.classes,
        class_names=dataset.class_names,
        categories_path=dataset.categories_path,
    )


def open_dataset(
    path: Path | None = None,
    categories: Path | None = None,
    *,
    variants: Mapping[str, Callable[[Case], tuple[str, ...]]] | None = None,
    chunk_size: int = CHUNK_SIZE,
) -> DatasetFile:
    """Validate a dataset file exactly as `load_dataset` does, holding one case at a time, never all.

    `variants` maps a task to the function naming that task's threads for a case
    (`Protocol.variants`); what each returns is kept per case, so that threads can be created
    without reading the cases again.
    """
    tasks = dict(variants or {})
    per_case: list[Mapping[str, tuple[str, ...]]] = []
    shared: dict[tuple[tuple[str, tuple[str, ...]], ...], Mapping[str, tuple[str, ...]]] = {}

    def keep_variants(case: Case, _: str) -> None:
        key = tuple((task, tuple(of(case))) for task, of in tasks.items())
        if key not in shared:  # cases mostly have the same threads: they share one mapping
            shared[key] = dict(key)
        per_case.append(shared[key])

    return replace(_scan(path, categories, keep_variants, chunk_size), variants=tuple(per_case))


# --- summary ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetSummary:
    """What `validate-data` prints about a valid dataset."""

    path: Path
    sha256: str
    categories_path: Path | None
    n_cases: int
    n_histories: int  # complete + underspecified: twice the cases
    messages_min: int
    messages_median: float
    messages_max: int
    n_causes: int
    cases_per_class: dict[str, int]  # every class of the mapping, zeros included
    claims_per_verdict: dict[str, int]  # 支持 / 部分支持 / 驳回, in that order

    @classmethod
    def of(cls, dataset: Dataset) -> DatasetSummary:
        tally = _Tally()
        for case in dataset.cases:
            tally.add(case, dataset.class_of(case))
        return tally.summary(dataset)

    def render(self) -> str:
        def table(rows: dict[str, int], total_label: str) -> list[str]:
            items = [*rows.items(), (total_label, sum(rows.values()))]
            key_width = max(display_width(k) for k, _ in items) + 2
            num_width = max(len(str(n)) for _, n in items)
            return [f"  {pad(k, key_width)}{n:>{num_width}}" for k, n in items]

        median = f"{self.messages_median:g}"
        lines = [
            f"Dataset      {self.path}",
            f"SHA-256      {self.sha256[:12]}",
        ]
        if self.categories_path is not None:
            lines.append(f"Categories   {self.categories_path}")
        lines += [
            f"Cases        {self.n_cases}",
            f"Histories    {self.n_histories} ({self.n_cases} complete + {self.n_cases} underspecified)",
            f"Messages     min {self.messages_min}, median {median}, max {self.messages_max} per history",
            f"Causes       {self.n_causes} distinct causes of action",
            "",
            "Cases per class",
            *table(self.cases_per_class, "total"),
            "",
            "Claims per verdict",
            *table(self.claims_per_verdict, "total"),
            "",
            "valid",
        ]
        return "\n".join(lines)


class _Tally:
    """What a summary counts, case by case, so that a file can be summarised as it is read."""

    def __init__(self) -> None:
        self.lengths: list[int] = []  # of every history
        self.per_class: Counter[str] = Counter()
        self.verdicts: Counter[str] = Counter()
        self.causes: set[str] = set()

    def add(self, case: Case, cause_class: str) -> None:
        self.lengths += (len(case.complete_history), len(case.underspecified_history))
        self.per_class[cause_class] += 1
        self.verdicts.update(case.result_dict.values())
        self.causes.add(case.cause_of_action)

    def summary(self, dataset: Dataset | DatasetFile) -> DatasetSummary:
        return DatasetSummary(
            path=dataset.path,
            sha256=dataset.sha256,
            categories_path=dataset.categories_path,
            n_cases=len(dataset),
            n_histories=len(self.lengths),
            messages_min=min(self.lengths),
            messages_median=statistics.median(self.lengths),
            messages_max=max(self.lengths),
            n_causes=len(self.causes),
            cases_per_class={name: self.per_class.get(name, 0) for name in dataset.class_names},
            claims_per_verdict={v: self.verdicts.get(v, 0) for v in VERDICTS},
        )


def summarize(dataset: Dataset) -> DatasetSummary:
    return DatasetSummary.of(dataset)


def validate_file(dataset: Path | None = None, categories: Path | None = None) -> DatasetSummary:
    """Validate a dataset file (raises `DataError`) and summarise it for the terminal.

    Read in chunks, as `open_dataset` does: a large file is summarised without being held whole.
    """
    tally = _Tally()
    return tally.summary(_scan(dataset, categories, tally.add, CHUNK_SIZE))
