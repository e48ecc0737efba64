"""The report: per-run metrics, their mean and sample SD over comparable runs, and its renderings.

Everything here works on in-memory inputs (`RunResults`) and returns a dict or a string; reading
the database and writing files belong to the caller.

Comparable runs are those with the same `group_key` (dataset hash, selected cases, code/prompt
hash, models and generation settings); runs are never pooled across keys. Each metric is computed
within each run, overall and per cause class that has records in the group, and only then
averaged: mean and sample SD (ddof=1) over the runs where the metric is defined (see
`metrics.mean_sd`).

The JSON shape (`build_report`), stable and validated against `Report` before it is returned:

    {"groups": [{
        "model", "user_model", "judge_model", "group_key",
        "runs": [run ids], "n_runs": int, "settings": {...},
        "tasks": {task: {
            "overall":  {metric: {"mean", "sd", "n_defined", "per_run": {run_id: value}}},
            "by_class": {class: {metric: {...same...}}},
            "n":        {run_id: records scored (histories for lca, cases for dcg,
                         claims for ljp_*)},
            "partial":  bool,
            "missing":  {run_id: [case numbers not finished]},
            "failed":   {run_id: [case numbers whose thread failed]}}},
        "usage": {"roles": {role: {"requests", "prompt_tokens", "completion_tokens",
                                   "cost_usd"}},
                  "total": {...same four keys...},
                  "batch_discount": float | null}}]}

Undefined metric values are `null`. Floats keep full precision in JSON and CSV; the text formats
show fractions (not percentages) with 4 decimals. Groups are sorted by (model, user model, judge
model, group key), runs by run id, tasks in benchmark order, classes by name.

Cost. `prices` maps a role to `{"input": USD per 1M prompt tokens, "output": USD per 1M
completion tokens}`; each backend's tokens cost what `costs.cost_usd` says (batch work at the
batch discount, 0.5 by default; sync work at list price; manual work unpriced). A role without a
price, or with unpriced work, has `cost_usd: null`, and then so does the total.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from lexpilot_batch import metrics
from lexpilot_batch.costs import DEFAULT_BATCH_DISCOUNT, Prices, check_prices, cost_usd
from lexpilot_batch.costs import total as total_cost
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.metrics import Metric
from lexpilot_batch.tasks import METRIC_TITLES, TASKS
from lexpilot_batch.text import display_width, pad

ROLE_ORDER = ("eval", "user", "judge")
USAGE_FIELDS = ("requests", "prompt_tokens", "completion_tokens")
FORMATS = ("table", "json", "csv", "markdown", "latex")


# --- Inputs ----------------------------------------------------------------------------------


@dataclass
class TaskRecords:
    """One task of one run: the scored records with their cause class, and what is not scored.

    `missing` are case numbers whose thread has not finished; `failed` those whose thread failed.
    Either makes the task partial.
    """

    records: list[tuple[str, dict]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass
class RunResults:
    """Everything the report needs from one run (run id, evaluated model)."""

    run_id: str
    model: str
    user_model: str
    judge_model: str
    group_key: str
    settings: dict = field(default_factory=dict)
    tasks: dict[str, TaskRecords] = field(default_factory=dict)
    # role -> backend -> {requests, prompt_tokens, completion_tokens}
    usage: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


# --- The JSON shape --------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricSummary(_Strict):
    mean: float | None
    sd: float | None
    n_defined: int
    per_run: dict[str, float | None]


class TaskSummary(_Strict):
    overall: dict[str, MetricSummary]
    by_class: dict[str, dict[str, MetricSummary]]
    n: dict[str, int]
    partial: bool
    missing: dict[str, list[str]]
    failed: dict[str, list[str]]


class RoleUsage(_Strict):
    requests: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None


class Usage(_Strict):
    roles: dict[str, RoleUsage]
    total: RoleUsage
    batch_discount: float | None


class Group(_Strict):
    model: str
    user_model: str
    judge_model: str
    group_key: str
    runs: list[str]
    n_runs: int
    settings: dict[str, Any]
    tasks: dict[str, TaskSummary]
    usage: Usage


class Report(_Strict):
    """The documented JSON shape of `build_report`'s result."""

    groups: list[Group]


# --- Building --------------------------------------------------------------------------------


