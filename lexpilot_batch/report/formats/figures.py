"""What the report's three figures show, as plain data: drawn as inline SVG for the HTML report
(`svg`, no dependency) and as SVG and PNG files with matplotlib (`plots`, `report --figures DIR`).

- `metrics`: each task's headline metric per model (mean over runs), with its 95% interval as
  error bars (none where the report gives none).
- `classes`: a heatmap per task of the headline metric, cause classes by models, each panel
  coloured over its metric's range (QWK diverging from -1 through 0 to 1).
- `interaction`: how Interaction LJP consultations ended per model (shares judged at round 1, 2, 3
  or forced to a final prediction, stacked), and DCG success by round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.benchmark.protocols.interaction import STOP_REASONS
from lexpilot_batch.benchmark.tasks import METRIC_TITLES, TASKS
from lexpilot_batch.report.formats.layout import group_label
from lexpilot_batch.report.formats.tables import STOP_TITLES, metric_title, report_tasks
from lexpilot_batch.report.statistics.estimates import metric_range
from lexpilot_batch.report.statistics.interaction import DCG_ROUNDS

Value = float | None


@dataclass
class Series:
    label: str
    values: list[Value]
    low: list[Value]
    high: list[Value]


@dataclass
class Bars:
    """Grouped bars: one group of bars per category, one bar per series, with intervals."""

    name: str
    title: str
    categories: list[str]
    series: list[Series]
    ylabel: str


@dataclass
class Panel:
    """One metric's grid, coloured over the values the metric can take (`low` to `high`):
    diverging around `middle` (QWK's 0, chance agreement: a negative kappa is not drawn in the
    colour of 0), else sequential from `low`."""

    title: str
    values: list[list[Value]]  # [row][column]
    low: float = 0.0
    high: float = 1.0
    middle: float | None = None

    def position(self, value: float) -> float:
        """Where `value` sits on the panel's colour scale: -1 (the low end of a diverging scale)
        through 0 (its middle, or a sequential scale's low end) to 1 (the high end)."""
        if self.middle is None:
            return max(0.0, min(1.0, (value - self.low) / (self.high - self.low)))
        if value < self.middle:
            return -max(0.0, min(1.0, (self.middle - value) / (self.middle - self.low)))
        return max(0.0, min(1.0, (value - self.middle) / (self.high - self.middle)))


@dataclass
class Heatmap:
    """Panels of values, rows by columns (cause classes by models), each on its metric's scale."""

    name: str
    title: str
    rows: list[str]
    columns: list[str]
    panels: list[Panel]


@dataclass
class Stacked:
    """Horizontal stacked shares per row (model), and beside them grouped bars of `side`."""

    name: str
    title: str
    rows: list[str]
    segments: list[str]
    shares: list[list[Value]]  # [row][segment]
    side: Bars | None


Figure = Bars | Heatmap | Stacked


def metrics_figure(report: Mapping[str, Any]) -> Bars:
    groups = report["groups"]
    tasks = report_tasks(report)
    series = []
    for g in groups:
        values, low, high = [], [], []
        for t in tasks:
            summary = g["tasks"][t]["overall"][TASKS[t].headline] if t in g["tasks"] else None
            ci = None if summary is None else summary["ci"]
            values.append(None if summary is None else summary["mean"])
            low.append(None if ci is None else ci["low"])
            high.append(None if ci is None else ci["high"])
        series.append(Series(group_label(g, groups), values, low, high))
    categories = [metric_title(t, TASKS[t].headline) for t in tasks]
    return Bars("metrics", "Task metrics per model (mean over runs, 95% CI)", categories, series, "value")


def classes_figure(report: Mapping[str, Any]) -> Heatmap:
    groups = report["groups"]
    classes = sorted({cls for g in groups for cls in g["cases"]["by_class"]})
    panels = []
    for t in report_tasks(report):
        metric = TASKS[t].headline
        values: list[list[Value]] = []
        for cls in classes:
            row: list[Value] = []
            for g in groups:
                by_class = g["tasks"][t]["by_class"] if t in g["tasks"] else {}
                row.append(by_class[cls][metric]["mean"] if cls in by_class else None)
            values.append(row)
        low, high = metric_range(metric)
        middle = 0.0 if low < 0.0 else None  # QWK: below 0 is agreement worse than chance
        panels.append(Panel(f"{TASKS[t].title} {METRIC_TITLES[metric]}", values, low, high, middle))
    columns = [group_label(g, groups) for g in groups]
    return Heatmap("classes", "Per cause class (mean over runs)", classes, columns, panels)


def interaction_figure(report: Mapping[str, Any]) -> Stacked | None:
    groups = report["groups"]
    with_int = [g for g in groups if "ljp_interaction" in g["interaction"]]
    with_dcg = [g for g in groups if "dcg" in g["interaction"]]
    if not with_int and not with_dcg:
        return None
    shares = [[g["interaction"]["ljp_interaction"]["stop_reasons"][r]["mean"] for r in STOP_REASONS] for g in with_int]
    side = None
    if with_dcg:
        series = []
        for g in with_dcg:
            values: list[Value] = [g["interaction"]["dcg"]["success_by_round"][k]["mean"] for k in DCG_ROUNDS]
            series.append(Series(group_label(g, groups), values, [None] * len(values), [None] * len(values)))
        side = Bars("dcg_rounds", "DCG success by round", ["round 1", "rounds 1–2"], series, "share of cases")
    return Stacked(
        "interaction",
        "Interaction LJP: how consultations ended (share of cases)",
        [group_label(g, groups) for g in with_int],
        [STOP_TITLES[r] for r in STOP_REASONS],
        shares,
        side,
    )


def figures(report: Mapping[str, Any]) -> list[Figure]:
    """The report's figures, in order; none for an empty report, and no per-class heatmap where no
    case has finished (a `--partial` report of a prepared workspace)."""
    if not report["groups"]:
        return []
    out: list[Figure] = [metrics_figure(report)]
    classes = classes_figure(report)
    if classes.rows and classes.panels:
        out.append(classes)
    interaction = interaction_figure(report)
    if interaction is not None:
        out.append(interaction)
    return out
