"""The tables the text formats share (terminal table, Markdown, HTML), built once from the report.

Models side by side: the main table has one row per group and one column per task's headline
metric; each task then has a table of all its metrics with a row per group, overall and in each
cause class (with n and the 95% interval); then model comparisons, interaction statistics and the
per-run values. A renderer only lays these out (`Table`, `Cell`) and adds the notes its cells used
(`cells.Style.used`). LaTeX lays out its own, narrower tables (`latex`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lexpilot_batch.benchmark.protocols.interaction import STOP_REASONS
from lexpilot_batch.benchmark.tasks import METRIC_TITLES, TASKS
from lexpilot_batch.report.formats.cells import Style, number_text
from lexpilot_batch.report.formats.layout import group_label, has_records, task_runs
from lexpilot_batch.report.statistics.interaction import DCG_ROUNDS
from lexpilot_batch.util.text import counted

STOP_TITLES = {
    "judgment_round_1": "judgment at round 1",
    "judgment_round_2": "judgment at round 2",
    "judgment_round_3": "judgment at round 3",
    "forced_final_prediction": "forced final prediction",
}
assert set(STOP_TITLES) == set(STOP_REASONS)


@dataclass
class Cell:
    """A cell's text, and an optional second line (a metric's 95% interval)."""

    text: str
    sub: str = ""


@dataclass
class Table:
    key: str  # a stable id (HTML anchors, tests)
    title: str
    header: list[str]
    rows: list[list[Cell]]
    align: str  # "l" or "r" per column
    note: str = ""  # a line under the title
    groups: list[int] = field(default_factory=list)  # row indices that start a new block (rules)


def metric_title(task: str, metric: str) -> str:
    return f"{TASKS[task].title} {METRIC_TITLES[metric]}"


def report_tasks(report: Mapping[str, Any]) -> list[str]:
    """The tasks any group has, in benchmark order."""
    return [t for t in TASKS if any(t in g["tasks"] for g in report["groups"])]


def n_text(sizes: Mapping[str, int]) -> str:
    """n per run: one number when every run has the same, else the range."""
    if not sizes:
        return ""
    lo, hi = min(sizes.values()), max(sizes.values())
    return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"


def signed(value: float) -> str:
    return f"{value:+.4f}"


def p_text(p: float | None, floor: bool = False) -> str:
    """A p-value: 3 decimals, "<0.001" below; "<x" when the resamples cannot resolve it (`floor`)."""
    if p is None:
        return ""
    if floor:
        return f"<{p:.2g}"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


# How a comparison's p-value was computed, as its table names it (`compare` documents each).
TEST_TITLES = {
    "sign-flip-exact": "sign-flip, exact",
    "sign-flip-mc": "sign-flip, MC",
    "swap-exact": "swap, exact",
    "swap-mc": "swap, MC",
}


def _summary_cell(style: Style, task: Mapping[str, Any] | None, summaries: Mapping | None, metric: str) -> Cell:
    if task is None or summaries is None:
        return Cell(style.cell(None, 0))
    if not has_records(task):  # `--partial` with none of the task's cases finished: nothing scored
        return Cell(style.cell(None, task_runs(task), task["partial"]))
    summary = summaries[metric]
    return Cell(style.cell(summary, task_runs(task), task["partial"]), style.interval(summary))


def main_table(report: Mapping[str, Any], style: Style) -> Table:
    groups = report["groups"]
    tasks = report_tasks(report)
    rows = []
    for g in groups:
        cells = [Cell(group_label(g, groups)), Cell(str(g["n_runs"]))]
        for t in tasks:
            task = g["tasks"].get(t)
            cell = _summary_cell(style, task, None if task is None else task["overall"], TASKS[t].headline)
            cells.append(Cell(cell.text))
        rows.append(cells)
    header = ["Model", "Runs", *(metric_title(t, TASKS[t].headline) for t in tasks)]
    return Table("main", "Main results", header, rows, "lr" + "r" * len(tasks), "mean ± SD over runs")


def _class_cases(groups: Sequence[Mapping[str, Any]], cls: str | None) -> str:
    counts = {g["cases"]["total"] if cls is None else g["cases"]["by_class"].get(cls) for g in groups}
    counts.discard(None)
    return f" ({counted(counts.pop(), 'case')})" if len(counts) == 1 else ""


def task_table(report: Mapping[str, Any], task_name: str, style: Style) -> Table:
    """All of a task's metrics, each group side by side, overall then in each class."""
    groups = [g for g in report["groups"] if task_name in g["tasks"]]
    names = TASKS[task_name].metrics
    classes = sorted({cls for g in groups for cls in g["tasks"][task_name]["by_class"]})
    rows: list[list[Cell]] = []
    starts = []
    for cls in (None, *classes):
        starts.append(len(rows))
        for i, g in enumerate(groups):
            task = g["tasks"][task_name]
            summaries = task["overall"] if cls is None else task["by_class"].get(cls)
            scope = ("overall" if cls is None else cls) + _class_cases(groups, cls) if i == 0 else ""
            size = n_text(summaries[names[0]]["n"]) if summaries else ""
            rows.append(
                [
                    Cell(scope),
                    Cell(group_label(g, report["groups"])),
                    Cell(size),
                    *(_summary_cell(style, task, summaries, m) for m in names),
                ]
            )
    header = ["Scope", "Model", "n", *(METRIC_TITLES[m] for m in names)]
    note = f"n = {TASKS[task_name].unit} per run; mean ± SD over runs, then the 95% interval"
    table = Table(task_name, TASKS[task_name].title, header, rows, "llr" + "r" * len(names), note)
    table.groups = starts
    return table


