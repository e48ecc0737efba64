"""The HTML report: one self-contained page, opened in headless Chromium, whose rendered DOM shows
the tables, the figures and one case's turns.

The browser test needs Chromium (Debian package `chromium`; `.ci/run` installs it) or a Chrome
named by LEXPILOT_CHROMIUM, and is skipped, saying so, only when none can be found.
"""

from __future__ import annotations

import re
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lexpilot_batch.benchmark import prompts
from lexpilot_batch.cli import app
from lexpilot_batch.data import load_dataset
from tests.helpers.browser import chromium, dump_dom
from tests.helpers.engine import STUDY_MODELS, records


@pytest.fixture(scope="module")
def page(study, tmp_path_factory) -> Path:
    result = CliRunner().invoke(app, ["report", "--format", "html", "--bootstrap", "200", "--root", str(study.root)])
    assert result.exit_code == 0, result.output
    path = tmp_path_factory.mktemp("html") / "report.html"
    path.write_text(result.stdout, encoding="utf-8")
    return path


class Dom(HTMLParser):
    """Ids, tags with their attributes, and the text inside each `li.turn` and the case article."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.tags: list[tuple[str, dict]] = []
        self.turns: list[dict] = []
        self.stack: list[str] = []
        self.rows: dict[str, int] = {}
        self.table: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "table":
            self.table = attrs.get("id")
        if tag == "tr" and self.table:
            self.rows[self.table] = self.rows.get(self.table, 0) + 1
        if tag == "li" and "turn" in attrs.get("class", "").split():
            self.turns.append({"class": attrs["class"], "text": ""})
            self.stack.append("turn")
        elif self.stack and tag not in ("br",):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag == "table":
            self.table = None
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack:
            self.turns[-1]["text"] += data


def test_the_page_is_self_contained(page):
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>")
    assert "<style>" in html and "<script>" in html and "<svg" in html
    # Nothing is fetched: no external script, stylesheet, image, font or frame.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "@import" not in html and "url(" not in html
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) <= {"http://www.w3.org/2000/svg"}
    # Texts in the embedded data cannot close its script element.
    data = html.split('id="lp-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data


def forced_case(study):
    """An Interaction LJP record of the provider-qualified model (a slash in its name: its link
    encodes it), run r2, that asked three times and was forced to predict."""
    cases = load_dataset(None).cases
    for (run_id, model, task, case_idx, _), record in sorted(records(study).items()):
        key = (run_id, model, task, record.get("stop_reason"))
        if key == ("r2", STUDY_MODELS[1], "ljp_interaction", "forced_final_prediction"):
            return str(cases[case_idx].case_number), record
    pytest.fail(f"the sample has no forced final prediction for {STUDY_MODELS[1]} r2")


def test_chromium_shows_the_tables_the_figures_and_one_case(study, page, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip(
            "no Chromium found: install the Debian package chromium (apt-get install -y chromium) "
            "or set LEXPILOT_CHROMIUM to a Chrome binary"
        )
    number, record = forced_case(study)
    assert "/" in STUDY_MODELS[1]
    link = "/".join(urllib.parse.quote(part, safe="") for part in (STUDY_MODELS[1], "r2", "ljp_interaction", number))
    url = page.as_uri() + "#case=" + link
    dumped = dump_dom(browser, url, tmp_path / "profile")
    dom = Dom()
    dom.feed(dumped)

    # The tables: the main one with a row per model, one per task, comparisons, interaction statistics.
    for table in ("t-main", "t-lca", "t-dcg", "t-ljp_direct", "t-ljp_gold", "t-ljp_interaction", "t-comparisons"):
        assert table in dom.ids, table
    assert dom.rows["t-main"] == 1 + len(STUDY_MODELS)
    assert "t-interaction" in dom.ids and "t-dcg_rounds" in dom.ids
    # The figures, as inline SVG.
    figures = {a.get("data-figure") for tag, a in dom.tags if tag == "svg"}
    assert figures >= {"metrics", "classes", "interaction", "dcg_rounds"}
    # The linked case, rendered by the script: its new turns in order, and its verdicts.
    article = next(a for tag, a in dom.tags if a.get("id") == "v-case")
    assert (article.get("data-case"), article.get("data-task")) == (number, "ljp_interaction")
    expected = []
    for r in record["rounds"]:
        expected.append(("response", r["response"], r["label"]))
        expected.append(("reply", r["reply"], None))
    expected.append(("forced", record["final_response"], None))
    assert len(dom.turns) == len(expected) == 7
    for turn, (kind, text, label) in zip(dom.turns, expected, strict=True):
        assert kind in turn["class"].split()
        assert text in turn["text"]
        if label:
            assert f"classifier: {label}" in turn["text"]
    shown = dumped.split('id="v-case"', 1)[1]
    for claim in record["claims"]:
        assert claim["claim"] in shown


def _between(html: str, start: str, end: str) -> str:
    return html.split(start, 1)[1].split(end, 1)[0]


def test_chromium_shows_what_the_dcg_judge_saw_and_finds_a_case_by_its_number(study, page, tmp_path):
    """Issue 29 item 5: a DCG case shows its focal points and key details beside the judge's 是/否,
    its forced question labelled as what it is, and the viewer's search finds a case by number."""
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium found: install the Debian package chromium or set LEXPILOT_CHROMIUM")
    cases = load_dataset(None).cases
    dcg = sorted(
        (idx, record)
        for (run_id, model, task, idx, _), record in records(study).items()
        if (run_id, model, task) == ("r1", STUDY_MODELS[0], "dcg")
    )
    idx, record = dcg[-1]  # not the first in the list: the page must go to it
    case = cases[idx]
    assert len(case.focal_points) >= 1
    link = "/".join(urllib.parse.quote(part, safe="") for part in (STUDY_MODELS[0], "r1", "dcg", str(case.case_number)))
    html = dump_dom(browser, page.as_uri() + "#case=" + link, tmp_path / "p1")
    shown = _between(html, 'id="v-case"', "</article>")
    facts = _between(shown, 'id="v-facts"', "</aside>")
    assert "What the DCG judge saw" in facts
    for point in case.focal_points:
        assert point in facts
    first_detail = next(line for line in prompts.render_key_details(case.key_details).splitlines() if line.strip())
    assert first_detail.strip() in facts
    # The forced question is labelled as one, with the judge's decision beside it; never "LexAwN response".
    dom = Dom()
    dom.feed(html)
    questions = [t for t in dom.turns if t["text"].startswith("Forced clarification question (DCG)")]
    assert len(questions) == 2
    for turn, r in zip(questions, record["rounds"], strict=True):
        assert f"DCG judge: targets a focal point? {r['decision']}" in turn["text"]
        assert r["question"] in turn["text"]
    assert "LexAwN response" not in shown

    # The search: its number typed into the box (a #search= link fills it) finds the case.
    wanted = str(cases[len(cases) // 2].case_number)
    html = dump_dom(browser, page.as_uri() + "#search=" + urllib.parse.quote(wanted), tmp_path / "p2")
    listed = re.findall(r'<li[^>]*data-item="\d+"[^>]*>case ([^ <]+)', _between(html, 'id="v-cases"', "</ul>"))
    assert listed and listed[0] == wanted, listed
    assert all(wanted in number for number in listed)
    assert f'data-case="{wanted}"' in _between(html, 'id="v-case"', ">")
