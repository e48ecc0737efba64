"""The judges' own words (issue 48, point 6): every attempt of every judge step kept as the judge
returned it, malformed ones with why they were rejected, reasoning where the API returns it apart;
shown beside the decision in the HTML viewer (checked in headless Chromium), in `export --layout
cases` and beside the seed layout.

The words are checked against the saved result files (`responses/`), the provider's bytes as they
came, not against what ingest made of them."""

from __future__ import annotations

import html
import json
import urllib.parse
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lexpilot_batch.cli import app
from lexpilot_batch.engine.answers import own_words
from lexpilot_batch.state.compaction import read_saved, saved_files
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.browser import chromium, dump_dom
from tests.helpers.engine import finish, open_session, prepare_runs

MODEL = "sim-a"
# Judges answer malformed JSON often enough that many steps take a second or third attempt.
FAULTS = "malformed_judge=0.35,latency=0"


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("judges") / "ws"
    with Workspace(root) as ws:
        session = open_session(ws, FAULTS)
        try:
            prepare_runs(ws, session, stage="all", runs=("r1",), model=MODEL, limit=4)
            finish(ws, session)
        finally:
            session.close()
    return root


def saved_words(root: Path) -> dict[str, tuple[str | None, str | None]]:
    """custom_id -> (content, reasoning) of every line of every saved result file."""
    out = {}
    with Workspace(root, writable=False) as ws:
        for path in saved_files(ws.responses_dir):
            for line in read_saved(path).decode("utf-8").splitlines():
                parsed = json.loads(line)
                out[parsed["custom_id"]] = (
                    ((parsed["response"]["body"]["choices"] or [{}])[0].get("message") or {}).get("content"),
                    ((parsed["response"]["body"]["choices"] or [{}])[0].get("message") or {}).get("reasoning_content"),
                )
    return out


def judge_rows(root: Path) -> list[dict]:
    with Workspace(root, writable=False) as ws:
        return [
            dict(r)
            for r in ws.store.conn.execute(
                "SELECT q.custom_id, q.step, q.attempt, q.status, q.error, w.raw, w.reasoning FROM requests q"
                " LEFT JOIN judge_words w ON w.request_pk = q.pk WHERE q.role = 'judge'"
            )
        ]


def test_every_judge_attempt_keeps_its_words_as_the_provider_returned_them(study):
    rows = judge_rows(study)
    saved = saved_words(study)
    rejected = [r for r in rows if r["status"] == "failed"]
    assert rejected and any(r["error"].startswith("malformed:") for r in rejected), "the faults made no malformed judge"
    assert any(r["reasoning"] for r in rows), "no judge returned reasoning apart"
    for row in rows:
        content, reasoning = saved[row["custom_id"]]
        assert row["raw"] == (content or None), row
        assert row["reasoning"] == (reasoning or None), row


def test_own_words_reads_the_message_and_nothing_from_a_failed_line():
    # OpenAI's batch output line (https://platform.openai.com/docs/guides/batch, "output file"),
    # DeepSeek's reasoning_content beside the content (https://api-docs.deepseek.com/guides/reasoning_model).
    line = {
        "custom_id": "x",
        "response": {
            "status_code": 200,
            "body": {"choices": [{"message": {"content": '{"label": "judg', "reasoning_content": "先看"}}]},
        },
        "error": None,
    }
    assert own_words(line) == ('{"label": "judg', "先看")
    assert own_words({"custom_id": "x", "response": None, "error": {"code": "server_error"}}) == (None, None)
    assert own_words({"custom_id": "x", "response": {"status_code": 500, "body": {"error": {}}}}) == (None, None)


