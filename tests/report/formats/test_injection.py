"""Output injection outside HTML (issue 23, item 6): a study whose model names, run ids, class names
and case numbers are script and formula payloads, reported as Markdown (rendered by a CommonMark
renderer, and opened in headless Chromium where one is installed) and as CSV (`report --format
csv`, `export --layout cases`). The rule itself is `spreadsheet`'s, tested first."""

from __future__ import annotations

import csv
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from lexpilot_batch.benchmark.settings import Settings
from lexpilot_batch.engine import loop as engine
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.study import runs
from lexpilot_batch.study.runs import RunSpec
from lexpilot_batch.util.spreadsheet import FORMULA_START, csv_text, safe_cell
from tests.helpers.browser import chromium, dump_dom
from tests.helpers.engine import finish, open_session

DATA = Path(__file__).resolve().parents[3] / "data"
CASE = "=cmd|' /C calc'!A0"
# markdown-it drops javascript: links itself, other renderers do not: the link here is one it keeps.
MODELS = ("<script>alert(1)</script>", "=1+1 [x](https://evil.example/)", "@SUM(A1) <img src=x onerror=alert(1)>")
RUNS = ("<img src=x onerror=alert(2)>", "+run")
CLASSES = {"合同、准合同纠纷": "<svg onload=alert(3)>", "劳动争议、人事争议": '-HYPERLINK("http://x","y")'}
SAFE_TAGS = {"h1", "h2", "p", "em", "strong", "blockquote", "ul", "li", "table", "thead", "tbody", "tr", "th", "td"}


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (CASE, "'" + CASE),
        ("+run", "'+run"),
        ("-HYPERLINK(1)", "'-HYPERLINK(1)"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-0.25", "-0.25"),  # a plain number written as text is still a number to a spreadsheet
        ("+1.5e-3", "+1.5e-3"),
        ("-5", "-5"),
        ("-", "'-"),
        ("a=b", "a=b"),
        ("", ""),
        (-0.25, -0.25),  # numbers stay numbers
        (3, 3),
        (None, None),
    ],
)
def test_a_text_cell_that_would_start_a_formula_is_neutralised(value, written):
    assert safe_cell(value) == written


def test_csv_text_writes_numbers_as_numbers():
    text = csv_text(["model", "value"], [["=1+1", -0.25], ["m", 0.1 + 0.2]])
    assert text == "model,value\n'=1+1,-0.25\nm,0.30000000000000004\n"


@pytest.fixture(scope="module")
def hostile_study(tmp_path_factory) -> Path:
    """Two runs of each of three hostile models, every task, on two cases of the sample (the first
    numbered as a formula) under a mapping whose class names are payloads."""
    base = tmp_path_factory.mktemp("injection")
    sample = json.loads((DATA / "sample_cases.json").read_text(encoding="utf-8"))
    cases = [sample[0], sample[3]]  # a contract case and a labour one: both renamed classes are reported
    cases[0]["case_number"] = CASE
    dataset = base / "cases.json"
    dataset.write_text(json.dumps(cases, ensure_ascii=False), encoding="utf-8")
    mapping = json.loads((DATA / "categories.json").read_text(encoding="utf-8"))
    renamed = {CLASSES.get(k, k): v for k, v in mapping.items() if not k.startswith("$")}
    categories = base / "categories.json"
    categories.write_text(json.dumps(renamed, ensure_ascii=False), encoding="utf-8")
    # Names holding whitespace, which `prepare` now refuses as several values given as one
    # (`study.values.check_one_value`), are still in workspaces an earlier version registered: the
    # report must neutralise them all the same.
    with Workspace(base / "ws") as ws, pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs, "check_one_value", lambda value, option: None)
        session = open_session(ws)
        try:
            spec = RunSpec(RUNS, MODELS, "all", Settings(), dataset=dataset, categories=categories)
            engine.prepare(ws, session, spec)
            finish(ws, session)
        finally:
            session.close()
    return base / "ws"


class Tags(HTMLParser):
    """Every start tag, with its attributes, and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def rendered(markdown: str) -> str:
    """HTML as a CommonMark renderer makes it, tables on, raw HTML passed through (its default)."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def tags_of(html: str) -> Tags:
    parser = Tags()
    parser.feed(html)
    return parser


