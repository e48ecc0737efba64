"""Reading a dataset file in chunks: its top-level array element by element, in bounded memory.

Every fault is reported exactly as reading the file whole (`jsonfile.read_json`) would report it.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from lexpilot_batch.data.jsonfile import not_json, not_utf8, object_pairs, read_json, too_deep_to_read, unreadable
from lexpilot_batch.data.problems import kind
from lexpilot_batch.errors import DataError

# Bytes read from a dataset file at a time: besides the case being parsed, all the reader holds.
CHUNK_SIZE = 1 << 20
# How far past a fault json's scanner may look before it reports one (the longest literal is
# -Infinity; a \uXXXX\uXXXX pair is 12 characters): a fault this close to the end of the text read
# so far may only be where a chunk ends, so it is parsed again with more of the file.
_LOOKAHEAD = 16
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")


class CaseStream:
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
        self._decoder = json.JSONDecoder(object_pairs_hook=object_pairs)

    def __iter__(self) -> Generator[Any, None, None]:
        try:
            with open(self.path, "rb") as self._file:
                yield from self._elements()
        except OSError as exc:
            raise unreadable("Dataset file", self.path, self.hint, exc) from None

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
                comma_at = self._pos
                self._pos += 1
                if self._skip_space() == "]":
                    raise self._trailing_comma(comma_at)
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
            raise too_deep_to_read("Dataset file", self.path)
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
        _, data = read_json(self.path, "Dataset file", self.hint)
        if isinstance(data, list):  # it did not start with "[" a moment ago
            raise changed_while_read(self.path)
        raise DataError(
            f"Dataset file {self.path} holds {kind(data)} at the top level; expected a JSON array "
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
        return not_json("Dataset file", self.path, msg, line, column, truncated)

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
            raise unreadable("Dataset file", self.path, self.hint, exc) from None

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
            raise not_utf8("Dataset file", self.path, data[exc.start], line, self._offset + exc.start) from None
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


def changed_while_read(path: Path, now: str | None = None) -> DataError:
    """The error of a dataset file whose bytes changed between two readings (`now`: what it says now)."""
    return DataError(
        f"Dataset file {path} changed while it was being read, so nothing was taken from it; run "
        "the command again once whatever writes the file is done.",
        [f"now: {now}"] if now else None,
    )
