"""The report as Markdown: which groups ran on the bundled sample, models side by side (`tables`),
the runs with their remarks, usage per group, then the notes its cells used.

Every text this module did not write itself (model names, run ids, class names, case numbers,
settings, and to be safe every cell and note) goes through `_md`: a Markdown renderer passes raw
HTML through, so a model named `<img src=x onerror=alert(1)>` would run in whatever page shows
the report. `_md` writes `&`, `<` and `>` as entities (text in every renderer), escapes the `|`
that would cut a table cell and the backslash that would escape it, and breaks the `](` of an
inline link or image (`[x](javascript:...)`).
"""

from __future__ import annotations

from lexpilot_batch.report.formats.cells import (
    FEWER_RUNS_NOTE,
    NO_RECORDS_NOTE,
    NUMBERS_NOTE,
    PARTIAL_NOTE,
    UNDEFINED_NOTE,
    Style,
    interval_note,
    reason_notes,
)
from lexpilot_batch.report.formats.layout import (
    cost_note,
    group_label,
    group_remarks,
    settings_text,
    usage_rows,
    warnings_above,
)
from lexpilot_batch.report.formats.tables import Table, tables

_MD_LITERAL = str.maketrans({"\\": "\\\\", "|": "\\|", "&": "&amp;", "<": "&lt;", ">": "&gt;"})


def _md(text: str) -> str:
    """`text` as Markdown shows it literally, never as HTML, a link or another cell."""
    return text.translate(_MD_LITERAL).replace("](", "\\](")


def _md_table(rows: list[list[str]], align: str) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(_md(c) for c in cells) + " |"

    rule = ["---" if a == "l" else "---:" for a in align]
    return [line(rows[0]), "| " + " | ".join(rule) + " |", *(line(r) for r in rows[1:])]


def _lines(table: Table) -> list[str]:
    rows = [table.header] + [[f"{c.text} {c.sub}" if c.sub else c.text for c in row] for row in table.rows]
    head = [f"## {_md(table.title)}", ""]
    if table.note:
        head += [f"_{_md(table.note)}_", ""]
    return [*head, *_md_table(rows, table.align), ""]


def _md_notes(style: Style) -> list[str]:
    notes = []
    if "undefined" in style.used:
        notes.append(f"undefined: {UNDEFINED_NOTE}.")
    if "fewer" in style.used:
        notes.append(FEWER_RUNS_NOTE + ".")
    if "partial" in style.used:
        notes.append(f"† {PARTIAL_NOTE}.")
    if "not_run" in style.used:
        notes.append(f"n/a: {NO_RECORDS_NOTE}.")
    notes += [f"{note}." for note in reason_notes(style.used)]
    return notes


def render_markdown(report: dict) -> str:
    groups = report["groups"]
    style = Style(undefined="undefined", pm=" ± ", not_run="n/a", fewer=lambda k, n: f" [{k}/{n}]", partial_mark=" †")
    lines = ["# LexPilot results", "", _md(NUMBERS_NOTE), _md(interval_note(report["bootstrap"])), ""]
    if not groups:
        return "\n".join([*lines, "No runs to report."]) + "\n"
    # Before the tables, so that nobody takes a demonstration, or a handful of cases, for a benchmark result.
    for g in groups:
        for text in warnings_above(g):
            lines += [f"> **{_md(group_label(g, groups))}**: {_md(text)}.", ""]
    for table in tables(report, style):
        lines += _lines(table)

    lines += ["## Groups", ""]
    for g in groups:
        lines.append(
            f"- **{_md(group_label(g, groups))}** (user model "
            f"{_md(g['user_model'])}, judge {_md(g['judge_model'])}): "
            f"{g['n_runs']} run{'s' if g['n_runs'] != 1 else ''} "
            f"({_md(', '.join(g['runs']))}); "
            f"settings: {_md(settings_text(g['settings']))}"
        )
        lines += [f"  - {_md(remark)}" for remark in group_remarks(g)]
    for g in groups:
        if g["usage"]["roles"]:
            lines += ["", f"## Usage: {_md(group_label(g, groups))}", ""]
            lines += _md_table(usage_rows(g["usage"]), "lrrrr")
            lines += ["", _md(cost_note(g["usage"]))]
    notes = _md_notes(style)
    if notes:
        lines += ["", "Notes:", "", *(f"- {_md(n)}" for n in notes)]
    return "\n".join(lines) + "\n"
