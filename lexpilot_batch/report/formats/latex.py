"""The report as LaTeX (booktabs) for a two-column paper: a compact main table (one headline metric
per task, models as rows) that fits a column, then (page-wide) the other metrics, the headline
metrics per cause class, model comparisons and interaction statistics; the runs, settings and
remarks as comments. Values x100 with one decimal, mean+-SD. `latex_escape` for any text put
in a table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lexpilot_batch.benchmark.protocols.interaction import STOP_REASONS
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.data import SAMPLE_NOTE
from lexpilot_batch.report.formats.cells import (
    FEWER_RUNS_NOTE,
    NO_RECORDS_NOTE,
    NUMBERS_NOTE,
    UNDEFINED_NOTE,
    Style,
    reason_notes,
)
from lexpilot_batch.report.formats.layout import group_label, group_remarks, sample_remark, settings_text
from lexpilot_batch.report.formats.tables import p_text, report_tasks
from lexpilot_batch.report.statistics.interaction import DCG_ROUNDS

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
_SHORT_TASKS = {
    "lca": "LCA",
    "dcg": "DCG",
    "ljp_direct": "Direct",
    "ljp_gold": "Gold",
    "ljp_interaction": "Interaction",
}
_STOP_SHORT = {"judgment_round_1": "R1", "judgment_round_2": "R2", "judgment_round_3": "R3"}


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped."""
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in text)


def percent(value: float) -> str:
    """A fraction as the LaTeX tables show it: ×100, one decimal."""
    return f"{100 * value:.1f}"


def _style() -> Style:
    return Style(
        undefined="--",
        pm=r"$\pm$",
        not_run="n/a",
        fewer=lambda k, n: rf"\,[{k}/{n}]",
        partial_mark=r"$^\dagger$",
        number=percent,
    )


def _table(
    star: bool, spec: str, head: list[str], body: list[str], caption: str, label: str, notes: list[str]
) -> list[str]:
    env = "table*" if star else "table"
    width = r"\textwidth" if star else r"\columnwidth"
    lines = [
        rf"\begin{{{env}}}[t]",
        r"\centering",
        r"\small",
        rf"\begin{{adjustbox}}{{max width={width}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        *head,
        r"\midrule",
        *body,
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{adjustbox}",
    ]
    if notes:
        lines.append(r"\par\smallskip\footnotesize " + r" \quad ".join(notes))
    return [*lines, rf"\caption{{{caption}}}", rf"\label{{{label}}}", rf"\end{{{env}}}"]


def _notes(
    style: Style, groups: Sequence[Mapping[str, Any]], shown: Sequence[Mapping[str, Any]] | None = None
) -> list[str]:
    """The notes under a table: the marks its cells used, and which of the groups it shows (`shown`,
    by default all of `groups`) ran on the bundled sample."""
    notes = []
    if "undefined" in style.used:
        notes.append(f"--: undefined, {latex_escape(UNDEFINED_NOTE)}.")
    if "fewer" in style.used:
        notes.append(latex_escape(FEWER_RUNS_NOTE) + ".")
    if "partial" in style.used:
        notes.append(r"$^\dagger$ partial: some cases are not scored.")
    if "not_run" in style.used:
        notes.append(f"n/a: {latex_escape(NO_RECORDS_NOTE)}.")
    notes += [f"{latex_escape(note)}." for note in reason_notes(style.used)]
    sample = [
        latex_escape(group_label(g, list(groups))) for g in (groups if shown is None else shown) if sample_remark(g)
    ]
    if sample:
        notes.append(f"{', '.join(sample)}: {latex_escape(SAMPLE_NOTE)}.")
    # What the number of cases allows travels with every table into a paper.
    for g in groups if shown is None else shown:
        notes += [f"{latex_escape(group_label(g, list(groups)))}: {latex_escape(w)}." for w in g["warnings"]]
    return notes


def _cell(style: Style, group: Mapping[str, Any], task_name: str, metric: str, cls: str | None = None) -> str:
    return style.row(group, [(task_name, metric)], cls)[0]