def _natural_key(text: str) -> tuple:
    """Sort "run2" before "run10" and case "9" before "10"."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", str(text)) if part
    )


def _scored(run: RunResults, task: str, records: list[dict]) -> tuple[dict[str, Metric], int]:
    try:
        return TASKS[task].score(records), TASKS[task].size(records)
    except (KeyError, TypeError, ValueError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise LexpilotError(
            f"Cannot score task {task} of run {run.run_id} (model {run.model}): {detail}. "
            "The stored records are not in the shape the protocol writes; re-ingest the run "
            "or report this as a bug."
        ) from exc


def _summary(per_run: dict[str, Metric]) -> dict:
    mean, sd = metrics.mean_sd(per_run.values())
    return {"mean": mean, "sd": sd, "n_defined": metrics.n_defined(per_run.values()), "per_run": per_run}


def _summarise_task(task: str, runs: list[RunResults]) -> dict:
    names = TASKS[task].metrics
    present = [run for run in runs if task in run.tasks]
    classes = sorted({cls for run in present for cls, _ in run.tasks[task].records})
    overall: dict[str, dict[str, Metric]] = {m: {} for m in names}
    by_class: dict[str, dict[str, dict[str, Metric]]] = {cls: {m: {} for m in names} for cls in classes}
    n: dict[str, int] = {}
    missing: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    for run in present:
        task_records = run.tasks[task]
        records = [record for _, record in task_records.records]
        values, n[run.run_id] = _scored(run, task, records)
        for m in names:
            overall[m][run.run_id] = values[m]
        for cls in classes:
            in_class = [record for c, record in task_records.records if c == cls]
            values, _ = _scored(run, task, in_class)
            for m in names:
                by_class[cls][m][run.run_id] = values[m]
        missing[run.run_id] = sorted(map(str, task_records.missing), key=_natural_key)
        failed[run.run_id] = sorted(map(str, task_records.failed), key=_natural_key)
    return {
        "overall": {m: _summary(overall[m]) for m in names},
        "by_class": {cls: {m: _summary(by_class[cls][m]) for m in names} for cls in classes},
        "n": n,
        "partial": any(missing.values()) or any(failed.values()),
        "missing": missing,
        "failed": failed,
    }


def _usage(runs: list[RunResults], prices: Prices | None, discount: float) -> dict:
    """Requests and tokens per role over the group's runs, and their cost: `costs.cost_usd` of each
    backend's tokens (batch work at the discount, sync work at list price, manual work unpriced)."""
    by_backend: dict[str, dict[str, dict[str, int]]] = {}
    for run in runs:
        for role, backends in run.usage.items():
            for backend, counts in backends.items():
                into = by_backend.setdefault(role, {}).setdefault(backend, dict.fromkeys(USAGE_FIELDS, 0))
                for key in USAGE_FIELDS:
                    into[key] += int(counts.get(key, 0) or 0)
    order = [r for r in ROLE_ORDER if r in by_backend] + sorted(set(by_backend) - set(ROLE_ORDER))
    roles = {}
    for role in order:
        price = None if prices is None else prices.get(role)
        parts = by_backend[role].items()
        roles[role] = {
            **{key: sum(counts[key] for _, counts in parts) for key in USAGE_FIELDS},
            "cost_usd": total_cost(
                cost_usd(counts["prompt_tokens"], counts["completion_tokens"], price, backend, discount)
                for backend, counts in parts
            ),
        }
    total: dict[str, Any] = {key: sum(r[key] for r in roles.values()) for key in USAGE_FIELDS}
    total["cost_usd"] = total_cost(r["cost_usd"] for r in roles.values()) if prices is not None else None
    return {"roles": roles, "total": total, "batch_discount": discount if prices is not None else None}


def build_report(
    runs: list[RunResults],
    prices: dict | None = None,
    *,
    batch_discount: float = DEFAULT_BATCH_DISCOUNT,
) -> dict:
    """The report of `runs` as the stable JSON-ready dict documented in this module."""
    check_prices(prices, batch_discount)
    for run in runs:
        unknown = sorted(set(run.tasks) - set(TASKS))
        if unknown:
            raise LexpilotError(
                f"Run {run.run_id} has unknown task(s) {', '.join(unknown)}; the report knows {', '.join(TASKS)}."
            )
    by_key: dict[tuple[str, str, str, str], list[RunResults]] = {}
    for run in runs:
        key = (run.model, run.user_model, run.judge_model, run.group_key)
        by_key.setdefault(key, []).append(run)
    groups = []
    for key in sorted(by_key):
        members = sorted(by_key[key], key=lambda r: _natural_key(r.run_id))
        ids = [r.run_id for r in members]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise LexpilotError(
                f"Run id(s) {', '.join(twice)} appear more than once for model {key[0]}; each run must be given once."
            )
        model, user_model, judge_model, group_key = key
        groups.append(
            {
                "model": model,
                "user_model": user_model,
                "judge_model": judge_model,
                "group_key": group_key,
                "runs": ids,
                "n_runs": len(ids),
                "settings": dict(members[0].settings),
                "tasks": {
                    task: _summarise_task(task, members) for task in TASKS if any(task in r.tasks for r in members)
                },
                "usage": _usage(members, prices, batch_discount),
            }
        )
    report = {"groups": groups}
    Report.model_validate(report)  # the documented shape is a promise; hold ourselves to it
    return report


