"""`doctor`: every finding from a hand-made corruption of a simulated workspace, and every repair
leading to a run that ends with the records of an untouched one."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.engine import poll
from lexpilot_batch.engine import submit as sending
from lexpilot_batch.engine.ingest import ingest_external
from lexpilot_batch.engine.loop import submit
from lexpilot_batch.engine.poll import poll_files
from lexpilot_batch.engine.session import ProviderOptions
from lexpilot_batch.engine.submit import TamperedFile
from lexpilot_batch.errors import LexpilotError, WorkspaceBusy
from lexpilot_batch.providers.openai.batch import OpenAIBatchBackend
from lexpilot_batch.state.compaction import read_saved, saved_files
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.crash import base_env
from tests.helpers.engine import finish, open_session, our_parts, prepare_runs, records, thread_counts

STAGE, LIMIT = "all", 4


def start(ws: Workspace, **options):
    session = open_session(ws, **options)
    prepare_runs(ws, session, stage=STAGE, limit=LIMIT)
    return session


@pytest.fixture(scope="module")
def untouched(tmp_path_factory) -> dict:
    """The records of the same runs, never corrupted."""
    with Workspace(tmp_path_factory.mktemp("untouched") / "ws") as ws:
        session = start(ws)
        finish(ws, session)
        session.close()
        assert thread_counts(ws).keys() == {"done"}
        return records(ws)


@pytest.fixture
def ws(tmp_path):
    with Workspace(tmp_path / "ws") as workspace:
        yield workspace


def kinds(findings: list[doctor.Finding]) -> list[str]:
    return [f.kind for f in findings]


def files(ws: Workspace, status: str | None = None) -> list[dict]:
    sql = "SELECT * FROM files" + (" WHERE status = ?" if status else "") + " ORDER BY pk"
    return [dict(r) for r in ws.store.conn.execute(sql, (status,) if status else ())]


def finishes_like(ws: Workspace, session, untouched: dict) -> None:
    finish(ws, session)
    session.close()
    assert thread_counts(ws) == {"done": len(untouched)}
    assert records(ws) == untouched
    assert doctor.diagnose(ws) == []


def download_without_ingest(ws: Workspace, session, monkeypatch) -> dict:
    """Submit wave 1 and poll until its first file is downloaded, its ingest 'crashing' once."""
    submit(ws, session)
    real = poll.ingest_file

    def crash(ws_, row):
        monkeypatch.setattr(poll, "ingest_file", real)
        raise RuntimeError("killed before ingesting")

    monkeypatch.setattr(poll, "ingest_file", crash)
    for _ in range(200):
        try:
            poll_files(ws, session)
        except RuntimeError:
            break
    [row] = files(ws, "downloaded")
    return row


# --- a healthy workspace --------------------------------------------------------------------------


def test_a_healthy_workspace_has_no_findings_at_any_stage(ws, untouched):
    session = start(ws)
    assert doctor.diagnose(ws) == []  # compiled, not submitted
    submit(ws, session)
    assert doctor.diagnose(ws) == []  # in flight
    finishes_like(ws, session, untouched)
    assert doctor.render([]) == "No problems found."


# --- request files ---------------------------------------------------------------------------------


def test_an_unsent_wave_whose_file_changed_is_discarded_and_compiled_again(ws, untouched):
    session = start(ws)
    [row] = files(ws)
    path = ws.path(row["path"])
    original = path.read_bytes()
    path.write_bytes(original.replace(b'"temperature":0.7', b'"temperature":1.9', 1))

    findings = doctor.diagnose(ws)
    assert kinds(findings) == [doctor.UNSENT_CHANGED]
    assert row["path"] in findings[0].detail and "changed on disk" in findings[0].detail
    assert "compiles it again" in findings[0].fix and findings[0].repairable

    done = doctor.repair(ws, findings)  # no session: the next poll-and-advance compiles it
    assert any("discarded unsent wave 1" in line for line in done)
    assert files(ws) == [] and kinds(doctor.diagnose(ws)) == [doctor.THREADS_WAITING]
    assert path.with_name(path.name + ".discarded").read_bytes() != original  # the edit is kept aside
    finish(ws, session)
    assert read_saved(path) == original  # compiled again byte for byte (and compacted once finished)
    finishes_like(ws, session, untouched)


def test_a_vanished_unsent_file_is_recompiled_at_once_with_a_session(ws, untouched):
    session = start(ws)
    [row] = files(ws)
    original = ws.path(row["path"]).read_bytes()
    ws.path(row["path"]).unlink()
    findings = doctor.diagnose(ws)
    assert kinds(findings) == [doctor.UNSENT_CHANGED] and "is gone" in findings[0].detail
    done = doctor.repair(ws, findings, session)
    assert any(line.startswith("compiled wave 1 again") for line in done)
    assert ws.path(row["path"]).read_bytes() == original
    assert doctor.diagnose(ws) == []
    finishes_like(ws, session, untouched)


def test_a_changed_file_of_a_wave_partly_sent_is_discarded_and_asked_again(ws, untouched):
    session = start(ws, max_requests=4)
    assert len(files(ws)) >= 3

    class Stop(Exception):
        pass

    def stop_after_first(path):
        raise Stop

    with pytest.raises(Stop):
        submit(ws, session, on_file=stop_after_first)
    sent, unsent = files(ws, "submitted"), files(ws, "compiled")
    assert len(sent) == 1 and len(unsent) >= 2
    target = unsent[0]
    with open(ws.path(target["path"]), "ab") as fh:
        fh.write(b'{"custom_id": "smuggled", "body": {}}\n')

    with pytest.raises(TamperedFile, match="doctor"):
        submit(ws, session)
    findings = doctor.diagnose(ws)
    assert kinds(findings) == [doctor.UNSENT_CHANGED]
    assert "already with the provider" in findings[0].fix
    done = doctor.repair(ws, findings)
    assert done == [f"discarded {target['path']}: its {target['n_requests']} requests are asked again in the next wave"]
    assert target["path"] not in {f["path"] for f in files(ws)}
    finishes_like(ws, session, untouched)


def test_a_sent_file_changed_on_disk_is_explained_not_repaired(ws, untouched):
    session = start(ws)
    submit(ws, session)
    [row] = files(ws, "submitted")
    ws.path(row["path"]).write_bytes(b"edited by hand\n")
    findings = doctor.diagnose(ws)
    assert kinds(findings) == [doctor.SENT_CHANGED]
    assert not findings[0].repairable and findings[0].severity == "info"
    assert "no result is affected" in findings[0].fix
    assert doctor.repair(ws, findings) == []
    finish(ws, session)
    session.close()
    assert records(ws) == untouched


# --- result files ----------------------------------------------------------------------------------


def cut_mid_line(path: Path) -> str:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # a copy that stopped half-way
    return "not a result object"


def answer_for_another_file(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["custom_id"] = "somebody-else-1"
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    return "somebody-else-1"


def delete(path: Path) -> str:
    path.unlink()
    return "is gone"


@pytest.mark.parametrize(
    ("damage", "kind"),
    [
        (delete, doctor.RESULT_MISSING),
        (cut_mid_line, doctor.RESULT_DAMAGED),
        (answer_for_another_file, doctor.RESULT_DAMAGED),
    ],
)
def test_a_lost_or_damaged_result_file_is_downloaded_again(ws, untouched, monkeypatch, damage, kind):
    session = start(ws)
    row = download_without_ingest(ws, session, monkeypatch)
    output = ws.path(row["output_path"])
    data = output.read_bytes()
    said = damage(output)

    findings = doctor.diagnose(ws)
    assert kinds(findings) == [kind]
    assert row["output_path"] in findings[0].detail and said in findings[0].detail
    done = doctor.repair(ws, findings)
    assert done == [f"{row['path']}: forgot its saved results; the next poll-and-advance downloads them again"]
    assert output.with_name(output.name + ".damaged").exists() == (kind == doctor.RESULT_DAMAGED)
    assert files(ws, "submitted")[0]["output_path"] is None
    finishes_like(ws, session, untouched)
    assert read_saved(output) == data


def test_a_sync_file_edited_after_submit_is_found_and_discarded(ws, monkeypatch, tmp_path):
    """Until the engine checks a sync file before running it, doctor is how such an edit is caught."""
    from lexpilot_batch.simulated import SimulatedServer, parse_faults

    with SimulatedServer(tmp_path / "sim", parse_faults("")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        with Workspace(tmp_path / "untouched-sync") as clean:  # the same run on the sync backend
            reference = open_session(clean, backends={"eval": "sync"})
            prepare_runs(clean, reference, stage=STAGE, limit=LIMIT)
            finish(clean, reference)
            reference.close()
            untouched_sync = records(clean)
        session = open_session(ws, backends={"eval": "sync"})
        prepare_runs(ws, session, stage=STAGE, limit=LIMIT)
        submit(ws, session)
        [row] = files(ws, "submitted")
        assert row["backend"] == "sync"
        ws.path(row["path"]).write_bytes(ws.path(row["path"]).read_bytes().replace(b"sim-eval", b"other-model"))
        findings = doctor.diagnose(ws)
        assert kinds(findings) == [doctor.UNSENT_CHANGED] and "already with the provider" in findings[0].fix
        doctor.repair(ws, findings)
        finishes_like(ws, session, untouched_sync)


# --- interrupted steps and inconsistencies -----------------------------------------------------------


def test_an_interrupted_submit_is_reported_and_submit_adopts_the_batch(ws, untouched, monkeypatch):
    session = start(ws)
    real = OpenAIBatchBackend.create

    def create_then_die(self, *args, **kwargs):
        real(self, *args, **kwargs)
        monkeypatch.setattr(OpenAIBatchBackend, "create", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(OpenAIBatchBackend, "create", create_then_die)
    with pytest.raises(KeyboardInterrupt):
        submit(ws, session)
    [row] = files(ws, "creating")
    findings = doctor.diagnose(ws)
    assert kinds(findings) == [doctor.INTERRUPTED_SUBMIT]
    assert findings[0].severity == "action" and not findings[0].repairable
    assert row["path"] in findings[0].detail and "adopts" in findings[0].fix
    assert submit(ws, session).adopted == [row["path"]]
    finishes_like(ws, session, untouched)


def test_a_submit_stopped_after_the_upload_is_reported_and_submit_goes_on(ws, untouched, monkeypatch):
    session = start(ws)
    real = sending.batch_tag  # called between recording the upload and creating the batch

    def die(*args):
        monkeypatch.setattr(sending, "batch_tag", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(sending, "batch_tag", die)
    with pytest.raises(KeyboardInterrupt):
        submit(ws, session)
    [row] = files(ws, "uploaded")
    findings = doctor.diagnose(ws)
    assert kinds(findings) == [doctor.INTERRUPTED_SUBMIT]
    assert findings[0].detail == f"{row['path']}: uploaded, but a submit stopped before creating its batch"
    assert submit(ws, session).submitted == [row["path"]]
    finishes_like(ws, session, untouched)


def lose_answers(ws: Workspace, session, n: int) -> None:
    """Wave 1 ingested, then `n` of its answers set back to pending, as a hand edit or a bug would."""
    submit(ws, session)
    while files(ws, "submitted"):
        poll_files(ws, session)
    with ws.store.transaction() as db:
        db.execute(
            "UPDATE requests SET status = 'pending', text = NULL, value = NULL"
            " WHERE pk IN (SELECT pk FROM requests WHERE wave = 1 ORDER BY pk LIMIT ?)",
            (n,),
        )


def test_requests_left_pending_in_an_ingested_file_are_failed_without_costing_a_retry(ws, untouched):
    session = start(ws, retries=1)  # one transport failure would fail the thread
    lose_answers(ws, session, 3)
    findings = doctor.diagnose(ws)
    pending = [f for f in findings if f.kind == doctor.PENDING_IN_INGESTED]
    assert len(pending) == 1 and "3 of its requests are still pending" in pending[0].detail
    assert doctor.repair(ws, findings) == [f"{pending[0].targets[0]}: failed 3 request(s) left pending"]
    assert ws.store.conn.execute("SELECT COUNT(*) FROM requests WHERE status = 'pending'").fetchone()[0] == 0
    finishes_like(ws, session, untouched)
    assert ws.store.conn.execute("SELECT COUNT(*) FROM requests WHERE attempt = 2").fetchone()[0] == 3


def test_without_the_repair_lost_requests_stay_pending_for_ever(ws, untouched):
    """The control: the compiler asks the steps again by itself, but `status` keeps counting the lost ones."""
    session = start(ws)
    lose_answers(ws, session, 3)
    finish(ws, session)
    session.close()
    assert records(ws) == untouched
    assert ws.store.conn.execute("SELECT COUNT(*) FROM requests WHERE status = 'pending'").fetchone()[0] == 3
    assert kinds(doctor.diagnose(ws)) == [doctor.PENDING_IN_INGESTED]


def test_threads_waiting_with_nothing_open_are_reported_with_their_count(ws, untouched):
    session = start(ws)
    submit(ws, session)
    while files(ws, "submitted"):
        poll_files(ws, session)  # ingested, and stopped before compiling the next wave
    active = thread_counts(ws)["active"]
    findings = doctor.diagnose(ws)
    assert kinds(findings) == [doctor.THREADS_WAITING]
    assert findings[0].detail.startswith(f"{active} active thread(s)")
    assert "poll-and-advance" in findings[0].fix and not findings[0].repairable
    finishes_like(ws, session, untouched)


def test_ingest_anomalies_are_counted_by_kind_and_change_nothing(ws, untouched):
    session = start(ws)
    finish(ws, session)
    session.close()
    kept = min(p for p in saved_files(ws.responses_dir) if p.name.endswith(".output.jsonl"))
    saved = ws.root.parent / kept.name  # a plain copy of the compacted file
    saved.write_bytes(read_saved(kept))
    ingest_external(ws, saved)  # the same results again: the same results, nothing to report
    assert doctor.diagnose(ws) == []
    lines = saved.read_text(encoding="utf-8").splitlines()
    other = json.loads(lines[0])
    other["response"]["body"]["choices"][0]["message"]["content"] = "另一个回答。"
    foreign = json.loads(lines[1])
    parts = our_parts(foreign["custom_id"])
    foreign["custom_id"] = f"{parts.stem}-{'0' * 8}{parts.digest}"  # another workspace's tag
    changed = ws.root.parent / "changed.jsonl"
    changed.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in (other, foreign)), encoding="utf-8")
    ingest_external(ws, changed)
    findings = doctor.diagnose(ws)
    assert kinds(findings) == [doctor.ANOMALIES]
    assert findings[0].detail == "2 ingest anomalies recorded: 1 conflict, 1 foreign"
    assert not findings[0].repairable and findings[0].severity == "info"
    assert records(ws) == untouched


def test_a_missing_or_edited_manifest_file_is_rewritten(ws):
    session = open_session(ws)
    prepare_runs(ws, session, runs=("r1", "r2"), limit=2)
    session.close()
    manifests = sorted(ws.runs_dir.rglob("manifest.json"))
    original = [m.read_bytes() for m in manifests]
    manifests[0].unlink()
    edited = json.loads(original[1])
    edited["settings"]["temperature"] = 0.0
    manifests[1].write_text(json.dumps(edited), encoding="utf-8")
    findings = doctor.diagnose(ws)
    assert kinds(findings) == [doctor.MANIFEST, doctor.MANIFEST]
    assert "is gone" in findings[0].detail and "differs" in findings[1].detail
    assert len(doctor.repair(ws, findings)) == 2
    assert [m.read_bytes() for m in manifests] == original
    assert doctor.diagnose(ws) == []


# --- the schema and the command ------------------------------------------------------------------


def test_a_database_of_a_newer_version_is_reported_and_never_opened(tmp_path):
    root = tmp_path / "ws"
    with Workspace(root):
        pass
    db_path = root / "state" / "lexpilot.sqlite3"
    db = sqlite3.connect(db_path)
    db.execute("INSERT INTO migrations VALUES ('9999_from_the_future', 0)")
    db.commit()
    db.close()
    report = doctor.check(root)
    assert kinds(report.found) == [doctor.SCHEMA] and report.exit_code == 1
    assert "9999_from_the_future" in report.found[0].detail and "upgrade" in report.found[0].fix
    with pytest.raises(LexpilotError, match="newer lexpilot-batch"):
        Workspace(root).__enter__()


def test_a_known_migration_not_applied_is_reported(tmp_path):
    root = tmp_path / "ws"
    with Workspace(root):
        pass
    db = sqlite3.connect(root / "state" / "lexpilot.sqlite3")
    db.execute("DELETE FROM migrations WHERE name = '0002_file_backend'")
    findings = doctor.schema_findings(db)
    db.close()
    assert kinds(findings) == [doctor.SCHEMA] and "0002_file_backend" in findings[0].detail


def test_check_repairs_and_reports_what_is_left(tmp_path, untouched):
    root = tmp_path / "ws"
    with Workspace(root) as ws:
        session = start(ws)
        session.close()
        [row] = files(ws)
        ws.path(row["path"]).write_bytes(b"{}\n")
    looked = doctor.check(root)
    assert kinds(looked.found) == [doctor.UNSENT_CHANGED] and looked.repaired == [] and looked.exit_code == 1
    assert "--repair" in doctor.render_report(looked)

    fixed = doctor.check(root, do_repair=True, options=ProviderOptions(provider="simulated"))
    assert fixed.remaining == [] and fixed.exit_code == 0
    text = doctor.render_report(fixed)
    assert text.startswith("Repaired:") and "compiled wave 1 again" in text and text.endswith("No problems found.")
    with Workspace(root) as ws:
        finishes_like(ws, open_session(ws), untouched)


def test_check_needs_a_workspace_and_the_writer_lock(tmp_path, ws):
    with pytest.raises(LexpilotError, match="no lexpilot-batch workspace"):
        doctor.check(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()
    with pytest.raises(WorkspaceBusy):
        doctor.check(ws.root)  # `ws` holds the lock, as a running command would


def test_render_names_kind_detail_fix_and_repair(ws):
    session = start(ws)
    session.close()
    ws.path(files(ws)[0]["path"]).unlink()
    text = doctor.render(doctor.diagnose(ws))
    assert text.startswith("1 finding(s): 1 error")
    assert "[error] unsent_request_file_changed: requests/w0001/" in text
    assert "what to do: discard wave 1" in text
    assert "`lexpilot-batch doctor --repair` does this." in text


def test_repair_refuses_a_read_only_workspace(tmp_path):
    root = tmp_path / "ws"
    with Workspace(root):
        pass
    with Workspace(root, writable=False) as ro, pytest.raises(LexpilotError, match="writer lock"):
        doctor.repair(ro, [])


def test_diagnose_reads_only(ws):
    """No table and no file of the workspace changes when it is diagnosed."""
    session = start(ws)
    session.close()
    ws.path(files(ws)[0]["path"]).write_bytes(b"x\n")

    def snapshot() -> tuple:
        listing = sorted(
            (p.relative_to(ws.root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
            for p in ws.root.rglob("*")
            if p.is_file() and "state" not in p.parts
        )
        db = ws.store.conn
        tables = {t: db.execute(f"SELECT * FROM {t}").fetchall() for t in ("files", "requests", "threads", "waves")}
        return listing, {t: [tuple(r) for r in rows] for t, rows in tables.items()}

    before = snapshot()
    assert doctor.diagnose(ws)
    assert snapshot() == before


def test_the_doctor_command(tmp_path):
    """`lexpilot-batch doctor [--repair]` as a process: exit 1 while an error remains, 0 once repaired."""
    root = tmp_path / "ws"
    with Workspace(root) as ws:
        start(ws).close()
        ws.path(files(ws)[0]["path"]).unlink()

    def doctor_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lexpilot_batch", "doctor", "--root", str(root), *args],
            check=False,
            env=base_env(),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
        )

    looked = doctor_cli()
    assert looked.returncode == 1, looked.stderr
    assert "[error] unsent_request_file_changed" in looked.stdout and "is gone" in looked.stdout
    fixed = doctor_cli("--repair", "--provider", "simulated")
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.startswith("Repaired:") and fixed.stdout.rstrip().endswith("No problems found.")
    again = doctor_cli()
    assert (again.returncode, again.stdout.strip()) == (0, "No problems found.")