def _no_difference(d: Mapping[str, Any]) -> str:
    """What stands for a difference there is none of: no case both scored (`--partial`), or a
    metric undefined on them."""
    return "n/a" if d["cases"] == 0 else "undefined"


def comparison_table(report: Mapping[str, Any], style: Style) -> Table | None:
    if not report["comparisons"]:
        return None
    holm = report["bootstrap"]["adjust"] == "holm"
    rows: list[list[Cell]] = []
    starts = []
    for comparison in report["comparisons"]:
        starts.append(len(rows))
        name = f"{comparison['a']['model']} − {comparison['b']['model']}"
        first = True
        for task_name, task in comparison["tasks"].items():
            for metric, d in task.items():
                cells = [
                    Cell(name if first else ""),
                    Cell(metric_title(task_name, metric)),
                    Cell("" if d["a"] is None else number_text(d["a"])),
                    Cell("" if d["b"] is None else number_text(d["b"])),
                    Cell(_no_difference(d) if d["difference"] is None else signed(d["difference"])),
                    Cell(style.ci(d, signed)),
                    Cell(p_text(d["p_value"], d["p_floor"])),
                ]
                if holm:
                    cells.append(Cell(p_text(d["p_adjusted"], d["p_floor"] and d["p_adjusted"] == d["p_value"])))
                cells += [
                    Cell(TEST_TITLES.get(d["test"] or "", d["test"] or "")),
                    Cell("" if d["correlation"] is None else f"{d['correlation']:+.2f}"),
                    Cell("" if d["mdd"] is None else number_text(d["mdd"])),
                ]
                rows.append(cells)
                first = False
    header = ["Comparison (A − B)", "Metric", "A", "B", "A − B", "95% CI", "p"]
    header += ["p (Holm)"] if holm else []
    header += ["test", "r", "MDD"]
    align = "llrrrrr" + ("r" if holm else "") + "lrr"
    table = Table("comparisons", "Model comparisons", header, rows, align, comparison_note(report))
    table.groups = starts
    return table


def comparison_note(report: Mapping[str, Any]) -> str:
    b = report["bootstrap"]
    adjusted = (
        "p (Holm): adjusted over the report's comparisons, the headline metrics one family and the others "
        "another (family-wise 5% each)"
        if b["adjust"] == "holm"
        else "p not corrected for multiple comparisons (--adjust holm)"
    )
    return (
        "difference of the means over runs, paired by case; p: two-sided, by the paired permutation test named "
        "(on as many runs of each model); 95% CI: the differences that test would not reject; "
        f"{adjusted}; r: correlation of the two models' per-case scores; MDD: the difference that test detects "
        f"with 80% power at 5%; <x: the {b['resamples']:,} resamples cannot resolve a p below x"
    )


def interaction_tables(report: Mapping[str, Any], style: Style) -> list[Table]:
    groups = report["groups"]
    out = []
    rows: list[list[Cell]] = []
    for g in groups:
        stats = g["interaction"].get("ljp_interaction")
        if stats:
            cells = [Cell(group_label(g, groups)), Cell(n_text(stats["n"]))]
            cells += [Cell(style.stat(stats["stop_reasons"][r], stats["n"])) for r in STOP_REASONS]
            cells.append(Cell(style.stat(stats["responses"], stats["n"])))
            rows.append(cells)
    if rows:
        header = ["Model", "cases", *(STOP_TITLES[r] for r in STOP_REASONS), "responses"]
        note = "share of cases by how the consultation ended, and new responses per case (mean ± SD over runs)"
        out.append(Table("interaction", "Interaction LJP: rounds used", header, rows, "lr" + "r" * 5, note))
    rows = []
    for g in groups:
        stats = g["interaction"].get("dcg")
        if stats:
            cells = [Cell(group_label(g, groups)), Cell(n_text(stats["n"]))]
            cells += [Cell(style.stat(stats["success_by_round"][k], stats["n"])) for k in DCG_ROUNDS]
            rows.append(cells)
    if rows:
        header = ["Model", "cases", "by round 1", "by round 2"]
        note = "share of cases with a question on a focal point by that round (mean ± SD over runs)"
        out.append(Table("dcg_rounds", "DCG: success by round", header, rows, "lrrr", note))
    return out


