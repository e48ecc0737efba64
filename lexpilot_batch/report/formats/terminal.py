"""The report as a plain-text table for the terminal: which groups ran on the bundled sample, models
side by side (`tables`), then each group's runs, settings, remarks and usage, then the notes its
cells used."""

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
from lexpilot_batch.util.text import display_width, pad


def _grid(rows: list[list[str]], align: str, indent: str = "") -> list[str]:
    """Rows of cells aligned in columns; `align` has one l/r per column."""
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(pad(cell, widths[i], align[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def _lines(table: Table) -> list[str]:
    """A table's header and rows; a cell's second line (its interval) goes on a row of its own."""
    rows = [table.header]
    for row in table.rows:
        rows.append([cell.text for cell in row])
        if any(cell.sub for cell in row):
            rows.append([cell.sub for cell in row])
    return [f"{table.title} ({table.note})" if table.note else table.title, *_grid(rows, table.align, indent="  ")]


def render_table(report: dict) -> str:
    style = Style(undefined="—", pm=" ± ", not_run="n/a", fewer=lambda k, n: f" [{k}/{n}]", partial_mark=" *")
    lines: list[str] = [NUMBERS_NOTE, interval_note(report["bootstrap"])]
    if not report["groups"]:
        lines += ["", "No runs to report."]
    # Before the tables, so that nobody takes a demonstration, or a handful of cases, for a benchmark result.
    above = [f"!! {group_label(g, report['groups'])}: {text}" for g in report["groups"] for text in warnings_above(g)]
    if above:
        lines += ["", *above]
    for table in tables(report, style):
        lines += ["", *_lines(table)]
    for group in report["groups"]:
        lines += [
            "",
            f"== {group['model']}  (user: {group['user_model']}, judge: {group['judge_model']})",
            f"group {group['group_key']}; {group['n_runs']} run"
            f"{'s' if group['n_runs'] != 1 else ''}: {', '.join(group['runs'])}",
            f"settings: {settings_text(group['settings'])}",
        ]
        lines += [f"  ** {remark}" for remark in group_remarks(group)]
        if group["usage"]["roles"]:
            lines += ["Usage"]
            lines += _grid(usage_rows(group["usage"]), "lrrrr", indent="  ")
            lines.append(f"  {cost_note(group['usage'])}")
    notes = []
    if "undefined" in style.used:
        notes.append(f"— undefined: {UNDEFINED_NOTE}")
    if "fewer" in style.used:
        notes.append(FEWER_RUNS_NOTE)
    if "partial" in style.used:
        notes.append(f"* {PARTIAL_NOTE}")
    if "not_run" in style.used:
        notes.append(f"n/a: {NO_RECORDS_NOTE}")
    notes += reason_notes(style.used)
    if notes:
        lines += ["", "Notes:", *(f"  {n}" for n in notes)]
    return "\n".join(lines) + "\n"
