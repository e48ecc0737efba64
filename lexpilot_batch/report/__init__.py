"""The report: records out of the workspace, per-run metrics and their mean and sample SD over
comparable runs, intervals, model comparisons, interaction statistics, every rendering of it, and
the exports.

Only `results`, `produce` and the `exports` read the workspace, and only they and `formats.plots`
(the figure files it is asked for) write files; the rest works on in-memory inputs (`RunResults`)
and returns a dict or a string.

- `results`: finished records out of the workspace's database, each run classed with its own
  cause-class mapping, and the keys that group comparable runs.
- `document`: the inputs (`RunResults`, `TaskRecords`) and the documented JSON shape (`Report`).
- `build`: `build_report`, grouping comparable runs into groups and groups into families (same
  comparison key), the warnings above the tables, usage and cost.
- `produce`: a report from a workspace, the one call `report` and `run` make: load, check, build,
  figures, the viewer's data, render.
- `statistics`: a family's cases and their additive statistics, each case's influence, the
  intervals (`estimates`), paired model comparisons (`compare`, with the `bootstrap` and the
  `swap` test), and interaction statistics: rounds used, stop reasons, DCG success by round.
- `formats`: `FORMATS` and `render(report, fmt)`, one module per format (`terminal` for the
  `table` format, `json`, `csv`, `markdown`, `latex`, `html` with its per-case `viewer`), what the
  text formats share, and the figures (inline SVG, and files drawn with matplotlib by `plots`).
- `exports`: `export --layout seed` (the original code's result files) and `--layout cases` (one
  row per case).
"""

from __future__ import annotations

from lexpilot_batch.report.build import build_report
from lexpilot_batch.report.document import (
    Group,
    MetricSummary,
    Report,
    RoleUsage,
    RunResults,
    TaskRecords,
    TaskSummary,
    Usage,
)
from lexpilot_batch.report.formats import FORMATS, render
from lexpilot_batch.report.formats.latex import latex_escape
from lexpilot_batch.report.formats.viewer import viewer_data

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
    "viewer_data",
]
