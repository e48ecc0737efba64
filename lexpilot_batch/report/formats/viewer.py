"""The HTML report's per-case viewer: its data (every finished record as the turns it added, and
the facts its judges saw) and the page's script that shows it.

For each (group, run, task, case[, variant]) one item: the history the task started from, the new
turns in order, each labelled by what it is (a LexAwN response with the classifier's label, a
forced DCG clarification question with the DCG judge's 是/否, a User Model reply, a direct
prediction, the forced final prediction), and what it came to (`tasks.Task.outcome`: label or
success, each claim's predicted verdict against gold, stop reason). Each case carries its focal
points and key details: what the DCG judge and the User Model were shown, so that a researcher can
audit the judge's 是/否 beside them. (The evaluated model never sees them: that is the prompts'
isolation, `benchmark/prompts.py`; this page is the report, for the researcher.)

A full study repeats the same texts many times (every case's histories in every run, task and
model; Interaction LJP's first response is LCA's), so every text is stored once in `strings` and
every history once in `histories`, and items refer to them by index:

    {"strings": [text, ...],
     "histories": [[string index of each message, user first, alternating], ...],
     "tasks": [[task, title], ...], "groups": [{"label", "model", "runs": [run id, ...]}, ...],
     "cases": [[case number, class, [focal point's string index, ...], key details' string index
                or -1], ...],
     "items": [[group, run, task, case, variant, history, turns, outcome, judges], ...]}

`turns` is [[who, string index, tag, judge step], ...] with who "a" (a LexAwN response, tag the
classifier's label), "q" (a forced DCG clarification question, tag the DCG judge's decision), "u"
(a User Model reply), "p" (a direct prediction: Direct or Gold LJP) or "f" (the forced final
prediction), tag "" where no judge labels it, and judge step the key of the judge step that
tagged it (or ""). `outcome` is `Task.outcome` with an LJP record's claims as `verdicts`: [[claim
text's string index, gold, predicted], ...]. `judges` is every judge call of the record
(`judge_calls`), each attempt as [judge, step, attempt, status, decision, rejected, raw,
reasoning] (the last three string indexes, -1 for none): the page shows a turn's calls under it,
collapsed, each attempt's whole output and why a rejected one was rejected, and the verdict
extractor's under the verdicts.

The page (`VIEWER_HTML`, `VIEWER_SCRIPT`, `VIEWER_CSS`, embedded by `html`): pick a model, run and
task, filter by class, stop reason and result, search by case number or any text of the case, and
read one case; the address bar keeps the link of the case on screen (`#case=...`; with `&words`
after it, its judges' words open), and `#search=<text>` opens the viewer on a search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lexpilot_batch.benchmark.protocols import dcg, interaction, lca
from lexpilot_batch.benchmark.protocols.interaction import FORCED_FINAL
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.document import RunResults
from lexpilot_batch.report.formats.layout import group_label
from lexpilot_batch.report.judge_calls import JudgeCall, JudgeCalls, calls_of


@dataclass(frozen=True)
class CaseFacts:
    """What the DCG judge and the User Model are shown of a case besides the conversation."""

    focal_points: tuple[str, ...]
    key_details: str  # as the prompts render it (`prompts.render_key_details`)


class _Table:
    """Values stored once, referred to by index."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.values: list[Any] = []

    def __call__(self, value: Any) -> int:
        i = self.index.get(value)
        if i is None:
            i = self.index[value] = len(self.values)
            self.values.append(value)
        return i


def _turns(task: str, record: Mapping[str, Any], text: _Table) -> list[list]:
    """Each new turn as [who, string index, tag, the step key of the judge that tagged it or ""]."""
    if task == "lca":
        return [["a", text(record["response"]), record["label"], lca.cls_key(record["history_type"][:1])]]
    if task == "dcg":
        turns = []
        for r, judge in zip(record["rounds"], (dcg.Q1_JUDGE, dcg.Q2_JUDGE), strict=False):
            turns.append(["q", text(r["question"]), r["decision"], judge])
            if "reply" in r:
                turns.append(["u", text(r["reply"]), "", ""])
        return turns
    if task == "ljp_interaction":
        turns = []
        for k, r in enumerate(record["rounds"], start=1):
            turns.append(["a", text(r["response"]), r["label"], interaction.label_key(k)])
            if "reply" in r:
                turns.append(["u", text(r["reply"]), "", ""])
        if record["stop_reason"] == FORCED_FINAL:
            turns.append(["f", text(record["final_response"]), "", ""])
        return turns
    return [["p", text(record["response"]), "", ""]]


