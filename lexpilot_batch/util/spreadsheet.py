"""The CSV the product writes, as a spreadsheet will read it: the one writer of `report --format
csv` and `export --layout cases`, and the rule that keeps their cells from running as formulas.

A spreadsheet runs a cell that begins with `=`, `+`, `-` or `@` as a formula (`=cmd|' /C calc'!A0`
starts a program through DDE), and one that begins with a tab or a carriage return may be read
so too. Model names, run ids, class names and case numbers are the user's (or a dataset's), so
by the OWASP rule every *text* cell that begins with one of those characters is written with a
`'` before it, which spreadsheets read as "this is text" and do not show.

Numbers stay numbers: an int or float is written as Python writes it (`-0.25`), and so is a text
cell that is a plain decimal number (`-5`, `+1.5e-3`: no spreadsheet runs one as a formula), so
that a negative QWK or a case numbered `-5` reads back as it was.

A CSV written to a file (`export --layout cases`, `report --format csv --out FILE`) begins with a
UTF-8 byte-order mark: Excel opens a CSV without one in the system's ANSI code page (cp1252, GBK),
which garbles every Chinese cell; with it, Excel, pandas (`read_csv`), R's readr and Python's
`csv` over `encoding="utf-8-sig"` all read UTF-8. Printed to the terminal or a pipe, no mark.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CSV_FILE_ENCODING = "utf-8-sig"  # a CSV file's bytes (module docstring)
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """`value` as a cell: a text beginning as a formula would is prefixed with `'`; numbers, empty
    cells and other text are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A CSV document (`\\n` line ends) of `header` and `rows`, every cell through `safe_cell`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([safe_cell(c) for c in header])
    writer.writerows([safe_cell(c) for c in row] for row in rows)
    return out.getvalue()