def _main(report: Mapping[str, Any]) -> list[str]:
    groups, tasks, style = report["groups"], report_tasks(report), _style()
    head = [
        " & ".join(["Model", "$n$", *(_SHORT_TASKS[t] for t in tasks)]) + r" \\",
        " & ".join(["", "", *(_LATEX_METRICS[TASKS[t].headline] for t in tasks)]) + r" \\",
    ]
    body = [
        " & ".join(
            [latex_escape(group_label(g, groups)), str(g["n_runs"])]
            + [_cell(style, g, t, TASKS[t].headline) for t in tasks]
        )
        + r" \\"
        for g in groups
    ]
    caption = r"LexPilot results ($\times$100): mean$\pm$sample SD over the $n$ runs of each model."
    return _table(False, "lr" + "c" * len(tasks), head, body, caption, "tab:lexpilot-main", _notes(style, groups))


def _details(report: Mapping[str, Any]) -> list[str]:
    """Every metric the main table leaves out (LCA's F1 and accuracies, LJP accuracy)."""
    groups, style = report["groups"], _style()
    columns = [(t, m) for t in report_tasks(report) for m in TASKS[t].metrics if m != TASKS[t].headline]
    if not columns:
        return []
    spans: list[tuple[str, int]] = []
    for task, _ in columns:
        if spans and spans[-1][0] == task:
            spans[-1] = (task, spans[-1][1] + 1)
        else:
            spans.append((task, 1))
    top, rules, col = [""], [], 2
    for task, width in spans:
        top.append(rf"\multicolumn{{{width}}}{{c}}{{{TASKS[task].title}}}")
        rules.append(rf"\cmidrule(lr){{{col}-{col + width - 1}}}")
        col += width
    head = [
        " & ".join(top) + r" \\",
        " ".join(rules),
        " & ".join(["Model", *(_LATEX_METRICS[m] for _, m in columns)]) + r" \\",
    ]
    body = [" & ".join([latex_escape(group_label(g, groups)), *style.row(g, columns)]) + r" \\" for g in groups]
    caption = r"LexPilot: the other metrics ($\times$100), mean$\pm$sample SD over runs."
    return _table(True, "l" + "c" * len(columns), head, body, caption, "tab:lexpilot-metrics", _notes(style, groups))


def _by_class(report: Mapping[str, Any]) -> list[str]:
    groups, tasks, style = report["groups"], report_tasks(report), _style()
    classes = sorted({cls for g in groups for cls in g["cases"]["by_class"]})
    if not classes:
        return []
    head = [
        " & ".join(["Class", "Model", "Cases", *(_SHORT_TASKS[t] for t in tasks)]) + r" \\",
        " & ".join(["", "", "", *(_LATEX_METRICS[TASKS[t].headline] for t in tasks)]) + r" \\",
    ]
    body: list[str] = []
    for ci, cls in enumerate(classes):
        if ci:
            body.append(r"\midrule")
        for gi, g in enumerate(groups):
            cases = g["cases"]["by_class"].get(cls)
            row = [
                latex_escape(cls) if gi == 0 else "",
                latex_escape(group_label(g, groups)),
                "0" if cases is None else f"{cases:,}".replace(",", "{,}"),
                *(_cell(style, g, t, TASKS[t].headline, cls) for t in tasks),
            ]
            body.append(" & ".join(row) + r" \\")
    caption = r"LexPilot results by cause class ($\times$100): mean$\pm$sample SD over runs; the cases of each class."
    return _table(True, "llr" + "c" * len(tasks), head, body, caption, "tab:lexpilot-classes", _notes(style, groups))


def _comparisons(report: Mapping[str, Any]) -> list[str]:
    if not report["comparisons"]:
        return []
    holm = report["bootstrap"]["adjust"] == "holm"
    head = [
        r"Comparison ($A-B$) & Metric & $\Delta$ & 95\% CI & $p$"
        + (r" & $p_\mathrm{Holm}$" if holm else "")
        + r" & MDD \\"
    ]
    body: list[str] = []
    style = _style()
    for i, c in enumerate(report["comparisons"]):
        if i:
            body.append(r"\midrule")
        name = latex_escape(f"{c['a']['model']} − {c['b']['model']}").replace("−", "$-$")
        first = True
        for task_name, task in c["tasks"].items():
            metric = TASKS[task_name].headline
            d = task[metric]
            delta = "--" if d["difference"] is None else f"{100 * d['difference']:+.1f}"
            ci = style.ci(d, lambda v: f"{100 * v:+.1f}")
            metric_name = f"{_SHORT_TASKS[task_name]} {_LATEX_METRICS[metric]}"
            cells = [
                name if first else "",
                metric_name,
                delta,
                latex_escape(ci),
                latex_escape(p_text(d["p_value"], d["p_floor"])),
            ]
            if holm:
                floor = d["p_floor"] and d["p_adjusted"] == d["p_value"]
                cells.append(latex_escape(p_text(d["p_adjusted"], floor)))
            cells.append("" if d["mdd"] is None else f"{100 * d['mdd']:.1f}")
            body.append(" & ".join(cells) + r" \\")
            first = False
    caption = (
        r"Model comparisons ($\times$100): difference of the means over runs, paired by case; 95\% interval, "
        r"two-sided $p$ of a paired permutation test (sign-flip of per-case differences; for Macro-F1, F1 and "
        r"QWK, the swap of the models' records of a case)"
        + (
            r", $p_\mathrm{Holm}$ adjusted over the report's comparisons (headline metrics one family)"
            if holm
            else ", not corrected for multiple comparisons"
        )
        + r"; MDD: the difference that test detects with 80\% power."
    )
    compared = {side["group_key"] for c in report["comparisons"] for side in (c["a"], c["b"])}
    shown = [g for g in report["groups"] if g["group_key"] in compared]
    notes = _notes(style, report["groups"], shown)
    return _table(False, "llrcr" + ("r" if holm else "") + "r", head, body, caption, "tab:lexpilot-comparisons", notes)