def _said(decision: Any) -> str:
    """A judge's validated answer as one line: a label, 是/否, or the verdicts in claim order."""
    if isinstance(decision, list):
        return "、".join(map(str, decision))
    return "" if decision is None else str(decision)


def _judge_calls(calls: list[JudgeCall], text: _Table) -> list[list]:
    """[judge, step, attempt, status, decision, rejected, raw, reasoning] per call, texts as string
    indexes (-1: none)."""

    def index(value: str | None) -> int:
        return -1 if value is None else text(value)

    return [
        [c.judge, c.step, c.attempt, c.status, _said(c.decision), index(c.rejected), index(c.raw), index(c.reasoning)]
        for c in calls
    ]


def _case_key(case: str, cls: str, facts: CaseFacts | None, text: _Table) -> tuple:
    if facts is None:
        return (case, cls, (), -1)
    return (case, cls, tuple(text(p) for p in facts.focal_points), text(facts.key_details))


def _outcome(task: str, record: Mapping[str, Any], text: _Table) -> dict[str, Any]:
    outcome = TASKS[task].outcome(record)
    if "gold" in outcome:  # each claim as [text, gold, predicted]
        outcome["verdicts"] = [[text(c["claim"]), c["gold"], c["predicted"]] for c in record["claims"]]
        del outcome["gold"], outcome["predicted"]
    return outcome


def viewer_data(
    runs: Sequence[RunResults],
    report: Mapping[str, Any],
    facts: Mapping[tuple[str, str], Mapping[str, CaseFacts]] | None = None,
    judges: JudgeCalls | None = None,
) -> dict[str, Any]:
    """The viewer's data for `runs` (whole records: `results.load_run_results(texts=True)`), with
    groups as `report` (built from the same runs) orders them; `facts` gives, per (run id, model),
    each case's focal points and key details (`produce._case_facts`), `judges` its judge calls
    (`judge_calls.load_judge_calls`)."""
    groups = report["groups"]
    group_of = {
        (g["group_key"], run_id): (gi, ri) for gi, g in enumerate(groups) for ri, run_id in enumerate(g["runs"])
    }
    task_index = {t: i for i, t in enumerate(TASKS)}
    text, histories, cases = _Table(), _Table(), _Table()
    items = []
    for run in runs:
        gi, ri = group_of[(run.group_key, run.run_id)]
        run_facts = (facts or {}).get((run.run_id, run.model), {})
        run_calls = (judges or {}).get((run.run_id, run.model), {})
        for task, task_records in run.tasks.items():
            variants = task_records.records
            for (cls, record), case in zip(variants, task_records.cases, strict=True):
                try:
                    history = histories(tuple(text(m["content"]) for m in record["history"]))
                    variant = record.get("history_type", "")[:1]
                    items.append(
                        [
                            gi,
                            ri,
                            task_index[task],
                            cases(_case_key(case, cls, run_facts.get(case), text)),
                            variant,
                            history,
                            _turns(task, record, text),
                            _outcome(task, record, text),
                            _judge_calls(calls_of(run_calls, task, case, variant), text),
                        ]
                    )
                except (KeyError, TypeError, ValueError) as exc:
                    raise LexpilotError(
                        f"Cannot show case {case} of task {task}, run {run.run_id} (model {run.model}) in the viewer: "
                        f"{exc!r}; the record is not in the shape the protocol writes."
                    ) from exc
    items.sort(key=lambda item: (item[0], item[1], item[2], item[3], item[4]))
    return {
        "strings": text.values,
        "histories": [list(h) for h in histories.values],
        "tasks": [[t, TASKS[t].title] for t in TASKS],
        "groups": [{"label": group_label(g, groups), "model": g["model"], "runs": g["runs"]} for g in groups],
        "cases": [[number, cls, list(focal), key] for number, cls, focal, key in cases.values],
        "items": items,
    }


