"""Which report formats there are, and `render`: a format is one module with one function of the report.

A new format is a module beside these (a function of the `Report`-shaped dict that returns the
text) and one line in `RENDERERS`. HTML also takes the per-case viewer's data (`viewer`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.csv import render_csv
from lexpilot_batch.report.document import Report
from lexpilot_batch.report.html import render_html
from lexpilot_batch.report.json import render_json
from lexpilot_batch.report.latex import render_latex
from lexpilot_batch.report.markdown import render_markdown
from lexpilot_batch.report.terminal import render_table

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
