"""The report: per-run metrics, their mean and sample SD over comparable runs, and its renderings.

Everything here works on in-memory inputs (`RunResults`) and returns a dict or a string; reading
the database and writing files belong to the caller (`results`, `cli`).

- `model`: the inputs (`RunResults`, `TaskRecords`) and the documented JSON shape (`Report`).
- `build`: `build_report`, grouping comparable runs, the metrics and their mean and SD, usage and cost.
- `formats`: `FORMATS` and `render(report, fmt)`, one module per format: `table`, `json`, `csv`,
  `markdown`, `latex`.
- `cells` and `layout`: what the text formats share (how a cell reads and the notes on its marks;
  labels, columns, remarks, settings and usage lines).
"""

from __future__ import annotations

from lexpilot_batch.report.build import build_report
from lexpilot_batch.report.formats import FORMATS, render
from lexpilot_batch.report.latex import latex_escape
from lexpilot_batch.report.model import (
    Group,
    MetricSummary,
    Report,
    RoleUsage,
    RunResults,
    TaskRecords,
    TaskSummary,
    Usage,
)

__all__ = [
    "FORMATS",
    "Group",
    "MetricSummary",
    "Report",
    "RoleUsage",
    "RunResults",
    "TaskRecords",
    "TaskSummary",
    "Usage",
    "build_report",
    "latex_escape",
    "render",
]
