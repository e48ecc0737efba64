"""The report as a plain-text table for the terminal: per group, each task's metrics overall and per class,
the per-run values, usage, then the notes its cells used."""

from __future__ import annotations

from lexpilot_batch.report.cells import (
    FEWER_RUNS_NOTE,
    NO_RECORDS_NOTE,
    NUMBERS_NOTE,
    PARTIAL_NOTE,
    UNDEFINED_NOTE,
    Style,
    number_text,
)
from lexpilot_batch.report.layout import (
    cost_note,
    has_records,
    sample_remark,
    settings_text,
    task_remarks,
    task_runs,
    usage_rows,
)
from lexpilot_batch.tasks import METRIC_TITLES, TASKS
from lexpilot_batch.text import display_width, pad


def _grid(rows: list[list[str]], align: str, indent: str = "") -> list[str]:
    """Rows of cells aligned in columns; `align` has one l/r per column."""
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(pad(cell, widths[i], align[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def render_table(report: dict) -> str:
    style = Style(undefined="—", pm=" ± ", not_run="n/a", fewer=lambda k, n: f" [{k}/{n}]")
    lines: list[str] = [NUMBERS_NOTE]
    if not report["groups"]:
        lines.append("")
        lines.append("No runs to report.")
    for group in report["groups"]:
        lines += [
            "",
            f"== {group['model']}  (user: {group['user_model']}, judge: {group['judge_model']})",
            f"group {group['group_key']}; {group['n_runs']} run"
            f"{'s' if group['n_runs'] != 1 else ''}: {', '.join(group['runs'])}",
            f"settings: {settings_text(group['settings'])}",
        ]
        if sample_remark(group):
            lines.append(f"!! {sample_remark(group)}")
        for task_name, task in group["tasks"].items():
            names = TASKS[task_name].metrics
            n_runs = task_runs(task)
            sizes = set(task["n"].values())
            size = (
                f"{sizes.pop():,} {TASKS[task_name].unit} per run"
                if len(sizes) == 1
                else f"{TASKS[task_name].unit} per run: " + ", ".join(f"{r}={v:,}" for r, v in task["n"].items())
            )
            lines += ["", f"{TASKS[task_name].title} ({size})"]
            if task["partial"]:
                style.used.add("partial")
            lines += [f"  ** {remark}" for remark in task_remarks(task, group)]
            rows = [["", *(METRIC_TITLES[m] for m in names)]]
            scored = has_records(task)  # `--partial` may report a task none of whose cases finished
            rows.append(["overall", *(style.cell(task["overall"][m] if scored else None, n_runs) for m in names)])
            for cls, summaries in task["by_class"].items():
                rows.append([cls, *(style.cell(summaries[m], n_runs) for m in names)])
            lines += _grid(rows, "l" + "r" * len(names), indent="  ")
            if n_runs > 1:
                per_run = [["run", "n", *(METRIC_TITLES[m] for m in names)]]
                for run_id, size_n in task["n"].items():
                    values = [task["overall"][m]["per_run"][run_id] for m in names]
                    per_run.append(
                        [run_id, f"{size_n:,}", *(style.undefined if v is None else number_text(v) for v in values)]
                    )
                    if any(v is None for v in values):
                        style.used.add("undefined")
                lines += ["  per run (overall):"]
                lines += _grid(per_run, "lr" + "r" * len(names), indent="    ")
        if group["usage"]["roles"]:
            lines += ["", "Usage"]
            lines += _grid(usage_rows(group["usage"]), "lrrrr", indent="  ")
            lines.append(f"  {cost_note(group['usage'])}")
    notes = []
    if "undefined" in style.used:
        notes.append(f"— undefined: {UNDEFINED_NOTE}")
    if "fewer" in style.used:
        notes.append(FEWER_RUNS_NOTE)
    if "partial" in style.used:
        notes.append(f"** {PARTIAL_NOTE}")
    if "not_run" in style.used:
        notes.append(f"n/a: {NO_RECORDS_NOTE}")
    if notes:
        lines += ["", "Notes:", *(f"  {n}" for n in notes)]
    return "\n".join(lines) + "\n"