def a_retried_case(root: Path) -> tuple[str, str, str, dict]:
    """(task, case number, step, the rejected attempt with the decision of the one used) of an LCA
    (complete history) or DCG judge step that was rejected as malformed, then answered."""
    with Workspace(root, writable=False) as ws:
        db = ws.store.conn
        for r in db.execute(
            "SELECT q.step, q.error, q.case_idx, c.case_number, w.raw FROM requests q"
            " JOIN runs ON runs.pk = q.run_pk JOIN cases c ON c.dataset = runs.dataset AND c.idx = q.case_idx"
            " JOIN judge_words w ON w.request_pk = q.pk"
            " WHERE q.role = 'judge' AND q.status = 'failed' AND q.error LIKE 'malformed:%'"
            " AND (q.step LIKE 'dcg.%' OR q.step = 'lca.c.cls') ORDER BY q.pk"
        ):
            used = db.execute(
                "SELECT value FROM requests WHERE role = 'judge' AND status = 'answered' AND case_idx = ? AND step = ?",
                (r["case_idx"], r["step"]),
            ).fetchone()
            if used is not None and r["raw"].strip():
                task = "dcg" if r["step"].startswith("dcg.") else "lca"
                return task, r["case_number"], r["step"], {**dict(r), "decision": json.loads(used[0])}
    pytest.fail("no LCA or DCG judge step was rejected and then answered")


def test_the_cases_export_and_the_seed_layout_carry_every_attempt(study, tmp_path):
    task, case, step, rejected = a_retried_case(study)
    result = CliRunner().invoke(
        app, ["export", "--layout", "cases", "--out", str(tmp_path / "c"), "--partial", "--root", str(study)]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "c" / "cases.jsonl").read_text(encoding="utf-8").splitlines()]
    row = next(r for r in rows if r["task"] == task and r["case_number"] == case and r.get("variant", "") in ("", "c"))
    calls = [c for c in row["judge_calls"] if c["step"] == step]
    assert [c["status"] for c in calls][-1] == "answered" and "failed" in [c["status"] for c in calls]
    failed = next(c for c in calls if c["status"] == "failed")
    assert failed["raw"] == rejected["raw"] and failed["rejected"] == rejected["error"]
    assert calls[-1]["decision"] == rejected["decision"]

    result = CliRunner().invoke(
        app, ["export", "--layout", "seed", "--out", str(tmp_path / "s"), "--partial", "--root", str(study)]
    )
    assert result.exit_code == 0, result.output
    (side,) = (tmp_path / "s" / "runs").rglob("judge_calls.jsonl")
    lines = [json.loads(line) for line in side.read_text(encoding="utf-8").splitlines()]
    assert {"case_number": case, "step": step, "status": "failed", "raw": rejected["raw"]}.items() <= next(
        c for c in lines if c["case_number"] == case and c["step"] == step and c["status"] == "failed"
    ).items()


def test_chromium_shows_a_malformed_judge_answer_and_its_retry_beside_the_decision(study, tmp_path):
    browser = chromium()
    if browser is None:
        pytest.skip("no Chromium found: install the Debian package chromium or set LEXPILOT_CHROMIUM")
    task, case, step, rejected = a_retried_case(study)
    result = CliRunner().invoke(
        app, ["report", "--format", "html", "--bootstrap", "50", "--partial", "--root", str(study)]
    )
    assert result.exit_code == 0, result.output
    page = tmp_path / "report.html"
    page.write_text(result.stdout, encoding="utf-8")
    parts = (MODEL, "r1", task, case, *(["c"] if task == "lca" else []))
    url = page.as_uri() + "#case=" + "/".join(urllib.parse.quote(p, safe="") for p in parts)
    dumped = dump_dom(browser, url, tmp_path / "p")
    shown = dumped.split('id="v-case"', 1)[1].split("</article>", 1)[0]
    assert f'data-case="{case}"' in dumped
    # The turn the judge tagged holds its words, collapsed: the rejected attempt (its whole output
    # and why it was rejected) and the attempt used, whose decision is the turn's tag.
    turns = [html.unescape(t) for t in shown.split('<li class="turn ')[1:]]
    turn = next((t for t in turns if "rejected: " + rejected["error"] in t), None)
    assert turn is not None, shown[:3000]
    head, words = turn.split("<details", 1)[0], turn.split('<details class="judge-words"', 1)[1]
    assert f" {rejected['decision']}</span>" in head  # the decision, beside the turn's text
    assert words.index("rejected: " + rejected["error"]) < words.index(f"used: {rejected['decision']}")
    assert rejected["raw"] in words