def per_run_table(report: Mapping[str, Any], style: Style) -> Table | None:
    groups = report["groups"]
    if all(g["n_runs"] == 1 for g in groups):
        return None
    tasks = report_tasks(report)
    rows: list[list[Cell]] = []
    starts = []
    for g in groups:
        starts.append(len(rows))
        for i, run_id in enumerate(g["runs"]):
            cells = [Cell(group_label(g, groups) if i == 0 else ""), Cell(run_id)]
            for t in tasks:
                task = g["tasks"].get(t)
                value = (
                    "n/a"
                    if task is None or not task["n"].get(run_id)
                    else task["overall"][TASKS[t].headline]["per_run"][run_id]
                )
                cells.append(Cell(style.value(value)))
            rows.append(cells)
    header = ["Model", "Run", *(metric_title(t, TASKS[t].headline) for t in tasks)]
    table = Table("runs", "Per run", header, rows, "ll" + "r" * len(tasks), "each run's value, overall")
    table.groups = starts
    return table


def variance_table(report: Mapping[str, Any]) -> Table | None:
    """Where each headline metric's uncertainty comes from: between cases or within them (runs)."""
    rows: list[list[Cell]] = []
    starts = []
    groups = report["groups"]
    for g in groups:
        first = True
        for t in report_tasks(report):
            task = g["tasks"].get(t)
            if task is None:
                continue
            s = task["overall"][TASKS[t].headline]
            v = s.get("variance")
            if not v or not s["se"]:
                continue
            if first:
                starts.append(len(rows))
            k = len(g["runs"])
            cells = [Cell(group_label(g, groups) if first else ""), Cell(metric_title(t, TASKS[t].headline))]
            cells.append(Cell(number_text(s["se"])))
            if v["between"] is None or v["within"] is None:
                cells += [Cell(""), Cell(""), Cell(""), Cell(""), Cell(number_text(s["se"] / 2**0.5))]
            else:
                # Shares of the fitted split (between + within / k: `between` is cut at 0, so it
                # can exceed the measured per-case variance), applied to the measured SE.
                fitted = v["between"] + v["within"] / k
                runs_share = v["within"] / k / fitted if fitted else 0.0
                doubled = (v["between"] + v["within"] / (2 * k)) / fitted if fitted else 1.0
                cells += [
                    Cell(number_text(v["between"] ** 0.5)),
                    Cell(number_text(v["within"] ** 0.5)),
                    Cell(f"{100 * runs_share:.0f}%"),
                    Cell(number_text(s["se"] * doubled**0.5)),
                    Cell(number_text(s["se"] / 2**0.5)),
                ]
            rows.append(cells)
            first = False
    if not rows:
        return None
    header = ["Model", "Metric", "SE", "between cases", "within cases", "from runs", "SE, 2× runs", "SE, 2× cases"]
    note = (
        "the SE of each headline metric split: SE² = (between² + within² / runs) / cases, between: the SD of a "
        "case's true value across cases, within: the SD of a case's value from run to run; from runs: the share "
        "of SE² the runs could still remove (none with one run: the two cannot be told apart)"
    )
    table = Table("variance", "Where the uncertainty comes from", header, rows, "llrrrrrr", note)
    table.groups = starts
    return table


def plan_table(report: Mapping[str, Any]) -> Table | None:
    """`--plan DELTA`: the cases each headline comparison needs at 1, 3, 5 and 10 runs of each model."""
    plan = report.get("plan")
    if not plan:
        return None
    runs = [str(k) for k in plan["runs"]]
    rows = []
    for row in plan["rows"]:
        if not row["headline"]:
            continue
        name = f"{row['a']} − {row['b']}" if row["b"] is not None else f"{row['a']} − a model like it"
        cells = [Cell(name), Cell(metric_title(row["task"], row["metric"]))]
        cells += [Cell(f"{row['cases'][k]:,}" if k in row["cases"] else "") for k in runs]
        rows.append(cells)
    if not rows:
        return None
    header = ["Comparison", "Metric", *(f"{k} run{'s' if k != '1' else ''}" for k in runs)]
    note = (
        f"the cases a paired comparison needs to detect a difference of {plan['delta']:g} with "
        f"{plan['power']:.0%} power in a two-sided {plan['alpha']:.0%} test, per runs of each model, at the "
        "variance measured here (a model compared with nothing: against another of its own variance, "
        "uncorrelated; one run measured: that many runs only)"
    )
    return Table("plan", "Plan", header, rows, "ll" + "r" * len(runs), note)


def tables(report: Mapping[str, Any], style: Style) -> list[Table]:
    """Every table, in the order the text formats show them."""
    if not report["groups"]:
        return []
    out = [main_table(report, style)]
    out += [task_table(report, t, style) for t in report_tasks(report)]
    comparison = comparison_table(report, style)
    if comparison is not None:
        out.append(comparison)
    for extra in (variance_table(report), plan_table(report)):
        if extra is not None:
            out.append(extra)
    out += interaction_tables(report, style)
    runs = per_run_table(report, style)
    if runs is not None:
        out.append(runs)
    return out
