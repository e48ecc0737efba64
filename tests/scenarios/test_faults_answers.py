"""The fault suite, continued (`scenarios/test_faults.py`'s drivers and checks): result lines that answer
something else than the request they name, and lines beyond the bounds of `result_lines` (issue 23,
items 2 and 4). Each scenario runs the whole benchmark (`--stage all`, a few cases) through the
simulated provider over real HTTP and ends equal to the fault-free run, with every invariant of
`helpers.faults.check_invariants` held.

| scenario | guarantee checked |
| --- | --- |
| another workspace's results (the same run ids over the same cases in another order), ingested with `lexpilot-batch ingest` mid-run and put in front of this workspace's own lines in a downloaded output file | = fault-free; `ingest` refuses the file, naming another workspace; every such line a `foreign` anomaly, never applied |
| the same, every role on the sync backend: theirs in front of ours in each saved output file (Claude's and Gemini's native results: `scenarios/test_native.py`) | = the fault-free sync run; every such line `foreign` |
| a copy of the workspace that went its own way (one answer of its wave 1 changed): its wave-2 results put in front of this workspace's own | = fault-free; the line of the request whose prompt differs is a `mismatch` (same run, case, step and attempt, another hash), never applied; the lines of identical requests are the same results: no anomaly |
| a line of an earlier attempt (truncated, then retried) in the file of the retry, answering well | = fault-free; a `stale` anomaly, never applied |
| one line nested 100,000 deep among good ones: with its id, and without | = fault-free; `poll-and-advance` goes on; the line is a `too_deep` (with its id) or `bad_line` anomaly and its request is sent again; `doctor` and `doctor --repair` on the downloaded, not yet ingested file go through |
| wave 1 compiled with the previous version's ids (no tag, no hash), the rest with this version's | = fault-free, no anomaly: both kinds matched exactly |
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.engine import downloads
from lexpilot_batch.engine.ingest import ingest_external
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.providers.ids import id_parts
from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend
from lexpilot_batch.providers.sync.runner import SyncRunner
from lexpilot_batch.simulated.roles import is_question
from lexpilot_batch.state.waves import FileRow
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util.jsonbounds import MAX_DEPTH
from tests.helpers.engine import finish, open_session, our_parts, prepare_runs
from tests.helpers.faults import (
    LIMIT,
    STAGE,
    SyncProvider,
    assert_same_as,
    name_of,
    retried,
    reversed_sample,
    run_benchmark,
    saved_output_lines,
)

pytestmark = pytest.mark.usefixtures("no_fsync", "clean_env")

THREADS = 6 * LIMIT


def wave_of(dest: Path) -> int:
    return int(dest.parent.name[1:])


def of_wave(lines: dict[str, list[bytes]], wave: int) -> list[bytes]:
    return [x for name, file_lines in lines.items() if name.startswith(f"w{wave:04d}/") for x in file_lines]


def cid_of(line: bytes) -> str:
    return json.loads(line)["custom_id"]


# --- 2. answers to another request --------------------------------------------------------------


def test_another_workspaces_results_mid_run_are_never_applied(tmp_path, baseline, monkeypatch):
    # The case: another workspace, the same run ids over the same cases in another order.
    other = tmp_path / "other"
    with Workspace(other) as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage=STAGE, limit=LIMIT, dataset=reversed_sample(tmp_path))
        finish(ws, session)
        session.close()
    theirs = saved_output_lines(other)
    stems = {our_parts(r["custom_id"]).stem for r in baseline.requests}
    assert {our_parts(cid_of(x)).stem for x in of_wave(theirs, 1)} <= stems, "theirs must name requests like ours"
    (tmp_path / "theirs-w1.jsonl").write_bytes(b"".join(of_wave(theirs, 1)))

    real = OpenAIBatchBackend.download
    put: Counter = Counter()

    def download(self, file_id: str, dest: Path) -> None:
        real(self, file_id, dest)
        name = name_of(dest)
        if name in theirs and not put[name]:  # their results of the file of the same name
            put[name] = len(theirs[name])
            dest.write_bytes(b"".join(theirs[name]) + dest.read_bytes())  # theirs first: read first

    refused: list[str] = []

    def drive(ws: Workspace, session) -> None:
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)  # wave 1 sent
        try:
            ingest_external(ws, tmp_path / "theirs-w1.jsonl")
        except LexpilotError as exc:
            refused.append(str(exc))
        finish(ws, session)

    monkeypatch.setattr(OpenAIBatchBackend, "download", download)
    outcome = run_benchmark(tmp_path / "ws", drive=drive)
    assert_same_as(baseline, outcome)
    assert len(refused) == 1 and "another workspace's requests" in refused[0] and "nothing was applied" in refused[0]
    assert sum(put.values()) > 0
    kinds = Counter(a["kind"] for a in outcome.anomalies)
    assert kinds == {"foreign": sum(put.values())}
    assert all("another workspace's request" in a["detail"] for a in outcome.anomalies)
    assert outcome.status["anomalies"] == sum(put.values())


def test_a_copy_gone_its_own_way_cannot_answer_for_the_original(tmp_path, baseline, monkeypatch):
    root = tmp_path / "ws"
    with Workspace(root) as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage=STAGE, limit=LIMIT)
        session.close()
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)  # the same workspace id: only the requests' hashes tell them apart

    real = OpenAIBatchBackend.download
    changed: list[str] = []

    def flip_one_answer(self, file_id: str, dest: Path) -> None:
        # In the copy, one question of wave 1 becomes a judgment: its classification's prompt differs.
        real(self, file_id, dest)
        if changed or wave_of(dest) != 1 or not dest.name.endswith(".output.jsonl"):
            return
        lines = dest.read_bytes().splitlines(keepends=True)
        for i, raw in enumerate(lines):
            line = json.loads(raw)
            message = line["response"]["body"]["choices"][0]["message"]
            if (
                ".gen-" in line["custom_id"]
                and line["custom_id"].split("-")[2].startswith("lca.")
                and is_question(message["content"])
            ):
                message["content"] = "根据您提供的事实，法院将支持您的全部诉讼请求。"
                lines[i] = (json.dumps(line, ensure_ascii=False) + "\n").encode()
                changed.append(line["custom_id"])
                break
        dest.write_bytes(b"".join(lines))

    monkeypatch.setattr(OpenAIBatchBackend, "download", flip_one_answer)
    with Workspace(copy) as ws:
        session = open_session(ws)
        finish(ws, session)
        session.close()
    assert len(changed) == 1
    stem = our_parts(changed[0]).stem
    judged = stem.replace(".gen-", ".cls-")  # the step that read the changed answer
    copy_lines = saved_output_lines(copy)
    theirs = [x for x in of_wave(copy_lines, 2) if our_parts(cid_of(x)).stem == judged]
    assert len(theirs) == 1

    put: Counter = Counter()

    def prepend(self, file_id: str, dest: Path) -> None:
        # The copy's results of wave 2 in front of ours, file by file.
        real(self, file_id, dest)
        name = name_of(dest)
        if wave_of(dest) == 2 and name in copy_lines and not put[name]:
            put[name] = len(copy_lines[name])
            dest.write_bytes(b"".join(copy_lines[name]) + dest.read_bytes())

    monkeypatch.setattr(OpenAIBatchBackend, "download", prepend)
    outcome = run_benchmark(root)
    assert_same_as(baseline, outcome)
    ours = {our_parts(r["custom_id"]).stem: r["custom_id"] for r in outcome.requests}
    assert ours[judged] != cid_of(theirs[0])
    # Every other line of the copy answered a request byte-identical to ours: the same result, no anomaly.
    assert sum(put.values()) > 1
    (found,) = outcome.anomalies
    assert found["kind"] == "mismatch" and found["custom_id"] == cid_of(theirs[0])
    assert repr(ours[judged]) in found["detail"] and "another request's hash" in found["detail"]


def test_a_line_of_an_earlier_attempt_is_never_applied_to_the_retry(tmp_path, baseline, monkeypatch):
    real = OpenAIBatchBackend.download
    stale: list[str] = []

    def download(self, file_id: str, dest: Path) -> None:
        real(self, file_id, dest)
        if stale or not dest.name.endswith(".output.jsonl"):
            return
        lines = dest.read_bytes().splitlines(keepends=True)
        for raw in lines:
            line = json.loads(raw)
            parts = our_parts(line["custom_id"])
            if line["response"]["body"]["choices"][0]["finish_reason"] == "stop" and parts.stem.endswith("-2"):
                # The retry's good answer, under the id its first, truncated attempt had.
                first = self_ids[parts.stem[:-2] + "-1"]
                dest.write_bytes(b"".join([(json.dumps({**line, "custom_id": first}) + "\n").encode(), *lines]))
                stale.append(first)
                return

    self_ids: dict[str, str] = {}

    def drive(ws: Workspace, session) -> None:
        def remember() -> None:
            for (cid,) in ws.store.conn.execute("SELECT custom_id FROM requests"):
                self_ids[our_parts(cid).stem] = cid

        for _ in range(400):
            remember()
            left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            if left["in_flight"] == 0 and left["unsubmitted"] == 0:
                return

    monkeypatch.setattr(OpenAIBatchBackend, "download", download)
    outcome = run_benchmark(tmp_path / "ws", "truncate=0.15,seed=1", drive=drive)
    assert_same_as(baseline, outcome)
    assert len(stale) == 1 and retried(outcome)
    (found,) = outcome.anomalies
    assert found["kind"] == "stale" and found["custom_id"] == stale[0] and "(attempt 1)" in found["detail"]
    first = outcome.by_custom_id()[stale[0]]
    assert first["status"] == "failed" and first["error"].startswith("truncated")


def test_another_workspaces_results_on_the_sync_backend_are_never_applied(
    tmp_path,
    sync_baseline,  # noqa: F811 - the fixture of test_faults
    monkeypatch,
):
    """The sync backend's saved output (`providers.sync`), read like a batch's: theirs in front of ours."""
    provider = SyncProvider(tmp_path / "provider", "", monkeypatch)
    try:
        other = tmp_path / "other"
        with Workspace(other) as ws:
            session = provider.session(ws)
            prepare_runs(ws, session, stage=STAGE, limit=LIMIT, dataset=reversed_sample(tmp_path))
            finish(ws, session)
            session.close()
        theirs = saved_output_lines(other)
        real = SyncRunner.arun
        put: Counter = Counter()

        async def arun(self, job, lanes):
            stats = await real(self, job, lanes)
            output_path = job.output_path
            name = name_of(output_path)
            if name in theirs and not put[name]:
                put[name] = len(theirs[name])
                output_path.write_bytes(b"".join(theirs[name]) + output_path.read_bytes())
            return stats

        monkeypatch.setattr(SyncRunner, "arun", arun)
        outcome = run_benchmark(tmp_path / "ws", session_factory=provider.session)
    finally:
        provider.close()
    assert_same_as(sync_baseline, outcome)
    assert sum(put.values()) > 0 and all(f["backend"] == "sync" for f in outcome.files)
    assert Counter(a["kind"] for a in outcome.anomalies) == {"foreign": sum(put.values())}


# --- 4. a line nested 100,000 deep ---------------------------------------------------------------


def deep(line: dict, with_id: bool) -> bytes:
    """`line` with its response body replaced by 100,000 nested arrays (its id first, or none)."""
    nested = "[" * 100_000 + "]" * 100_000
    head = '{"id": "batch_req_deep", ' + (f'"custom_id": "{line["custom_id"]}", ' if with_id else "")
    return (head + '"response": {"status_code": 200, "body": ' + nested + '}, "error": null}\n').encode()


def test_a_line_nested_100000_deep_is_sent_again_and_wedges_nothing(tmp_path, baseline, monkeypatch):
    real = OpenAIBatchBackend.download
    target: dict[int, str] = {}  # wave -> the output file holding the deep line
    hit: dict[int, str] = {}  # wave -> the custom_id whose line was replaced

    def download(self, file_id: str, dest: Path) -> None:
        real(self, file_id, dest)
        wave = wave_of(dest)
        if wave > 2 or not dest.name.endswith(".output.jsonl"):
            return
        lines = dest.read_bytes().splitlines(keepends=True)
        if len(lines) < 2 or target.setdefault(wave, dest.name) != dest.name:
            return
        # Every download of the file holds it: `doctor --repair` downloads it again.
        victim = json.loads(lines[1])
        hit[wave] = victim["custom_id"]
        lines[1] = deep(victim, with_id=wave == 1)
        dest.write_bytes(b"".join(lines))

    class Killed(Exception):
        pass

    real_ingest = downloads.ingest_file
    crashed: set[str] = set()

    def ingest_or_crash(ws: Workspace, row: FileRow, check=None):
        if row["path"] not in crashed:  # killed once before each file's ingest: doctor looks at it
            crashed.add(row["path"])
            raise Killed(row["path"])
        return real_ingest(ws, row, check=check)

    checked: list[list[str]] = []

    def drive(ws: Workspace, session) -> None:
        for _ in range(400):
            try:
                left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)
            except Killed:
                findings = doctor.diagnose(ws)  # `doctor`
                checked.append([f.kind for f in findings])
                doctor.repair(ws, findings, session)  # `doctor --repair`
                continue
            if left["in_flight"] == 0 and left["unsubmitted"] == 0:
                return

    monkeypatch.setattr(OpenAIBatchBackend, "download", download)
    monkeypatch.setattr(downloads, "ingest_file", ingest_or_crash)
    outcome = run_benchmark(tmp_path / "ws", drive=drive)
    assert_same_as(baseline, outcome)
    assert set(hit) == {1, 2} and checked
    # Wave 1's deep line names its request: the file looks whole, and the request is failed at ingest.
    by_id = outcome.by_custom_id()
    first = by_id[hit[1]]
    assert (
        first["status"] == "failed" and first["error"] == f"unusable result line: nested deeper than {MAX_DEPTH} levels"
    )
    assert first["error_kind"] == "transport"
    # Wave 2's names none: a damaged file for doctor (repaired: downloaded again), a bad line at ingest.
    assert any(doctor.RESULT_DAMAGED in kinds for kinds in checked)
    second = by_id[hit[2]]
    assert second["status"] == "failed" and second["error"].startswith("not in the results of batch")
    again = {(r["run_id"], r["case_idx"], r["step"]) for r in retried(outcome)}
    assert {(by_id[c]["run_id"], by_id[c]["case_idx"], by_id[c]["step"]) for c in hit.values()} <= again
    kinds = Counter(a["kind"] for a in outcome.anomalies)
    assert kinds == {"too_deep": 1, "bad_line": 1}
    assert all(" line 2" in a["detail"] for a in outcome.anomalies)


def test_doctor_and_doctor_repair_read_a_downloaded_file_with_a_deep_line(tmp_path, baseline, monkeypatch):
    """The commands themselves (`doctor.check`, what `lexpilot-batch doctor [--repair]` runs), on a
    closed workspace whose downloaded results hold a 100,000-deep line with no id."""
    root = tmp_path / "ws"
    real = OpenAIBatchBackend.download

    def download(self, file_id: str, dest: Path) -> None:
        real(self, file_id, dest)
        if dest.name.endswith(".output.jsonl") and wave_of(dest) == 1:
            lines = dest.read_bytes().splitlines(keepends=True)
            lines[0] = deep(json.loads(lines[0]), with_id=False)
            dest.write_bytes(b"".join(lines))

    class Killed(Exception):
        pass

    def killed(ws: Workspace, row: dict, check=None):
        raise Killed(row["path"])

    real_ingest = downloads.ingest_file
    monkeypatch.setattr(OpenAIBatchBackend, "download", download)
    monkeypatch.setattr(downloads, "ingest_file", killed)

    def drive(ws: Workspace, session) -> None:
        with pytest.raises(Killed):
            for _ in range(100):
                poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)

    run_benchmark(root, drive=drive, check=False)
    monkeypatch.setattr(OpenAIBatchBackend, "download", real)
    monkeypatch.setattr(downloads, "ingest_file", real_ingest)
    report = doctor.check(root)  # `lexpilot-batch doctor`
    assert [f.kind for f in report.found] == [doctor.RESULT_DAMAGED]
    assert "line 1 is not a result object" in report.found[0].detail
    repaired = doctor.check(root, do_repair=True)  # `lexpilot-batch doctor --repair`
    assert repaired.repaired and repaired.remaining == [] and doctor.check(root).found == []
    outcome = run_benchmark(root)  # the results downloaded again, whole this time
    assert_same_as(baseline, outcome)
    assert not outcome.anomalies and not retried(outcome)


# --- workspaces compiled before ids carried a check ---------------------------------------------


def test_a_workspace_whose_first_wave_has_the_previous_versions_ids_finishes_the_same(tmp_path, baseline, monkeypatch):
    """Wave 1 compiled as the previous version did (`<run key>-<case>-<step>-<attempt>`, the same
    bytes otherwise), every later wave as this one does: both kinds are matched exactly, and the run
    ends equal to the fault-free one. (A guard for old workspaces: before this change every id was old.)"""
    from lexpilot_batch.engine import compiler

    real = compiler.custom_id
    monkeypatch.setattr(compiler, "custom_id", lambda key, case, step, attempt, check: f"{key}-{case}-{step}-{attempt}")
    compiled: list[str] = []

    def drive(ws: Workspace, session) -> None:
        compiled.extend(r[0] for r in ws.store.conn.execute("SELECT custom_id FROM requests"))
        monkeypatch.setattr(compiler, "custom_id", real)  # this version from wave 2 on
        finish(ws, session)

    outcome = run_benchmark(tmp_path / "ws", drive=drive)
    assert_same_as(baseline, outcome)
    assert not outcome.anomalies
    old = {r["custom_id"] for r in outcome.requests if r["wave"] == 1}
    assert old == set(compiled) and all(id_parts(c) is None for c in old)
    assert all(id_parts(r["custom_id"]) is not None for r in outcome.requests if r["wave"] > 1)
