"""What `ingest` takes in, through the manual backend's `lexpilot-batch ingest FILE` (issue 23, items
2 and 8): only answers to this workspace's own requests; conflicting answers reported as such, the
same file again a quiet no-op; answers too large or not UTF-8 unusable, never scored, never sent on.

Each workspace here sends every role through the manual backend: the test writes the results a
local model would (the simulated models' answers, `vllm_output`'s shape), and changes them where
the scenario says.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.benchmark import judges
from lexpilot_batch.engine.answers import MAX_ANSWER_CHARS
from lexpilot_batch.engine.ingest import ingest_external
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.engine.session import ProviderOptions, Session
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.ids import id_tag
from lexpilot_batch.simulated.batches import sample_key
from lexpilot_batch.simulated.completions import complete
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.status import detail
from lexpilot_batch.util import resources
from lexpilot_batch.util.jsonbounds import MAX_LINE_BYTES
from tests.helpers.engine import our_parts, prepare_runs

pytestmark = pytest.mark.usefixtures("no_fsync", "clean_env")

MANUAL: dict[str, str | None] = {"eval": "manual", "user": "manual", "judge": "manual"}
Content = Callable[[str, str], str]  # (custom_id, the simulated answer) -> the content written


@contextmanager
def manual(root: Path, dataset: Path | None = None, limit: int = 3) -> Iterator[tuple[Workspace, Session]]:
    """A workspace of the LCA stage over `limit` cases, every role on the manual backend."""
    with Workspace(root) as ws:
        session = Session(ws, ProviderOptions(backends=MANUAL))
        try:
            prepare_runs(ws, session, stage="lca", limit=limit, dataset=dataset)
            yield ws, session
        finally:
            session.close()


def unfinished(ws: Workspace) -> list[Path]:
    rows = ws.store.conn.execute("SELECT path FROM files WHERE status != 'ingested' ORDER BY pk").fetchall()
    return [ws.path(r["path"]) for r in rows]


def results(request_file: Path, out: Path, content: Content | None = None) -> Path:
    """The output file a local model would give for `request_file`; `content` may change any answer."""
    with open(out, "w", encoding="utf-8") as fh:
        for raw in request_file.read_text(encoding="utf-8").splitlines():
            req = json.loads(raw)
            cid = req["custom_id"]
            body = complete(req["body"], 0, key=cid, sample=sample_key(cid))
            message = body["choices"][0]["message"]
            message["content"] = content(cid, message["content"]) if content else message["content"]
            line = {"id": f"vllm-{cid}", "custom_id": cid, "response": {"status_code": 200, "body": body}}
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    return out


def anomalies(ws: Workspace) -> list[dict]:
    return [dict(r) for r in ws.store.conn.execute("SELECT kind, custom_id, detail FROM anomalies ORDER BY pk")]


def request_rows(ws: Workspace) -> list[tuple]:
    return [tuple(r) for r in ws.store.conn.execute("SELECT custom_id, status, text, error FROM requests ORDER BY pk")]


@pytest.fixture
def ws(tmp_path):
    with manual(tmp_path / "ws") as (ws, _session):
        yield ws


def test_a_gzip_compressed_file_is_refused_with_how_to_decompress_it(ws, tmp_path):
    import gzip

    out = results(unfinished(ws)[0], tmp_path / "out.jsonl")
    packed = tmp_path / "out.jsonl.gz"
    packed.write_bytes(gzip.compress(out.read_bytes()))
    with pytest.raises(LexpilotError, match=r"gzip-compressed .* python -m gzip -d "):
        ingest_external(ws, packed)
    assert not anomalies(ws)


def test_a_file_saved_with_a_byte_order_mark_is_ingested_whole(ws, tmp_path):
    """A result file saved again by a Windows editor: its first line is read as the others."""
    out = results(unfinished(ws)[0], tmp_path / "out.jsonl")
    out.write_bytes(b"\xef\xbb\xbf" + out.read_bytes())
    stats, done = ingest_external(ws, out)
    assert stats.answered == 6 and len(done) == 1 and not anomalies(ws)


def test_a_utf16_file_is_refused_saying_how_to_save_it_as_utf8(ws, tmp_path):
    """What Windows PowerShell 5.1's `>` writes."""
    out = results(unfinished(ws)[0], tmp_path / "out.jsonl")
    out.write_bytes(out.read_text(encoding="utf-8").encode("utf-16"))
    with pytest.raises(LexpilotError, match=r"UTF-16 text .* save it again as UTF-8"):
        ingest_external(ws, out)
    assert not anomalies(ws) and {r[1] for r in request_rows(ws)} != {"answered"}


def test_the_same_good_file_ingested_twice_is_a_quiet_no_op(ws, tmp_path):
    out = results(unfinished(ws)[0], tmp_path / "out.jsonl")
    stats, done = ingest_external(ws, out)
    assert stats.answered == 6 and len(done) == 1 and not anomalies(ws)
    before = request_rows(ws)
    for _ in range(2):
        again, done = ingest_external(ws, out)
        assert (again.answered, again.failed, again.duplicates, again.conflicts, done) == (0, 0, 6, 0, [])
        assert again.anomalies == [] and not anomalies(ws)
    assert request_rows(ws) == before
    assert detail.collect(ws)["anomalies"] == 0
    assert doctor.ANOMALIES not in {f.kind for f in doctor.diagnose(ws)}