VIEWER_HTML = """
<div id="viewer-app">
<div class="controls">
<label>Model<select id="v-model"></select></label>
<label>Run<select id="v-run"></select></label>
<label>Task<select id="v-task"></select></label>
<label>Class<select id="v-class"></select></label>
<label>Stop reason<select id="v-stop"></select></label>
<label>Result<select id="v-correct"><option value="">all</option><option value="1">right</option>
<option value="0">wrong</option></select></label>
<label>Search (case number or text)<input id="v-search" type="search" placeholder="e.g. 17 or 工资"></label>
</div>
<div class="viewer-body"><div><p id="v-count"></p><ul id="v-cases"></ul></div><article id="v-case" class="case"></article></div>
</div>
"""

VIEWER_CSS = """
.controls input { font-size: 14px; padding: 3px 6px; min-width: 220px; }
.case-body { display: grid; grid-template-columns: 1fr minmax(220px, 34%); gap: 16px; align-items: start; }
aside.facts { border: 1px solid #e8c37d; background: #fffaf0; border-radius: 8px; padding: 8px 12px;
              position: sticky; top: 96px; font-size: 13px; }
aside.facts h4 { margin: 2px 0 6px; }
aside.facts ol { margin: 4px 0 8px; padding-left: 20px; }
.tag.yes { background: #e5f4ea; border-color: #7cc29a; } .tag.no { background: #fbe9e7; border-color: #e39b93; }
details.judge-words { margin: 4px 0 2px; font-size: 13px; }
details.judge-words > summary { cursor: pointer; color: #555; }
.attempt { border-left: 3px solid #7cc29a; margin: 6px 0; padding: 2px 8px; }
.attempt.rejected { border-left-color: #e39b93; }
.attempt pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0; font-size: 12px;
               background: #f6f6f6; padding: 4px 6px; }
@media (max-width: 800px) { .case-body { grid-template-columns: 1fr; } aside.facts { position: static; } }
"""

