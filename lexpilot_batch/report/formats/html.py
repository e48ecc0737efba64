"""The report as one self-contained HTML page: the tables (`tables`), the figures as inline SVG
(`figures`, `svg`), the groups and usage, and a per-case viewer (`viewer`) over every finished
record. Inline CSS and JavaScript, no network access, no dependency: it works from a file, offline.

The viewer's data is embedded as JSON in a `<script type="application/json">` block (every `<`
written as `\\u003c`, so no text can end the block) and rendered by a small script: pick a model,
run and task, filter the cases by class, stop reason and result, and read one case. Texts are
set with `textContent`, never parsed as HTML. A case can be linked: `report.html#case=<model
label>/<run id>/<task>/<case number>[/<c|u>]`, each part URL-encoded (a model `openai/gpt-4o` is
`openai%2Fgpt-4o`); the address bar shows the link of the case on screen.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any

from lexpilot_batch import __version__
from lexpilot_batch.report.formats import svg
from lexpilot_batch.report.formats.cells import (
    FEWER_RUNS_NOTE,
    NO_RECORDS_NOTE,
    NUMBERS_NOTE,
    PARTIAL_NOTE,
    UNDEFINED_NOTE,
    Style,
    interval_note,
    reason_notes,
)
from lexpilot_batch.report.formats.figures import figures
from lexpilot_batch.report.formats.layout import (
    cost_note,
    group_label,
    group_remarks,
    settings_text,
    usage_rows,
    warnings_above,
)
from lexpilot_batch.report.formats.tables import Table, tables
from lexpilot_batch.report.formats.viewer import VIEWER_CSS, VIEWER_HTML, VIEWER_SCRIPT

CSS = """
:root { --ink: #1d2330; --muted: #5b6577; --line: #d9dde5; --soft: #f5f7fa; --accent: #0072B2;
        --ok: #0a7d45; --bad: #b3261e; font-family: system-ui, -apple-system, "Segoe UI",
        "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", sans-serif; color: var(--ink); }
body { margin: 0; background: #fff; }
header { padding: 16px 28px 8px; border-bottom: 1px solid var(--line); position: sticky; top: 0;
         background: #fff; z-index: 2; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header nav a { margin-right: 16px; color: var(--accent); text-decoration: none; font-weight: 600;
               padding-bottom: 2px; }
header nav a.on { border-bottom: 3px solid var(--accent); }
@media print { section[hidden] { display: block; } header { position: static; } }
main { padding: 8px 28px 40px; max-width: 1400px; }
section { margin-top: 18px; }
h2 { font-size: 19px; border-bottom: 2px solid var(--ink); padding-bottom: 4px; }
h3 { font-size: 16px; margin: 22px 0 4px; }
.note, .meta { color: var(--muted); font-size: 13px; margin: 2px 0 8px; }
.warning { background: #fff4d6; border: 1px solid #e8c37d; border-radius: 6px; padding: 6px 10px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 4px; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: var(--soft); font-weight: 600; }
td.l, th.l { text-align: left; }
tr.block td { border-top: 2px solid #aab2c0; }
td .sub { display: block; color: var(--muted); font-size: 11px; }
figure { margin: 12px 0 20px; }
svg.figure { max-width: 100%; height: auto; }
.controls { display: flex; flex-wrap: wrap; gap: 10px 16px; align-items: end; padding: 10px;
            background: var(--soft); border: 1px solid var(--line); border-radius: 6px; }
.controls label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); gap: 3px; }
.controls select { font-size: 14px; padding: 3px 4px; min-width: 120px; }
.viewer-body { display: grid; grid-template-columns: minmax(200px, 260px) 1fr; gap: 16px; margin-top: 12px; }
#v-cases { list-style: none; margin: 0; padding: 0; max-height: 75vh; overflow-y: auto;
           border: 1px solid var(--line); border-radius: 6px; }