def test_two_different_answers_for_one_id_are_a_conflict_and_the_first_is_kept(ws, tmp_path):
    request_file = unfinished(ws)[0]
    first = results(request_file, tmp_path / "first.jsonl")
    ingest_external(ws, first)
    kept = dict((r[0], r[2]) for r in request_rows(ws))
    target = sorted(kept)[0]
    other = results(request_file, tmp_path / "other.jsonl", lambda cid, text: "另一个回答。" if cid == target else text)
    stats, _ = ingest_external(ws, other)
    assert (stats.answered, stats.duplicates, stats.conflicts) == (0, 5, 1)
    ((found,),) = [[a] for a in anomalies(ws)]
    assert found["kind"] == "conflict" and found["custom_id"] == target
    assert "other.jsonl line" in found["detail"] and "另一个回答" in found["detail"] and "kept" in found["detail"]
    assert dict((r[0], r[2]) for r in request_rows(ws)) == kept  # the first answer stays
    # Within one file: the first line decides, the second (another answer) is the conflict.
    lines = first.read_bytes().splitlines(keepends=True)
    forged = json.loads(lines[0])
    forged["response"]["body"]["choices"][0]["message"]["content"] = "第三个回答。"
    both = tmp_path / "both.jsonl"
    both.write_bytes(lines[0] + (json.dumps(forged, ensure_ascii=False) + "\n").encode())
    stats, _ = ingest_external(ws, both)
    assert (stats.duplicates, stats.conflicts) == (1, 1)
    assert [a["kind"] for a in anomalies(ws)] == ["conflict", "conflict"]