# --- Rendering helpers -----------------------------------------------------------------------

UNDEFINED_NOTE = "its denominator is zero (for QWK: zero expected disagreement)"
FEWER_RUNS_NOTE = (
    "[k/n]: defined in only k of the n runs; mean and SD are over those k "
    "(undefined runs are excluded, not counted as 0)"
)
PARTIAL_NOTE = "partial: some cases are not scored (not finished or failed); see the task notes"
NUMBERS_NOTE = (
    "Values are fractions (not percentages) with 4 decimals: mean ± sample SD "
    "(ddof=1) over runs, each metric computed within each run first."
)


def _grid(rows: list[list[str]], align: str, indent: str = "") -> list[str]:
    """Rows of cells aligned in columns; `align` has one l/r per column."""
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(pad(cell, widths[i], align[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def _num(value: float) -> str:
    return f"{value:.4f}"


@dataclass
class _Style:
    """How one text format writes a cell, and which notes the cells have used."""

    undefined: str
    pm: str
    not_run: str
    fewer: Callable[[int, int], str]
    partial_mark: str = ""
    used: set[str] = field(default_factory=set)

    def cell(self, summary: Mapping[str, Any] | None, n_runs: int, partial: bool = False) -> str:
        if summary is None:
            self.used.add("not_run")
            return self.not_run
        mean, sd, k = summary["mean"], summary["sd"], summary["n_defined"]
        if mean is None:
            self.used.add("undefined")
            text = self.undefined
        else:
            text = _num(mean) if sd is None else f"{_num(mean)}{self.pm}{_num(sd)}"
            if k < n_runs:
                self.used.add("fewer")
                text += self.fewer(k, n_runs)
        if partial and self.partial_mark:
            self.used.add("partial")
            text += self.partial_mark
        return text


def _settings_text(settings: Mapping[str, Any]) -> str:
    def show(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)

    return ", ".join(f"{k}={show(v)}" for k, v in sorted(settings.items())) or "(none)"


def _partial_text(task: Mapping[str, Any], limit: int = 10) -> str:
    """ "partial: 3 cases missing, 1 failed (run1: 4, 7; run2: 9)"."""
    parts = []
    n_missing = sum(len(v) for v in task["missing"].values())
    n_failed = sum(len(v) for v in task["failed"].values())
    counts = [f"{n_missing} case{'s' if n_missing != 1 else ''} missing"]
    if n_failed:
        counts.append(f"{n_failed} failed")
    for run_id in task["n"]:
        cases = task["missing"].get(run_id, []) + task["failed"].get(run_id, [])
        if cases:
            shown = ", ".join(cases[:limit]) + (", …" if len(cases) > limit else "")
            parts.append(f"{run_id}: {shown}")
    return f"partial: {', '.join(counts)} ({'; '.join(parts)})"


def _task_remarks(task: Mapping[str, Any], group: Mapping[str, Any]) -> list[str]:
    """What a reader must know before trusting a task's numbers: fewer runs, unscored cases."""
    remarks = []
    if _task_runs(task) < group["n_runs"]:
        remarks.append(f"run in {_task_runs(task)} of the group's {group['n_runs']} runs only ({', '.join(task['n'])})")
    if task["partial"]:
        remarks.append(_partial_text(task))
    return remarks


def _group_label(group: Mapping[str, Any], groups: list[Mapping[str, Any]]) -> str:
    """The model name, with the group key when the model has several groups."""
    same = sum(g["model"] == group["model"] for g in groups)
    return group["model"] if same == 1 else f"{group['model']} [{group['group_key'][:8]}]"


def _columns(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(task, metric) columns for every task any group has, in benchmark order."""
    tasks = [t for t in TASKS if any(t in g["tasks"] for g in report["groups"])]
    return [(t, m) for t in tasks for m in TASKS[t].metrics]


def _classes(group: Mapping[str, Any]) -> list[str]:
    return sorted({cls for task in group["tasks"].values() for cls in task["by_class"]})


def _task_runs(task: Mapping[str, Any]) -> int:
    return len(task["n"])


def _usage_rows(usage: Mapping[str, Any]) -> list[list[str]]:
    def cost(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    rows = [["role", "requests", "prompt tokens", "completion tokens", "est. cost (USD)"]]
    for role, u in [*usage["roles"].items(), ("total", usage["total"])]:
        rows.append(
            [role, f"{u['requests']:,}", f"{u['prompt_tokens']:,}", f"{u['completion_tokens']:,}", cost(u["cost_usd"])]
        )
    return rows


def _cost_note(usage: Mapping[str, Any]) -> str:
    if usage["batch_discount"] is None:
        return "No prices given: costs not estimated."
    return (
        f"Estimated cost = list price per 1M tokens × (1 − batch discount "
        f"{usage['batch_discount']:g}); n/a where a role has no price."
    )


# --- Renderers -------------------------------------------------------------------------------


def _render_json(report: dict) -> str:
    return json.dumps(report, ensure_ascii=False, indent=2) + "\n"


def _render_csv(report: dict) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "model",
            "user_model",
            "judge_model",
            "group_key",
            "task",
            "scope",
            "class",
            "metric",
            "mean",
            "sd",
            "n_defined",
            "n_runs",
            "partial",
            "per_run",
        ]
    )

    def show(value: float | None) -> str:
        return "undefined" if value is None else repr(value)

    for group in report["groups"]:
        head = [group["model"], group["user_model"], group["judge_model"], group["group_key"]]
        for task_name, task in group["tasks"].items():
            scopes = [("overall", "", task["overall"])]
            scopes += [("class", cls, ms) for cls, ms in task["by_class"].items()]
            for scope, cls, summaries in scopes:
                for metric, s in summaries.items():
                    per_run = ";".join(f"{r}={show(v)}" for r, v in s["per_run"].items())
                    writer.writerow(
                        [
                            *head,
                            task_name,
                            scope,
                            cls,
                            metric,
                            show(s["mean"]),
                            show(s["sd"]),
                            s["n_defined"],
                            _task_runs(task),
                            str(task["partial"]).lower(),
                            per_run,
                        ]
                    )
    return out.getvalue()


def _render_table(report: dict) -> str:
    style = _Style(undefined="—", pm=" ± ", not_run="n/a", fewer=lambda k, n: f" [{k}/{n}]")
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
            f"settings: {_settings_text(group['settings'])}",
        ]
        for task_name, task in group["tasks"].items():
            names = TASKS[task_name].metrics
            n_runs = _task_runs(task)
            sizes = set(task["n"].values())
            size = (
                f"{sizes.pop():,} {TASKS[task_name].unit} per run"
                if len(sizes) == 1
                else f"{TASKS[task_name].unit} per run: " + ", ".join(f"{r}={v:,}" for r, v in task["n"].items())
            )
            lines += ["", f"{TASKS[task_name].title} ({size})"]
            if task["partial"]:
                style.used.add("partial")
            lines += [f"  ** {remark}" for remark in _task_remarks(task, group)]
            rows = [["", *(METRIC_TITLES[m] for m in names)]]
            rows.append(["overall", *(style.cell(task["overall"][m], n_runs) for m in names)])
            for cls, summaries in task["by_class"].items():
                rows.append([cls, *(style.cell(summaries[m], n_runs) for m in names)])
            lines += _grid(rows, "l" + "r" * len(names), indent="  ")
            if n_runs > 1:
                per_run = [["run", "n", *(METRIC_TITLES[m] for m in names)]]
                for run_id, size_n in task["n"].items():
                    values = [task["overall"][m]["per_run"][run_id] for m in names]
                    per_run.append(
                        [run_id, f"{size_n:,}", *(style.undefined if v is None else _num(v) for v in values)]
                    )
                    if any(v is None for v in values):
                        style.used.add("undefined")
                lines += ["  per run (overall):"]
                lines += _grid(per_run, "lr" + "r" * len(names), indent="    ")
        if group["usage"]["roles"]:
            lines += ["", "Usage"]
            lines += _grid(_usage_rows(group["usage"]), "lrrrr", indent="  ")
            lines.append(f"  {_cost_note(group['usage'])}")
    notes = []
    if "undefined" in style.used:
        notes.append(f"— undefined: {UNDEFINED_NOTE}")
    if "fewer" in style.used:
        notes.append(FEWER_RUNS_NOTE)
    if "partial" in style.used:
        notes.append(f"** {PARTIAL_NOTE}")
    if notes:
        lines += ["", "Notes:", *(f"  {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(rows: list[list[str]], align: str) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    rule = ["---" if a == "l" else "---:" for a in align]
    return [line(rows[0]), line(rule), *(line(r) for r in rows[1:])]


def _md_notes(style: _Style) -> list[str]:
    notes = []
    if "undefined" in style.used:
        notes.append(f"undefined: {UNDEFINED_NOTE}.")
    if "fewer" in style.used:
        notes.append(FEWER_RUNS_NOTE + ".")
    if "partial" in style.used:
        notes.append(f"† {PARTIAL_NOTE}.")
    if "not_run" in style.used:
        notes.append("n/a: no records (task not run, or class not represented in it).")
    return notes


def _render_markdown(report: dict) -> str:
    groups = report["groups"]
    style = _Style(undefined="undefined", pm=" ± ", not_run="n/a", fewer=lambda k, n: f" [{k}/{n}]", partial_mark=" †")
    lines = ["# LexPilot results", "", NUMBERS_NOTE, ""]
    if not groups:
        return "\n".join([*lines, "No runs to report."]) + "\n"
    columns = _columns(report)

    def cells(group: Mapping[str, Any], cls: str | None) -> list[str]:
        out = []
        for task_name, metric in columns:
            task = group["tasks"].get(task_name)
            summaries = None if task is None else (task["overall"] if cls is None else task["by_class"].get(cls))
            summary = None if summaries is None else summaries[metric]
            partial = task is not None and task["partial"]
            out.append(style.cell(summary, _task_runs(task) if task else 0, partial))
        return out

    header = [f"{TASKS[t].title} {METRIC_TITLES[m]}" for t, m in columns]
    rows = [["Model", *header]]
    rows += [[_md_escape(_group_label(g, groups)), *cells(g, None)] for g in groups]
    lines += ["## Overall", "", *_md_table(rows, "l" + "r" * len(columns)), ""]

    rows = [["Model", "Class", *header]]
    for g in groups:
        for cls in _classes(g):
            rows.append([_md_escape(_group_label(g, groups)), _md_escape(cls), *cells(g, cls)])
    if len(rows) > 1:
        lines += ["## By cause class", "", *_md_table(rows, "ll" + "r" * len(columns)), ""]

    lines += ["## Runs", ""]
    for g in groups:
        lines.append(
            f"- **{_md_escape(_group_label(g, groups))}** (user model "
            f"{_md_escape(g['user_model'])}, judge {_md_escape(g['judge_model'])}): "
            f"{g['n_runs']} run{'s' if g['n_runs'] != 1 else ''} "
            f"({', '.join(g['runs'])}); "
            f"settings: {_md_escape(_settings_text(g['settings']))}"
        )
        for task_name, task in g["tasks"].items():
            for remark in _task_remarks(task, g):
                lines.append(f"  - {TASKS[task_name].title}: {remark}")
    for g in groups:
        if g["usage"]["roles"]:
            lines += ["", f"## Usage: {_md_escape(_group_label(g, groups))}", ""]
            lines += _md_table(_usage_rows(g["usage"]), "lrrrr")
            lines += ["", _cost_note(g["usage"])]
    notes = _md_notes(style)
    if notes:
        lines += ["", "Notes:", "", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "|": r"\textbar{}",
    "[": "{[}",
    "]": "{]}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}
_LATEX_METRICS = {
    "macro_f1": "Macro-F1",
    "f1_u": r"F1$_U$",
    "f1_c": r"F1$_C$",
    "acc_c": r"Acc$_C$",
    "acc_u": r"Acc$_U$",
    "success_rate": "Success",
    "qwk": "QWK",
    "accuracy": "Acc",
}


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped."""
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in text)


def _latex_table(
    columns: list[tuple[str, str]], lead: list[str], body: list[str], caption: str, notes: list[str]
) -> list[str]:
    tasks: list[tuple[str, int]] = []
    for task, _ in columns:
        if tasks and tasks[-1][0] == task:
            tasks[-1] = (task, tasks[-1][1] + 1)
        else:
            tasks.append((task, 1))
    spec = "l" * len(lead) + "".join("c" * width for _, width in tasks)
    top, rules, col = [""] * len(lead), [], len(lead) + 1
    for task, width in tasks:
        top.append(rf"\multicolumn{{{width}}}{{c}}{{{TASKS[task].title}}}")
        rules.append(rf"\cmidrule(lr){{{col}-{col + width - 1}}}")
        col += width
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(top) + r" \\",
        " ".join(rules),
        " & ".join([*lead, *(_LATEX_METRICS[m] for _, m in columns)]) + r" \\",
        r"\midrule",
        *body,
        r"\bottomrule",
        r"\end{tabular}",
    ]
    if notes:
        lines.append(r"\par\smallskip\footnotesize " + r" \quad ".join(notes))
    lines += [rf"\caption{{{caption}}}", r"\end{table}"]
    return lines


def _render_latex(report: dict) -> str:
    groups = report["groups"]
    lines = [
        "% LexPilot results, generated by lexpilot-batch.",
        "% Needs \\usepackage{booktabs}; Chinese class names need xeCJK or ctex (XeLaTeX).",
        "% " + NUMBERS_NOTE.replace("±", "+/-"),
    ]
    for g in groups:
        lines.append(
            f"% {_group_label(g, groups)}: runs {', '.join(g['runs'])}; user model "
            f"{g['user_model']}; judge {g['judge_model']}; "
            f"settings: {_settings_text(g['settings'])}"
        )
        for task_name, task in g["tasks"].items():
            for remark in _task_remarks(task, g):
                lines.append(f"%   {TASKS[task_name].title}: {remark}")
    if not groups:
        return "\n".join([*lines, "% No runs to report."]) + "\n"
    columns = _columns(report)

    def table(by_class: bool) -> list[str]:
        style = _Style(
            undefined="--", pm=r" $\pm$ ", not_run="n/a", fewer=lambda k, n: rf"\,[{k}/{n}]", partial_mark=r"$^\dagger$"
        )
        body: list[str] = []
        for gi, g in enumerate(groups):
            scopes: list[str | None] = _classes(g) if by_class else [None]
            if by_class and gi and scopes:
                body.append(r"\midrule")
            for si, cls in enumerate(scopes):
                label = latex_escape(_group_label(g, groups)) if si == 0 else ""
                row = [label] + ([latex_escape(cls)] if by_class else [])
                for task_name, metric in columns:
                    task = g["tasks"].get(task_name)
                    summaries = (
                        None if task is None else (task["overall"] if cls is None else task["by_class"].get(cls))
                    )
                    row.append(
                        style.cell(
                            None if summaries is None else summaries[metric],
                            _task_runs(task) if task else 0,
                            task is not None and task["partial"],
                        )
                    )
                body.append(" & ".join(row) + r" \\")
        notes = []
        if "undefined" in style.used:
            notes.append(f"--: undefined, {latex_escape(UNDEFINED_NOTE)}.")
        if "fewer" in style.used:
            notes.append(latex_escape(FEWER_RUNS_NOTE) + ".")
        if "partial" in style.used:
            notes.append(r"$^\dagger$ partial: some cases are not scored.")
        if "not_run" in style.used:
            notes.append("n/a: no records (task not run, or class not represented).")
        caption = ("LexPilot results by cause class" if by_class else "LexPilot results") + (
            r" (mean $\pm$ sample SD over runs)"
        )
        lead = ["Model", "Class"] if by_class else ["Model"]
        return _latex_table(columns, lead, body, caption, notes)

    lines += ["", *table(by_class=False)]
    if any(_classes(g) for g in groups):
        lines += ["", *table(by_class=True)]
    return "\n".join(lines) + "\n"


_RENDERERS: dict[str, Callable[[dict], str]] = {
    "table": _render_table,
    "json": _render_json,
    "csv": _render_csv,
    "markdown": _render_markdown,
    "latex": _render_latex,
}


def render(report: dict, fmt: str) -> str:
    """`report` (as `build_report` returns it, or read back from its JSON) in format `fmt`."""
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        raise LexpilotError(f"Unknown report format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    try:
        Report.model_validate(report)
    except ValidationError as exc:
        raise LexpilotError(f"The report does not have the documented shape: {exc}") from exc
    return renderer(report)
