"""The report as tidy CSV: one row per (group, run or statistic, task, class, metric) with one numeric
value, floats at full precision, an empty cell where a value is undefined.

Columns: model, user_model, judge_model, group_key, run, task, class, metric, value, n, unit, partial,
bundled_sample, cases, few_cases.

- `run` is a run id (that run's value), or `mean`, `sd` (over the runs where the value is
  defined), `se` (the standard error of the mean), `ci_low`, `ci_high` (its 95% interval),
  `var_between`, `var_within` (its variance split between cases and runs, with two runs or more:
  `estimates.variance`).
- `class` is `overall` or a cause class.
- `n` counts what `unit` names: for a run's value its histories, cases or claims (the task's unit;
  cases for the interaction statistics), for `mean` and `sd` the runs the value is defined in, for
  `se`, `ci_low`, `ci_high`, `var_between` and `var_within` the cases they rest on.
- `cases` is the number of cases of the row's class (or of the group, overall), and `few_cases`
  (`true`/`false`) says that it is below what an interval needs (`estimates.MIN_CASES`): such a
  row's value has no `se` and no interval rows, and a filtered CSV still says why.
- Besides the metrics, the interaction statistics (`report.statistics.interaction`) are rows of
  task `ljp_interaction` (metrics `share_<stop reason>`, `mean_responses`) and `dcg`
  (`success_by_round_1`, `success_by_round_2`), class `overall`.

Model comparisons have a shape of their own and are in the JSON and the other text formats.

A text cell that would start a formula in a spreadsheet (a model or run name beginning with `=`,
`+`, `-` or `@`) is written with a `'` before it; numbers as they are (`spreadsheet`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.report.statistics.estimates import MIN_CASES
from lexpilot_batch.util.spreadsheet import csv_text

COLUMNS = (
    "model",
    "user_model",
    "judge_model",
    "group_key",
    "run",
    "task",
    "class",
    "metric",
    "value",
    "n",
    "unit",
    "partial",
    "bundled_sample",
    "cases",
    "few_cases",
)


def _number(value: float | None) -> float | str:
    """A value cell: the number itself (written at full precision), empty where undefined."""
    return "" if value is None else value


def _few(cases: int) -> dict[str, Any]:
    return {"cases": cases, "few_cases": str(cases < MIN_CASES).lower()}


def _summary_rows(
    summary: Mapping[str, Any], unit: str, sizes: Mapping[str, int]
) -> Iterator[tuple[str, float | str, Any, str]]:
    """(run, value, n, unit) of one summary: each run, then mean, sd and the interval."""
    for run_id, value in summary["per_run"].items():
        yield run_id, _number(value), sizes.get(run_id, ""), unit
    yield "mean", _number(summary["mean"]), summary["n_defined"], "runs"
    yield "sd", _number(summary["sd"]), summary["n_defined"], "runs"
    if summary.get("se") is not None:
        yield "se", summary["se"], summary["cases"], "cases"
    ci = summary.get("ci")
    if ci is not None:
        yield "ci_low", _number(ci["low"]), ci["cases"], "cases"
        yield "ci_high", _number(ci["high"]), ci["cases"], "cases"
    variance = summary.get("variance")
    if variance is not None and variance["between"] is not None:
        yield "var_between", variance["between"], summary["cases"], "cases"
        yield "var_within", variance["within"], summary["cases"], "cases"


def tidy_rows(report: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every row of the CSV as a dict keyed by `COLUMNS`."""
    for group in report["groups"]:
        head = {k: group[k] for k in ("model", "user_model", "judge_model", "group_key")}
        head["bundled_sample"] = str(group["bundled_sample"]).lower()
        total = group["cases"]["total"]
        for task_name, task in group["tasks"].items():
            partial = str(task["partial"]).lower()
            scopes = [("overall", task["overall"]), *task["by_class"].items()]
            for cls, summaries in scopes:
                for metric, summary in summaries.items():
                    size = _few(summary["cases"])
                    for run, value, n, unit in _summary_rows(summary, TASKS[task_name].unit, summary["n"]):
                        yield {**head, "run": run, "task": task_name, "class": cls, "metric": metric,
                               "value": value, "n": n, "unit": unit, "partial": partial, **size}  # fmt: skip
        for task_name, metric, summary, sizes in _interaction(group["interaction"]):
            partial = str(group["tasks"][task_name]["partial"]).lower()
            for run, value, n, unit in _summary_rows(summary, "cases", sizes):
                yield {**head, "run": run, "task": task_name, "class": "overall", "metric": metric,
                       "value": value, "n": n, "unit": unit, "partial": partial, **_few(total)}  # fmt: skip


def _interaction(stats: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any], Mapping[str, int]]]:
    if "ljp_interaction" in stats:
        s = stats["ljp_interaction"]
        for reason, summary in s["stop_reasons"].items():
            yield "ljp_interaction", f"share_{reason}", summary, s["n"]
        yield "ljp_interaction", "mean_responses", s["responses"], s["n"]
    if "dcg" in stats:
        s = stats["dcg"]
        for k, summary in s["success_by_round"].items():
            yield "dcg", f"success_by_round_{k}", summary, s["n"]


def render_csv(report: dict) -> str:
    """The tidy CSV; text cells that would start a formula are neutralised (`spreadsheet`)."""
    return csv_text(COLUMNS, ([row[c] for c in COLUMNS] for row in tidy_rows(report)))