def test_a_50_mb_answer_is_unusable_costs_no_memory_and_never_reaches_the_judge(ws, tmp_path):
    request_file = unfinished(ws)[0]
    huge = sorted(json.loads(x)["custom_id"] for x in request_file.read_text(encoding="utf-8").splitlines())[0]
    answer = "很长的回答。" * (50_000_000 // 18)
    out = results(request_file, tmp_path / "out.jsonl", lambda cid, text: answer if cid == huge else text)
    assert out.stat().st_size > 50_000_000
    tracemalloc.start()
    try:
        stats, done = ingest_external(ws, out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_LINE_BYTES + (8 << 20), f"ingest held {peak / 2**20:.0f} MiB for one 50 MB line"
    assert (stats.answered, stats.failed) == (5, 1) and len(done) == 1
    row = ws.store.conn.execute("SELECT status, text, error, error_kind FROM requests WHERE custom_id = ?", (huge,))
    status_, text, error, kind = row.fetchone()
    assert (status_, text, kind) == ("failed", None, "invalid")
    assert error.startswith("unusable result line: a line of ") and "over the 8 MiB" in error
    ((found,),) = [[a] for a in anomalies(ws)]
    assert found["kind"] == "too_large" and found["custom_id"] == huge and "out.jsonl line" in found["detail"]
    again, _ = ingest_external(ws, out)  # the same file again, its huge line included: nothing new
    assert (again.answered, again.failed, again.duplicates) == (0, 0, 6) and len(anomalies(ws)) == 1
    # The next wave sends the step again and judges the five others: nothing of the answer goes on.
    session = Session(ws, ProviderOptions(backends=MANUAL))
    poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
    session.close()
    wave2 = ws.store.conn.execute("SELECT path, n_requests, bytes FROM files WHERE wave = 2").fetchall()
    assert sum(r["n_requests"] for r in wave2) == 6 and all(r["bytes"] < 1 << 20 for r in wave2)
    again = ws.store.conn.execute(
        "SELECT attempt FROM requests WHERE wave = 2 AND step = (SELECT step FROM requests WHERE custom_id = ?)"
        " AND case_idx = (SELECT case_idx FROM requests WHERE custom_id = ?)",
        (huge, huge),
    ).fetchone()
    assert tuple(again) == (2,)


def test_an_answer_over_the_limit_is_retried_like_a_truncation_then_fails_with_the_reason(ws, tmp_path):
    too_long = "长" * (MAX_ANSWER_CHARS + 1)
    session = Session(ws, ProviderOptions(backends=MANUAL))
    # One case's complete-history answer is too long every time; every other answer is as the model gives it.
    victim_step, victim_case = "lca.c.gen", 0

    def content(cid: str, text: str) -> str:
        stem = our_parts(cid).stem
        return too_long if stem.split("-")[1] == str(victim_case) and f"-{victim_step}-" in stem else text

    for n in range(20):
        files = unfinished(ws)
        if not files:
            break
        for i, request_file in enumerate(files):
            ingest_external(ws, results(request_file, tmp_path / f"out-{n}-{i}.jsonl", content))
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
    attempts = ws.store.conn.execute(
        "SELECT attempt, status, error, error_kind FROM requests WHERE step = ? AND case_idx = ? ORDER BY attempt",
        (victim_step, victim_case),
    ).fetchall()
    assert [tuple(a)[:2] for a in attempts] == [(1, "failed"), (2, "failed"), (3, "failed")]
    assert {a["error_kind"] for a in attempts} == {"invalid"}
    assert all(
        a["error"] == f"too long: {MAX_ANSWER_CHARS + 1:,} characters, over the 100,000 an answer may hold"
        for a in attempts
    )
    (reason,) = ws.store.conn.execute(
        "SELECT reason FROM threads WHERE task = 'lca' AND variant = 'c' AND case_idx = ?", (victim_case,)
    ).fetchone()
    assert reason.endswith(
        f"unusable output 3 times; last: too long: {MAX_ANSWER_CHARS + 1:,} characters, over the 100,000 an answer may hold"
    )
    # Never stored, never sent on: no request file holds it, the other threads finished.
    assert not ws.store.conn.execute("SELECT 1 FROM requests WHERE length(text) > ?", (MAX_ANSWER_CHARS,)).fetchone()
    assert all(p.stat().st_size < 1 << 20 for p in ws.requests_dir.rglob("*.jsonl"))
    assert dict(ws.store.conn.execute("SELECT status, COUNT(*) FROM threads GROUP BY status").fetchall()) == {
        "done": 5,
        "failed": 1,
    }
    session.close()


def test_invalid_utf8_in_an_answer_is_an_anomaly_and_the_answer_unusable(ws, tmp_path):
    request_file = unfinished(ws)[0]
    out = results(request_file, tmp_path / "out.jsonl", lambda cid, text: "借款合同" + text)
    lines = out.read_bytes().splitlines(keepends=True)
    target = json.loads(lines[0])["custom_id"]
    # A character of the answer cut short: the bytes of 合 (e5 90 88) with a broken last byte.
    lines[0] = lines[0].replace("合".encode(), b"\xe5\x90\xff", 1)
    out.write_bytes(b"".join(lines))
    stats, _ = ingest_external(ws, out)
    assert (stats.answered, stats.failed, stats.bad_lines) == (5, 1, 0)
    status_, text, error, kind = ws.store.conn.execute(
        "SELECT status, text, error, error_kind FROM requests WHERE custom_id = ?", (target,)
    ).fetchone()
    assert (status_, text, kind) == ("failed", None, "invalid") and "invalid UTF-8 at byte" in error
    assert "\ufffd" not in "".join(r[2] or "" for r in request_rows(ws))
    ((found,),) = [[a] for a in anomalies(ws)]
    assert found["kind"] == "invalid_utf8" and found["custom_id"] == target
    assert "out.jsonl line 1" in found["detail"]
    assert detail.collect(ws)["anomalies"] == 1


def reversed_sample(tmp_path: Path) -> Path:
    cases = json.loads(resources.sample_dataset().read_text(encoding="utf-8"))
    path = tmp_path / "reversed.json"
    path.write_text(json.dumps(cases[::-1], ensure_ascii=False), encoding="utf-8")
    return path


def test_another_workspaces_output_is_refused_and_its_lines_never_applied(ws, tmp_path):
    # The case: the same run ids over the same cases in another order, in another workspace.
    with manual(tmp_path / "other", reversed_sample(tmp_path)) as (other, _):
        theirs = results(unfinished(other)[0], tmp_path / "theirs.jsonl")
        assert {
            our_parts(json.loads(x)["custom_id"]).stem for x in theirs.read_text(encoding="utf-8").splitlines()
        } == {our_parts(r[0]).stem for r in request_rows(ws)}, (
            "the other workspace's requests must have the same stems (run ids, cases, steps) as this one's"
        )
    before = request_rows(ws)
    with pytest.raises(LexpilotError, match=r"another workspace's requests .*nothing was applied") as refused:
        ingest_external(ws, theirs)
    assert id_tag(ws.workspace_id) in str(refused.value)
    assert request_rows(ws) == before and not anomalies(ws)
    # Mixed into this workspace's own results (theirs first): ours applied, theirs recorded.
    ours = results(unfinished(ws)[0], tmp_path / "ours.jsonl")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(theirs.read_bytes() + ours.read_bytes())
    stats, done = ingest_external(ws, mixed)
    assert (stats.answered, stats.unknown, len(done)) == (6, 6, 1)
    assert [a["kind"] for a in anomalies(ws)] == ["foreign"] * 6
    assert all("another workspace's request" in a["detail"] for a in anomalies(ws))
    contents = {
        line["custom_id"]: line["response"]["body"]["choices"][0]["message"]["content"]
        for line in map(json.loads, ours.read_text(encoding="utf-8").splitlines())
    }
    assert {r[0]: r[2] for r in request_rows(ws)} == {cid: judges.parse_text(c) for cid, c in contents.items()}