def _interaction(report: Mapping[str, Any]) -> list[str]:
    groups, style = report["groups"], _style()
    rows = []
    has_int = any("ljp_interaction" in g["interaction"] for g in groups)
    has_dcg = any("dcg" in g["interaction"] for g in groups)
    if not (has_int or has_dcg):
        return []
    head_top, head = ["Model"], [""]
    if has_int:
        head_top.append(r"\multicolumn{5}{c}{Interaction LJP: judgment at}")
        head += [*(_STOP_SHORT.get(r, "Forced") for r in STOP_REASONS), "Resp."]
    if has_dcg:
        head_top.append(r"\multicolumn{2}{c}{DCG success by}")
        head += [f"R{k}" for k in DCG_ROUNDS]
    for g in groups:
        row = [latex_escape(group_label(g, groups))]
        stats = g["interaction"].get("ljp_interaction")
        if has_int:
            if stats is None:
                row += [style.cell(None, 0)] * 5
            else:
                row += [style.stat(stats["stop_reasons"][r], stats["n"]) for r in STOP_REASONS]
                resp = stats["responses"]
                row.append(
                    style.stat(resp, stats["n"])  # n/a or --: no cases, or undefined
                    if resp["mean"] is None or not any(stats["n"].values())
                    else f"{resp['mean']:.2f}" + ("" if resp["sd"] is None else rf"$\pm${resp['sd']:.2f}")
                )
        dcg = g["interaction"].get("dcg")
        if has_dcg:
            row += (
                [style.cell(None, 0)] * 2
                if dcg is None
                else [style.stat(dcg["success_by_round"][k], dcg["n"]) for k in DCG_ROUNDS]
            )
        rows.append(" & ".join(row) + r" \\")
    head_lines = [" & ".join(head_top) + r" \\", " & ".join(head) + r" \\"]
    caption = (
        r"Interaction statistics (shares $\times$100): how Interaction LJP consultations ended (a judgment at round 1--3, "
        r"or a forced final prediction), new responses per case, and DCG success by round."
    )
    width = (5 if has_int else 0) + (2 if has_dcg else 0)
    return _table(
        False, "l" + "c" * width, head_lines, rows, caption, "tab:lexpilot-interaction", _notes(style, groups)
    )


def render_latex(report: dict) -> str:
    groups = report["groups"]
    lines = [
        "% LexPilot results, generated by lexpilot-batch.",
        "% Needs \\usepackage{booktabs,adjustbox}; Chinese class names need xeCJK or ctex (XeLaTeX).",
        "% " + NUMBERS_NOTE.replace("±", "+/-").replace("fractions (not percentages) with 4 decimals", "x100"),
    ]
    for g in groups:
        lines.append(
            f"% {group_label(g, groups)}: runs {', '.join(g['runs'])}; user model "
            f"{g['user_model']}; judge {g['judge_model']}; "
            f"settings: {settings_text(g['settings'])}"
        )
        lines += [f"%   {remark}" for remark in group_remarks(g)]
        lines += [f"%   !! {warning}" for warning in g["warnings"]]
    if not groups:
        return "\n".join([*lines, "% No runs to report."]) + "\n"
    for table in (_main, _details, _by_class, _comparisons, _interaction):
        body = table(report)
        if body:
            lines += ["", *body]
    return "\n".join(lines) + "\n"