#v-cases li { padding: 5px 8px; border-bottom: 1px solid var(--line); cursor: pointer; font-size: 13px; }
#v-cases li:hover { background: var(--soft); }
#v-cases li.current { background: #dcebf7; font-weight: 600; }
.mark-ok { color: var(--ok); } .mark-bad { color: var(--bad); }
#v-count { font-size: 12px; color: var(--muted); margin: 4px 0; }
article.case h3 { margin-top: 0; }
.outcome { padding: 6px 10px; border-radius: 6px; margin: 6px 0 10px; font-size: 14px; }
.outcome.ok { background: #e5f4ea; } .outcome.bad { background: #fbe9e7; }
ol.turns { list-style: none; padding: 0; margin: 6px 0; }
ol.turns li { border: 1px solid var(--line); border-radius: 8px; padding: 8px 10px; margin: 8px 0; }
ol.turns li.user { background: #f7f7f2; } ol.turns li.assistant { background: #f4f8fc; }
ol.turns li.turn.response { background: #e8f1fb; border-color: #9cc3e6; }
ol.turns li.turn.reply { background: #fdf4e3; border-color: #e8c37d; }
ol.turns li.turn.forced { background: #f3e8f6; border-color: #c79ad6; }
.who { font-weight: 600; font-size: 12px; color: var(--muted); }
.tag { display: inline-block; margin-left: 8px; padding: 0 7px; border-radius: 10px; font-size: 12px;
       background: #fff; border: 1px solid var(--line); }
.text { white-space: pre-wrap; margin-top: 4px; line-height: 1.55; font-size: 14px; }
details summary { cursor: pointer; color: var(--muted); font-size: 13px; }
table.claims td { text-align: left; white-space: normal; }
@media (max-width: 800px) { .viewer-body { grid-template-columns: 1fr; } }
"""

# The sections as tabs: "#results", "#figures", "#viewer" (or a "#case=..." link) shows that one
# section, "#all" every one; without JavaScript, and in print, every section shows.
TABS = r"""
(function () {
  "use strict";
  var ids = ["results", "figures", "viewer"];
  function tab() {
    var h = location.hash.slice(1), which = /^(case|search)=/.test(h) ? "viewer" : h;
    if (which !== "all" && ids.indexOf(which) < 0) which = "results";
    ids.forEach(function (id) { document.getElementById(id).hidden = which !== "all" && id !== which; });
    Array.prototype.forEach.call(document.querySelectorAll("header nav a"), function (a) {
      a.classList.toggle("on", a.getAttribute("href") === "#" + which);
    });
    window.scrollTo(0, 0);
  }
  window.addEventListener("hashchange", tab);
  tab();
})();
"""


def _table_html(table: Table) -> str:
    head = "".join(
        f'<th class="{"l" if a == "l" else ""}">{escape(h)}</th>'
        for h, a in zip(table.header, table.align, strict=True)
    )
    rows = []
    starts = set(table.groups[1:])
    for i, row in enumerate(table.rows):
        cells = "".join(
            f'<td class="{"l" if a == "l" else ""}">{escape(c.text)}'
            + (f'<span class="sub">{escape(c.sub)}</span>' if c.sub else "")
            + "</td>"
            for c, a in zip(row, table.align, strict=True)
        )
        opening = '<tr class="block">' if i in starts else "<tr>"
        rows.append(f"{opening}{cells}</tr>")
    note = f'<p class="note">{escape(table.note)}</p>' if table.note else ""
    return (
        f'<h3>{escape(table.title)}</h3>{note}<div class="scroll"><table id="t-{escape(table.key)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _groups_html(report: Mapping[str, Any]) -> str:
    groups = report["groups"]
    parts = ["<h3>Groups</h3><ul>"]
    for g in groups:
        remarks = "".join(f"<li>{escape(remark)}</li>" for remark in group_remarks(g))
        parts.append(
            f"<li><b>{escape(group_label(g, groups))}</b> (user model {escape(g['user_model'])}, judge "
            f"{escape(g['judge_model'])}): {g['n_runs']} run{'s' if g['n_runs'] != 1 else ''} "
            f"({escape(', '.join(g['runs']))}); settings: {escape(settings_text(g['settings']))}"
            + (f"<ul>{remarks}</ul>" if remarks else "")
            + "</li>"
        )
    parts.append("</ul>")
    for g in groups:
        if g["usage"]["roles"]:
            rows = usage_rows(g["usage"])
            head = "".join(f"<th>{escape(h)}</th>" for h in rows[0])
            body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
            parts.append(
                f"<h3>Usage: {escape(group_label(g, groups))}</h3><table><thead><tr>{head}</tr></thead>"
                f'<tbody>{body}</tbody></table><p class="note">{escape(cost_note(g["usage"]))}</p>'
            )
    return "".join(parts)


def _notes(style: Style) -> list[str]:
    notes = []
    if "undefined" in style.used:
        notes.append(f"undefined: {UNDEFINED_NOTE}.")
    if "fewer" in style.used:
        notes.append(FEWER_RUNS_NOTE + ".")
    if "partial" in style.used:
        notes.append(f"† {PARTIAL_NOTE}.")
    if "not_run" in style.used:
        notes.append(f"n/a: {NO_RECORDS_NOTE}.")
    notes += [f"{note}." for note in reason_notes(style.used)]
    return notes


def _data_json(data: Mapping[str, Any]) -> str:
    # `<` escaped: no text in the data can close the script element or open a comment in it.
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def render_html(report: dict, viewer: Mapping[str, Any] | None = None) -> str:
    """The page; `viewer` is `viewer.viewer_data` of the same runs (without it, no per-case viewer)."""
    style = Style(undefined="undefined", pm=" ± ", not_run="n/a", fewer=lambda k, n: f" [{k}/{n}]", partial_mark=" †")
    groups = report["groups"]
    body = [f'<p class="note">{escape(NUMBERS_NOTE)} {escape(interval_note(report["bootstrap"]))}</p>']
    if not groups:
        body.append("<p>No runs to report.</p>")
    # Before the tables, so that nobody takes a demonstration, or a handful of cases, for a benchmark result.
    body += [
        f'<p class="warning"><b>{escape(group_label(g, groups))}</b>: {escape(text)}.</p>'
        for g in groups
        for text in warnings_above(g)
    ]
    body += [_table_html(t) for t in tables(report, style)]
    if groups:
        body.append(_groups_html(report))
    notes = _notes(style)
    if notes:
        body.append("<h3>Notes</h3><ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
    figs = [f"<figure>{s}</figure>" for figure in figures(report) for s in svg.render(figure)]
    if viewer is None:
        cases = '<p class="note">No per-case data in this report (it was rendered from a report JSON).</p>'
        data = ""
    else:
        cases = VIEWER_HTML
        data = f'<script type="application/json" id="lp-data">{_data_json(viewer)}</script>'
    models = ", ".join(group_label(g, groups) for g in groups) or "no runs"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>LexPilot results</title><style>{CSS}{VIEWER_CSS}</style></head><body>"
        f'<header><h1>LexPilot results</h1><p class="meta">{escape(models)} · generated by lexpilot-batch '
        f"{escape(__version__)}</p>"
        '<nav><a href="#results">Results</a><a href="#figures">Figures</a><a href="#viewer">Cases</a>'
        '<a href="#all">All</a></nav></header>'
        f'<main><section id="results"><h2>Results</h2>{"".join(body)}</section>'
        f'<section id="figures"><h2>Figures</h2>{"".join(figs) or "<p>No figures.</p>"}</section>'
        f'<section id="viewer"><h2>Per-case viewer</h2>{cases}</section></main>'
        f"{data}<script>{TABS}{VIEWER_SCRIPT if viewer is not None else ''}</script></body></html>\n"
    )