# Texts are set with `textContent`, never parsed as HTML.
VIEWER_SCRIPT = r"""
(function () {
  "use strict";
  var node = document.getElementById("lp-data");
  var root = document.getElementById("viewer-app");
  if (!node || !root) return;
  var D = JSON.parse(node.textContent);
  var S = D.strings;
  var STOPS = {judgment_round_1: "judgment at round 1", judgment_round_2: "judgment at round 2",
               judgment_round_3: "judgment at round 3", forced_final_prediction: "forced final prediction"};
  var VARIANTS = {c: "complete history", u: "underspecified history"};
  // What each kind of new turn is, by task where it differs; and who labels it.
  var TURNS = {a: "LexAwN response", q: "Forced clarification question (DCG)", u: "User Model reply",
               p: "Verdict prediction", f: "Forced final prediction"};
  var PREDICTION = {ljp_direct: "Direct prediction (underspecified history)",
                    ljp_gold: "Gold prediction (complete history)"};
  var TAGS = {a: "classifier: ", q: "DCG judge: targets a focal point? "};
  function $(id) { return document.getElementById(id); }
  function make(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function option(select, value, label) {
    var o = make("option", "", label); o.value = String(value); select.appendChild(o);
  }
  var byKey = {};
  D.items.forEach(function (it, i) {
    var k = it[0] + "/" + it[1] + "/" + it[2];
    (byKey[k] = byKey[k] || []).push(i);
  });
  var sel = {model: $("v-model"), run: $("v-run"), task: $("v-task"), cls: $("v-class"),
             stop: $("v-stop"), correct: $("v-correct"), search: $("v-search")};

  D.groups.forEach(function (g, i) { option(sel.model, i, g.label); });
  function fillRuns() {
    sel.run.innerHTML = "";
    D.groups[+sel.model.value].runs.forEach(function (r, i) { option(sel.run, i, r); });
  }
  function fillTasks() {
    var keep = sel.task.value; sel.task.innerHTML = "";
    D.tasks.forEach(function (t, i) {
      if (byKey[sel.model.value + "/" + sel.run.value + "/" + i]) option(sel.task, i, t[1]);
    });
    if (keep && sel.task.querySelector('option[value="' + keep + '"]')) sel.task.value = keep;
  }
  function pool() { return byKey[sel.model.value + "/" + sel.run.value + "/" + sel.task.value] || []; }
  function fillFilters() {
    var classes = {}, stops = {}, keepC = sel.cls.value, keepS = sel.stop.value;
    pool().forEach(function (i) {
      var it = D.items[i]; classes[D.cases[it[3]][1]] = 1;
      if (it[7].stop_reason) stops[it[7].stop_reason] = 1;
    });
    sel.cls.innerHTML = ""; option(sel.cls, "", "all");
    Object.keys(classes).sort().forEach(function (c) { option(sel.cls, c, c); });
    sel.stop.innerHTML = ""; option(sel.stop, "", "all");
    Object.keys(STOPS).forEach(function (s) { if (stops[s]) option(sel.stop, s, STOPS[s]); });
    sel.stop.disabled = Object.keys(stops).length === 0;
    if (classes[keepC]) sel.cls.value = keepC;
    if (stops[keepS]) sel.stop.value = keepS;
  }
  var haystack = {};  // item -> its texts, lower-cased, built when first searched
  function textOf(i) {
    if (haystack[i] === undefined) {
      var it = D.items[i], parts = [];
      D.histories[it[5]].forEach(function (s) { parts.push(S[s]); });
      it[6].forEach(function (t) { parts.push(S[t[1]]); });
      (it[7].verdicts || []).forEach(function (c) { parts.push(S[c[0]]); });
      haystack[i] = parts.join("\n").toLowerCase();
    }
    return haystack[i];
  }
  function searched(i) {
    var q = sel.search.value.trim().toLowerCase();
    if (!q) return true;
    var number = String(D.cases[D.items[i][3]][0]).toLowerCase();
    var bare = q.replace(/^(case|#)\s*/, "");
    return number === bare || number.indexOf(bare) >= 0 || textOf(i).indexOf(q) >= 0;
  }
  function matches(i) {
    var it = D.items[i], o = it[7];
    if (sel.cls.value && D.cases[it[3]][1] !== sel.cls.value) return false;
    if (sel.stop.value && o.stop_reason !== sel.stop.value) return false;
    if (sel.correct.value && String(+o.correct) !== sel.correct.value) return false;
    return searched(i);
  }
  function label(i) {
    var it = D.items[i];
    return "case " + D.cases[it[3]][0] + (it[4] ? " (" + it[4] + ")" : "") + " · " + D.cases[it[3]][1];
  }
  function list(preferred) {
    var ul = $("v-cases"), all = pool(), shown = all.filter(matches);
    // An exact case number first: searching "17" shows case 17 before 117 and 170.
    var q = sel.search.value.trim().toLowerCase().replace(/^(case|#)\s*/, "");
    if (q) shown.sort(function (x, y) {
      return (String(D.cases[D.items[y][3]][0]).toLowerCase() === q) - (String(D.cases[D.items[x][3]][0]).toLowerCase() === q);
    });
    ul.innerHTML = "";
    shown.forEach(function (i) {
      var li = make("li", "", label(i) + " ");
      var ok = D.items[i][7].correct;
      li.appendChild(make("span", ok ? "mark-ok" : "mark-bad", ok ? "✓" : "✗"));
      li.dataset.item = String(i);
      li.addEventListener("click", function () { show(i); });
      ul.appendChild(li);
    });
    $("v-count").textContent = shown.length + " of " + all.length + " cases";
    if (preferred !== undefined && shown.indexOf(preferred) >= 0) show(preferred);
    else if (shown.length) show(shown[0]);
    else { $("v-case").innerHTML = ""; $("v-case").appendChild(make("p", "note", "No case matches.")); }
  }
  function turnList(cls) { return make("ol", "turns " + cls); }
  function outcomeText(task, o) {
    if (task === "lca") return "label: " + o.label;
    if (task === "dcg") return "DCG judge's decisions: " + o.decisions.join(", ") + " — " + (o.success ? "success" : "no success");
    var t = o.claims_correct + " of " + o.claims + " claims right";
    if (o.stop_reason) t += " — " + STOPS[o.stop_reason] + " (" + o.responses + " new response" + (o.responses > 1 ? "s" : "") + ")";
    return t;
  }
  function link(it) {
    var parts = [D.groups[it[0]].label, D.groups[it[0]].runs[it[1]], D.tasks[it[2]][0], D.cases[it[3]][0]];
    if (it[4]) parts.push(it[4]);
    return "#case=" + parts.map(encodeURIComponent).join("/");
  }
  function facts(task, c) {
    // What the DCG judge (and the User Model) saw; shown for the tasks whose prompts used it.
    if ((task !== "dcg" && task !== "ljp_interaction") || (!c[2].length && c[3] < 0)) return null;
    var box = make("aside", "facts");
    box.id = "v-facts";
    box.appendChild(make("h4", "", task === "dcg" ? "What the DCG judge saw" : "What the User Model saw"));
    box.appendChild(make("div", "who", "Focal points"));
    var ol = make("ol", "focal");
    c[2].forEach(function (s) { ol.appendChild(make("li", "", S[s])); });
    box.appendChild(ol);
    if (c[3] >= 0) {
      box.appendChild(make("div", "who", "Key details (hidden from the evaluated model)"));
      box.appendChild(make("div", "text key-details", S[c[3]]));
    }
    return box;
  }
  var openWords = false;
  function words(calls) {
    // A judge step's attempts, collapsed: each one's whole output, and why a rejected one was not used.
    var rejected = calls.filter(function (c) { return c[3] !== "answered"; }).length;
    var box = make("details", "judge-words");
    box.open = openWords;
    box.appendChild(make("summary", "", "Judge's own words: " + calls.length + " attempt" +
      (calls.length > 1 ? "s" : "") + (rejected ? " (" + rejected + " rejected)" : "")));
    calls.forEach(function (c) {
      var ok = c[3] === "answered", div = make("div", "attempt " + (ok ? "answered" : "rejected"));
      div.dataset.status = c[3];
      div.appendChild(make("div", "who", c[0] + " · attempt " + c[2] + " · " +
        (ok ? "used: " + c[4] : c[3] === "discarded" ? "not needed" : "rejected: " + (c[5] >= 0 ? S[c[5]] : c[3]))));
      if (c[7] >= 0) {
        var r = make("details", "reasoning");
        r.appendChild(make("summary", "", "Reasoning"));
        r.appendChild(make("pre", "", S[c[7]])); div.appendChild(r);
      }
      div.appendChild(c[6] >= 0 ? make("pre", "raw", S[c[6]]) : make("p", "note", "(no output kept)"));
      box.appendChild(div);
    });
    return box;
  }
  function show(i) {
    var it = D.items[i], o = it[7], task = D.tasks[it[2]][0], box = $("v-case"), c = D.cases[it[3]];
    if (/^#(case=|viewer)/.test(location.hash)) {  // on the viewer's tab: the address shows this case
      try { history.replaceState(null, "", link(it)); } catch (e) { /* no history API */ }
    }
    box.innerHTML = "";
    box.dataset.item = String(i);
    box.dataset.task = task;
    box.dataset.case = c[0];
    Array.prototype.forEach.call($("v-cases").children, function (li) {
      li.classList.toggle("current", li.dataset.item === String(i));
    });
    box.appendChild(make("h3", "", "Case " + c[0] + " · " + c[1] + " · " +
      D.tasks[it[2]][1] + (it[4] ? " · " + VARIANTS[it[4]] : "") + " · " + D.groups[it[0]].label +
      " · " + D.groups[it[0]].runs[it[1]]));
    box.appendChild(make("p", "outcome " + (o.correct ? "ok" : "bad"),
      (o.correct ? "✓ right" : "✗ wrong") + " — " + outcomeText(task, o)));
    var main = make("div", ""), body = make("div", "case-body"), aside = facts(task, c);
    body.appendChild(main);
    if (aside) body.appendChild(aside);
    box.appendChild(body);
    var history = D.histories[it[5]];
    var det = make("details", ""); det.open = history.length <= 4;
    det.appendChild(make("summary", "", "History from the dataset (" + history.length + " message" +
      (history.length > 1 ? "s)" : ")")));
    var ol = turnList("history");
    history.forEach(function (s, k) {
      var user = k % 2 === 0, li = make("li", user ? "user" : "assistant");
      li.appendChild(make("div", "who", user ? "User" : "Assistant"));
      li.appendChild(make("div", "text", S[s])); ol.appendChild(li);
    });
    det.appendChild(ol); main.appendChild(det);
    main.appendChild(make("h4", "", "New turns"));
    var turns = turnList("new"), count = {}, placed = {};
    it[6].forEach(function (t) {
      var kind = {a: "response", q: "response", u: "reply", p: "response", f: "forced"}[t[0]];
      var name = t[0] === "p" ? (PREDICTION[task] || TURNS.p) : TURNS[t[0]];
      count[t[0]] = (count[t[0]] || 0) + 1;
      var numbered = t[0] === "a" || t[0] === "q" || t[0] === "u";
      var li = make("li", "turn " + kind);
      li.dataset.kind = t[0];
      var head = make("div", "who", name + (numbered ? " " + count[t[0]] : ""));
      if (t[2]) {
        var yes = t[2] === "是" ? " yes" : t[2] === "否" ? " no" : "";
        head.appendChild(make("span", "tag" + yes, (TAGS[t[0]] || "judge: ") + t[2]));
      }
      li.appendChild(head); li.appendChild(make("div", "text", S[t[1]]));
      var mine = it[8].filter(function (c) { return t[3] && c[1] === t[3]; });
      if (mine.length) { li.appendChild(words(mine)); placed[t[3]] = 1; }
      turns.appendChild(li);
    });
    main.appendChild(turns);
    if (o.verdicts) {
      var table = make("table", "claims"), head = make("tr", "");
      ["#", "Claim", "Gold", "Predicted", ""].forEach(function (h) { head.appendChild(make("th", "l", h)); });
      table.appendChild(head);
      o.verdicts.forEach(function (v, k) {
        var tr = make("tr", ""), ok = v[1] === v[2];
        [String(k + 1), S[v[0]], v[1], v[2]].forEach(function (x) { tr.appendChild(make("td", "", x)); });
        tr.appendChild(make("td", ok ? "mark-ok" : "mark-bad", ok ? "✓" : "✗"));
        table.appendChild(tr);
      });
      main.appendChild(make("h4", "", "Verdicts per claim")); main.appendChild(table);
    }
    var rest = it[8].filter(function (c) { return !placed[c[1]]; });  // the verdict extractor's
    if (rest.length) main.appendChild(words(rest));
  }
  function refresh(level, preferred) {
    if (level <= 0) fillRuns();
    if (level <= 1) fillTasks();
    if (level <= 2) fillFilters();
    list(preferred);
  }
  sel.model.addEventListener("change", function () { refresh(0); });
  sel.run.addEventListener("change", function () { refresh(1); });
  sel.task.addEventListener("change", function () { refresh(2); });
  [sel.cls, sel.stop, sel.correct].forEach(function (s) { s.addEventListener("change", function () { refresh(3); }); });
  sel.search.addEventListener("input", function () { refresh(3); });
  function fromHash() {
    var q = /^#search=(.*)$/.exec(location.hash);
    if (q) {  // a link to a search: "#search=17" (in the first model, run and task)
      sel.search.value = decodeURIComponent(q[1]);
      refresh(0);
      return true;
    }
    var m = /^#case=(.*?)(&words)?$/.exec(location.hash);
    if (!m) return false;
    openWords = !!m[2];  // "#case=...&words": the case with its judges' words open
    var p = m[1].split("/").map(decodeURIComponent);
    var g = D.groups.findIndex(function (x) { return x.label === p[0]; });
    if (g < 0) return false;
    var r = D.groups[g].runs.indexOf(p[1]);
    var t = D.tasks.findIndex(function (x) { return x[0] === p[2]; });
    var found = D.items.findIndex(function (it) {
      return it[0] === g && it[1] === r && it[2] === t && String(D.cases[it[3]][0]) === p[3] && (!p[4] || it[4] === p[4]);
    });
    if (found < 0) return false;
    sel.model.value = String(g); fillRuns(); sel.run.value = String(r); fillTasks(); sel.task.value = String(t);
    sel.cls.value = ""; sel.correct.value = ""; sel.search.value = ""; fillFilters(); sel.stop.value = "";
    list(found);
    return true;
  }
  window.addEventListener("hashchange", fromHash);
  if (!D.items.length) { $("v-case").appendChild(make("p", "note", "No finished records.")); return; }
  if (!fromHash()) refresh(0);
  // When the first case was on screen, in ms from the start of navigation (the bench reads it).
  root.dataset.readyMs = String(Math.round(performance.now()));
})();
"""
