"""The report in each of its formats: which formats there are (`FORMATS`), and `render`, which
checks the report's shape and hands it to its format's module.

A format is one module with one function of the `Report`-shaped dict that returns the text: a new
format is a module here and one line in `RENDERERS`. HTML also takes the per-case viewer's data.

- `terminal`, `json`, `csv`, `markdown`, `latex` and `html`: one module per format (`terminal`
  writes the `table` format).
- `tables`, `cells` and `layout`: what the text formats share: the side-by-side tables, how a cell
  reads and the notes on its marks, and around them labels, remarks, settings and usage lines.
- `viewer`: the HTML page's per-case viewer, its data (every finished record as the turns it
  added, and what its judges saw) and its script.
- `figures`: what the three figures show; `svg` draws them inline for the HTML page, `plots` as
  SVG and PNG files with matplotlib (`report --figures DIR`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.document import Report
from lexpilot_batch.report.formats.csv import render_csv
from lexpilot_batch.report.formats.html import render_html
from lexpilot_batch.report.formats.json import render_json
from lexpilot_batch.report.formats.latex import render_latex
from lexpilot_batch.report.formats.markdown import render_markdown
from lexpilot_batch.report.formats.terminal import render_table

RENDERERS: dict[str, Callable[[dict], str]] = {
    "table": render_table,
    "json": render_json,
    "csv": render_csv,
    "markdown": render_markdown,
    "latex": render_latex,
    "html": render_html,
}
FORMATS = tuple(RENDERERS)


def check_format(fmt: str, option: str = "--format") -> None:
    """A report format the renderers know, or the error naming the option that gave it (`report
    --format`, and `run --report-format` before anything is sent)."""
    if fmt not in RENDERERS:
        raise LexpilotError(f"{option} must be one of {', '.join(FORMATS)}, not {fmt!r}")


def render(report: dict, fmt: str, viewer: Mapping[str, Any] | None = None) -> str:
    """`report` (as `build_report` returns it, or read back from its JSON) in format `fmt`.

    `viewer` (`report.viewer_data` of the same runs) gives the HTML page its per-case viewer.
    """
    renderer = RENDERERS.get(fmt)
    if renderer is None:
        raise LexpilotError(f"Unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    try:
        Report.model_validate(report)
    except ValidationError as exc:
        raise LexpilotError(f"The report does not have the documented shape: {exc}") from exc
    if fmt == "html":
        return render_html(report, viewer)
    return renderer(report)
