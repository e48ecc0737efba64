"""The report as Markdown: one table of every group's overall metrics, one by cause class, the runs
with their remarks, usage per group, then the notes its cells used."""

from __future__ import annotations

from lexpilot_batch.report.cells import (
    FEWER_RUNS_NOTE,
    NO_RECORDS_NOTE,
    NUMBERS_NOTE,
    PARTIAL_NOTE,
    UNDEFINED_NOTE,
    Style,
)
from lexpilot_batch.report.layout import (
    cost_note,
    group_classes,
    group_label,
    metric_columns,
    sample_remark,
    settings_text,
    task_remarks,
    usage_rows,
)
from lexpilot_batch.tasks import METRIC_TITLES, TASKS


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(rows: list[list[str]], align: str) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    rule = ["---" if a == "l" else "---:" for a in align]
    return [line(rows[0]), line(rule), *(line(r) for r in rows[1:])]


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
    return notes


def render_markdown(report: dict) -> str:
    groups = report["groups"]
    style = Style(undefined="undefined", pm=" ± ", not_run="n/a", fewer=lambda k, n: f" [{k}/{n}]", partial_mark=" †")
    lines = ["# LexPilot results", "", NUMBERS_NOTE, ""]
    if not groups:
        return "\n".join([*lines, "No runs to report."]) + "\n"
    columns = metric_columns(report)
    for g in groups:
        remark = sample_remark(g)
        if remark:
            lines += [f"> **{_md_escape(group_label(g, groups))}**: {remark}.", ""]

    header = [f"{TASKS[t].title} {METRIC_TITLES[m]}" for t, m in columns]
    rows = [["Model", *header]]
    rows += [[_md_escape(group_label(g, groups)), *style.row(g, columns)] for g in groups]
    lines += ["## Overall", "", *_md_table(rows, "l" + "r" * len(columns)), ""]

    rows = [["Model", "Class", *header]]
    for g in groups:
        for cls in group_classes(g):
            rows.append([_md_escape(group_label(g, groups)), _md_escape(cls), *style.row(g, columns, cls)])
    if len(rows) > 1:
        lines += ["## By cause class", "", *_md_table(rows, "ll" + "r" * len(columns)), ""]

    lines += ["## Runs", ""]
    for g in groups:
        lines.append(
            f"- **{_md_escape(group_label(g, groups))}** (user model "
            f"{_md_escape(g['user_model'])}, judge {_md_escape(g['judge_model'])}): "
            f"{g['n_runs']} run{'s' if g['n_runs'] != 1 else ''} "
            f"({', '.join(g['runs'])}); "
            f"settings: {_md_escape(settings_text(g['settings']))}"
        )
        if sample_remark(g):
            lines.append(f"  - {sample_remark(g)}")
        for task_name, task in g["tasks"].items():
            for remark in task_remarks(task, g):
                lines.append(f"  - {TASKS[task_name].title}: {remark}")
    for g in groups:
        if g["usage"]["roles"]:
            lines += ["", f"## Usage: {_md_escape(group_label(g, groups))}", ""]
            lines += _md_table(usage_rows(g["usage"]), "lrrrr")
            lines += ["", cost_note(g["usage"])]
    notes = _md_notes(style)
    if notes:
        lines += ["", "Notes:", "", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"
