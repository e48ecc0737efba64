"""Text tables whose columns line up: each column as wide as its widest cell, two spaces apart,
so that no two numbers ever run together (`38,880122,418,262`)."""

from __future__ import annotations


def aligned(rows: list[list[str]], align: str, indent: str = "  ", gap: str = "  ") -> list[str]:
    """`rows` (the first a header) as lines; `align` is `l` or `r` per column."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (
            indent
            + gap.join(
                cell.ljust(w) if a == "l" else cell.rjust(w) for cell, w, a in zip(row, widths, align, strict=True)
            )
        ).rstrip()
        for row in rows
    ]