def test_the_detector_sees_raw_html():
    """The control: a payload the report did not escape would be found."""
    found = tags_of(rendered(f"| a |\n| --- |\n| {MODELS[2]} |\n\n{MODELS[1]} {MODELS[0]}"))
    assert {tag for tag, _ in found.tags} - SAFE_TAGS == {"img", "a", "script"}


def test_no_raw_tag_survives_in_the_markdown_report(hostile_study, in_process):
    code, out = in_process(["report", "--format", "markdown", "--bootstrap", "0", "--root", str(hostile_study)])
    assert code == 0, out.decode("utf-8", "replace")
    markdown = out.decode("utf-8")
    found = tags_of(rendered(markdown))
    assert {tag for tag, _ in found.tags} <= SAFE_TAGS, sorted({tag for tag, _ in found.tags} - SAFE_TAGS)
    # No on* handler, href or src anywhere: the only attribute is a table column's alignment.
    attributes = {(name, value) for _, attrs in found.tags for name, value in attrs.items()}
    assert attributes <= {("style", "text-align:right")}, attributes
    # ... and every payload is there, as the text a reader sees.
    text = "".join(found.text)
    for shown in (*MODELS, *RUNS, *CLASSES.values()):
        assert shown in text, shown
    assert "<table>" in rendered(markdown) and markdown.count("\n| ") > 10  # tables were rendered as tables


def test_chromium_fires_no_dialog_on_the_markdown_report(hostile_study, in_process, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium found: install the Debian package chromium or set LEXPILOT_CHROMIUM")
    _, out = in_process(["report", "--format", "markdown", "--bootstrap", "0", "--root", str(hostile_study)])
    # A page whose alert() leaves a mark in the DOM; the control page holds one raw payload.
    head = "<script>window.alert = (n) => document.documentElement.setAttribute('data-alerts', String(n));</script>"
    dialogs = {}
    for name, body in (("report", rendered(out.decode("utf-8"))), ("control", f"<p>{MODELS[2]}</p>")):
        page = tmp_path / f"{name}.html"
        page.write_text(
            f"<!doctype html><html><head><meta charset='utf-8'>{head}</head><body>{body}</body></html>", "utf-8"
        )
        dumped = dump_dom(browser, page.as_uri(), tmp_path / "profile", budget_ms=3000)
        dialogs[name] = '<html data-alerts="' in dumped  # the attribute, not the script's text
    assert dialogs == {"report": False, "control": True}


def cells(text: str) -> list[list[str]]:
    return [row for row in csv.reader(io.StringIO(text)) if row]  # the echo's closing line feed aside


def assert_no_formula_cell(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            if cell.startswith(FORMULA_START):
                float(cell)  # only a plain number may start so


def test_the_csv_report_neutralises_formula_cells_and_keeps_numbers(hostile_study, in_process):
    code, out = in_process(["report", "--format", "csv", "--bootstrap", "0", "--root", str(hostile_study)])
    assert code == 0, out.decode("utf-8", "replace")
    rows = cells(out.decode("utf-8"))
    header, body = rows[0], rows[1:]
    assert_no_formula_cell(rows)
    column = {name: [r[header.index(name)] for r in body] for name in ("model", "run", "class", "value")}
    assert {"'" + MODELS[1], "'" + MODELS[2], MODELS[0]} <= set(column["model"])
    assert {"'+run", RUNS[0]} <= set(column["run"])
    assert "'" + CLASSES["劳动争议、人事争议"] in column["class"]
    values = [float(v) for v in column["value"] if v]  # numbers stay numbers
    assert values and not any(v.startswith("'") for v in column["value"])


def test_the_case_export_neutralises_formula_cells(hostile_study, in_process, tmp_path):
    out_dir = tmp_path / "cases"
    code, out = in_process(["export", "--layout", "cases", "--out", str(out_dir), "--root", str(hostile_study)])
    assert code == 0, out.decode("utf-8", "replace")
    rows = cells((out_dir / "cases.csv").read_text(encoding="utf-8-sig"))
    assert_no_formula_cell(rows)
    header = rows[0]
    number = header.index("case_number")
    assert "'" + CASE in {r[number] for r in rows[1:]}
    assert {"'+run"} <= {r[header.index("run_id")] for r in rows[1:]}
    # The JSONL is data for programs, not a spreadsheet: it keeps every value as it was.
    lines = [json.loads(line) for line in (out_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    assert CASE in {line["case_number"] for line in lines} and "+run" in {line["run_id"] for line in lines}
