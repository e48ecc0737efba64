"""Crash and resume (SPEC §8): SIGKILL the CLI anywhere, run it again, lose and duplicate nothing.

Each scenario runs the two-run, all-task benchmark on the first six cases, kills
`poll-and-advance --submit --wait` (and once `prepare`) with SIGKILL again and again, lets it
finish, and compares the workspace with an uninterrupted run under the same simulated seed and
faults: simulated answers depend only on (seed, custom_id, prompt) and the fault dice on custom_ids
and file contents, so two providers that were asked the same things give the same records. Kills land
at random moments (seeded) and, through `helpers/crash.py`'s self-kill hook, exactly in the windows
between "the provider did it" and "the database recorded it".
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from openai import OpenAI

from lexpilot_batch.simulated import SimulatedServer, parse_faults
from lexpilot_batch.state.compaction import read_saved, saved_files
from tests.helpers.crash import (
    KILL_POINTS,
    Client,
    KillLog,
    SimServer,
    base_env,
    check_compacted,
    check_nothing_in_flight,
    check_same_as_reference,
    final_state,
    open_db,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL semantics; proc.kill() is TerminateProcess")

SEED = 11
# Every fault here is drawn from custom_ids or file contents, so both providers roll the same dice;
# the latency keeps batches in flight long enough for kills to land while they are.
FAULTS = "line_error=0.05,truncate=0.02,malformed_judge=0.1,expire_batch=0.1,fail_batch=0.05,latency=0.05,seed=7"
PREPARE = ("prepare", "--stage", "all", "--run-id", "r1", "--run-id", "r2", "--model", "sim-eval", "--limit", "6")
# A kill during a create is followed by a look for its batch during the grace period: short here.
ADVANCE = ("poll-and-advance", "--submit", "--wait", "--poll-interval", "0.05", "--create-grace", "0.5")
IN_PROCESS = ["--provider", "simulated", "--sim-seed", str(SEED), "--sim-faults", FAULTS]


def env_client(root: Path, server: SimServer) -> Client:
    env = base_env(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-dummy")
    return Client(root, env, log_path=root.parent / f"{root.name}.log")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The uninterrupted run, against its own provider process."""
    base = tmp_path_factory.mktemp("reference")
    with SimServer(base / "sim", SEED, FAULTS, base / "server.log") as server:
        client = env_client(base / "ws", server)
        client.run(*PREPARE)
        client.run(*ADVANCE)
    state = final_state(base / "ws")
    threads = Counter(status for status, _, _ in state["threads"].values())
    assert threads["done"] >= 60 and threads["active"] == 0, threads
    # Controls: the faults really forced retries, and interaction threads went several rounds.
    assert any(attempt > 1 for _, _, attempt, *_ in state["requests"].values())
    assert max(wave for wave, *_ in state["requests"].values()) >= 8
    return state


def kill_randomly(client: Client, log: KillLog, rng: random.Random, kills: int, late: float = 0.5) -> int:
    """SIGKILL poll-and-advance after random delays; stops early when a run ends by itself."""
    landed = 0
    for _ in range(kills):
        delay = rng.uniform(0.05, late)  # into the command's work, which takes about a second in all
        log.before()
        if not client.kill_after(delay, *ADVANCE):
            break
        landed += 1
        log.landed(f"random {delay:.2f}s")
    return landed


def kill_prepare(client: Client, log: KillLog, rng: random.Random) -> None:
    """Kill `prepare` between the second run's commit and its threads', then at random; finish it."""
    log.before()
    assert client.kill_at("prepare.before_threads:2", *PREPARE)
    log.landed("prepare.before_threads:2")
    log.before()
    delay = rng.uniform(0.0, 0.15)
    if client.kill_after(delay, *PREPARE):
        log.landed(f"prepare random {delay:.2f}s")
    client.run(*PREPARE)


# --- what must hold after any sequence of kills ---------------------------------------------------


def check_workspace_bookkeeping(root: Path) -> None:
    """Every result line is one known request, ingested once; every file was sent as one batch."""
    db = open_db(root)
    assert db is not None
    try:
        requests = {r["custom_id"]: dict(r) for r in db.execute("SELECT * FROM requests")}
        files = {r["pk"]: dict(r) for r in db.execute("SELECT * FROM files")}
        anomalies = [dict(r) for r in db.execute("SELECT kind, custom_id, detail FROM anomalies")]
        answered = db.execute(
            "SELECT run_pk, case_idx, step, COUNT(*) AS n FROM requests WHERE status IN ('answered', 'discarded')"
            " GROUP BY run_pk, case_idx, step HAVING n > 1"
        ).fetchall()
    finally:
        db.close()
    assert not answered, f"steps answered more than once: {[tuple(r) for r in answered]}"
    assert {f["status"] for f in files.values()} == {"ingested"}
    assert all(f["batch_id"] for f in files.values())
    assert len({f["batch_id"] for f in files.values()}) == len(files), "two workspace files share a batch"
    saved = {}
    for f in files.values():
        for kind in ("output_path", "error_path"):
            if f[kind]:
                saved[f[kind]] = f["pk"]
    # Plain or compacted: every finished wave's files are compressed, read through `compaction`.
    on_disk = {p.relative_to(root).as_posix() for p in saved_files(root / "responses")}
    assert on_disk == set(saved), f"result files without a record: {sorted(on_disk - set(saved))}"
    lines_of: dict[int, Counter] = defaultdict(Counter)
    for rel, file_pk in saved.items():
        for raw in read_saved(root / rel).decode("utf-8").splitlines():
            if not raw.strip():
                continue
            cid = json.loads(raw)["custom_id"]
            row = requests.get(cid)
            assert row is not None, f"{rel}: {cid} is no request of this workspace"
            assert row["file_pk"] == file_pk, f"{rel}: {cid} belongs to another file"
            assert row["status"] in ("answered", "failed", "discarded"), f"{rel}: {cid} is still {row['status']}"
            lines_of[file_pk][cid] += 1
    for file_pk, seen in lines_of.items():
        assert max(seen.values()) == 1, f"{files[file_pk]['path']}: custom_id(s) answered twice in its results"
    for cid, row in requests.items():
        f = files[row["file_pk"]]
        if f["batch_status"] == "completed":  # a completed batch answers every request it was given
            assert lines_of[f["pk"]][cid] == 1, f"{cid} missing from the results of {f['path']}"
    # A duplicate or unknown custom_id would mean a result applied twice or to the wrong request, a
    # bad line a result file saved by halves; the provider here produces none of them by itself.
    assert not anomalies, anomalies


def refused_for_quota(batch) -> bool:
    """A batch the provider refused for the enqueued-token quota: it ran nothing, and its file is
    created again (the `fail_batch` fault draws such refusals)."""
    errors = getattr(batch.errors, "data", None) or []
    return batch.status == "failed" and any(e.code == "token_limit_exceeded" for e in errors)


def check_provider_batches(base_url: str, root: Path) -> None:
    """On the provider: one batch per workspace file (besides batches refused for the quota, which
    ran nothing), one uploaded file per batch, and no custom_id in two batches' inputs."""
    db = open_db(root)
    assert db is not None
    try:
        recorded = {r["batch_id"]: r["path"] for r in db.execute("SELECT batch_id, path FROM files")}
        refused = {r["batch_id"] for r in db.execute("SELECT batch_id FROM other_batches WHERE why = 'token_limit'")}
        workspace_id = db.execute("SELECT value FROM meta WHERE key = 'workspace_id'").fetchone()[0]
    finally:
        db.close()
    client = OpenAI(base_url=base_url, api_key="sk-dummy", max_retries=5)
    every = list(client.batches.list(limit=100))  # this provider serves this workspace only
    assert all((b.metadata or {}).get("lexpilot_workspace") == workspace_id for b in every)
    assert {b.id for b in every if b.id in refused} == refused, "a refused batch the provider does not hold"
    assert all(refused_for_quota(b) for b in every if b.id in refused), "a batch kept aside was not refused"
    batches = [b for b in every if b.id not in refused]
    by_file = Counter((b.metadata or {})["lexpilot_file"] for b in batches)
    assert max(by_file.values()) == 1, f"workspace files batched twice: {[p for p, n in by_file.items() if n > 1]}"
    assert {b.id for b in batches} == set(recorded), "provider batches and recorded batches differ"
    # Every request file the provider holds is a workspace file's own upload: none was uploaded twice.
    uploaded = [f.id for f in client.files.list(purpose="batch")]
    assert len(uploaded) == len(set(uploaded)) and set(uploaded) == {b.input_file_id for b in batches}, (
        "request files at the provider that no batch was created from"
    )
    owner: dict[str, str] = {}
    for b in batches:
        for raw in client.files.content(b.input_file_id).text.splitlines():
            cid = json.loads(raw)["custom_id"]
            assert cid not in owner, f"{cid} was sent in batch {owner[cid]} and again in {b.id}"
            owner[cid] = b.id


def check_manifests(root: Path) -> None:
    for run_id in ("r1", "r2"):
        found = list((root / "runs").glob(f"{run_id}-*/*/manifest.json"))
        assert len(found) == 1, f"run {run_id}: manifest file missing under {root / 'runs'}"
        assert json.loads(found[0].read_text("utf-8"))["run_id"] == run_id


def check_all(client: Client, reference: dict, base_url: str) -> None:
    check_same_as_reference(client.root, reference)
    check_nothing_in_flight(client)
    check_workspace_bookkeeping(client.root)
    check_provider_batches(base_url, client.root)
    check_compacted(client.root)


# --- the scenarios --------------------------------------------------------------------------------


@pytest.mark.slow  # a campaign of processes: tens of seconds
def test_random_sigkills_against_a_separate_provider_process(reference, tmp_path):
    rng = random.Random(8)
    with SimServer(tmp_path / "sim", SEED, FAULTS, tmp_path / "server.log") as server:
        client = env_client(tmp_path / "ws", server)
        log = KillLog(client.root, server.state_dir)
        kill_prepare(client, log, rng)
        landed = kill_randomly(client, log, rng, kills=7)
        client.run(*ADVANCE)
        print(log.summary("separate provider, random kills"))
        assert landed >= 4, log.summary("too few kills landed before the run finished")
        check_all(client, reference, server.url)


@pytest.mark.slow  # a campaign of processes: tens of seconds
def test_sigkill_at_every_commit_gap_against_a_separate_provider_process(reference, tmp_path):
    # Each kill starts a fresh process, so ":1" is the first pass after the previous kill and ":2"
    # the second (the next file of the same wave, or the next poll round).
    points = [
        "compile.before_commit:1",  # poll-and-advance compiles once wave 1 is in: this is wave 2
        "submit.after_upload:1",
        "submit.after_create:1",
        "poll.after_download:1",
        "ingest.before_commit:1",
        "poll.before_close_waves:2",
        "submit.after_create:2",
        "ingest.before_commit:2",
        "compact.before_record:1",
        "compact.before_unlink:2",
    ]
    assert {p.split(":")[0] for p in points} | {"prepare.before_threads", "prepare.before_manifest"} == set(KILL_POINTS)
    with SimServer(tmp_path / "sim", SEED, FAULTS, tmp_path / "server.log") as server:
        client = env_client(tmp_path / "ws", server)
        log = KillLog(client.root, server.state_dir)
        client.run(*PREPARE)
        for point in points:
            log.before()
            assert client.kill_at(point, *ADVANCE), f"the run finished before reaching {point}"
            log.landed(point)
        client.run(*ADVANCE)
        print(log.summary("separate provider, chosen points"))
        check_all(client, reference, server.url)


@pytest.mark.slow  # a campaign of processes: tens of seconds
def test_random_sigkills_with_the_in_process_provider(reference, tmp_path):
    """`--provider simulated` dies with the client; its batches live on in the workspace."""
    rng = random.Random(3)
    root = tmp_path / "ws"
    client = Client(root, base_env(), extra=IN_PROCESS, log_path=tmp_path / "ws.log")
    log = KillLog(root, root / "state" / "simulated")
    client.run(*PREPARE)
    # The provider persisted the batch and died with the client before the id was recorded.
    log.before()
    assert client.kill_at("submit.after_create:1", *ADVANCE)
    log.landed("submit.after_create:1")
    landed = kill_randomly(client, log, rng, kills=2, late=0.9)  # the provider starts first
    client.run(*ADVANCE)
    print(log.summary("in-process provider"))
    assert landed >= 1, log.summary("no random kill landed before the run finished")
    check_same_as_reference(root, reference)
    check_nothing_in_flight(client)
    check_workspace_bookkeeping(root)
    # The killed processes' provider state, served again, must hold one batch per file.
    with SimulatedServer(root / "state" / "simulated", parse_faults(FAULTS), seed=SEED) as server:
        check_provider_batches(server.base_url, root)


def test_prepare_killed_after_registering_a_run_still_writes_its_manifest(tmp_path):
    """SPEC §8: a run's manifest lives in the database *and* as runs/<run>/<model>/manifest.json."""
    root = tmp_path / "ws"
    client = Client(root, base_env(), extra=["--provider", "simulated"], log_path=tmp_path / "ws.log")
    assert client.kill_at("prepare.before_manifest:1", *PREPARE)
    client.run(*PREPARE)
    check_manifests(root)


# --- a first `run` in a new folder, interrupted; a provider that dies; a restored backup -------------

RUN = (
    "run",
    *PREPARE[1:],
    "--poll-interval",
    "0.05",
    "--create-grace",
    "0.5",
    "--report-format",
    "json",
)


def recorded_runs(root: Path) -> int:
    db = open_db(root)
    if db is None:
        return 0
    try:
        return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # interrupted while the schema was made
        return 0
    finally:
        db.close()


@pytest.mark.slow  # a campaign of processes: tens of seconds
def test_a_first_run_interrupted_with_ctrl_c_at_random_instants_keeps_its_workspace(reference, tmp_path):
    """Issue 23, item 1: Ctrl-C at any instant of a first `run` in a new folder leaves a workspace
    that the same command resumes (once anything is recorded in it), and nothing is sent twice."""
    rng = random.Random(23)
    with SimServer(tmp_path / "sim", SEED, FAULTS, tmp_path / "server.log") as server:
        client = env_client(tmp_path / "ws", server)
        landed, kept = 0, 0
        for _ in range(10):
            delay = rng.uniform(0.05, 0.8)  # into the command's work, which takes a few seconds in all
            code = client.interrupt_after(delay, *RUN)
            if code is None or code == 0:  # it ended by itself first (or the signal found its work done)
                break
            landed += 1
            # 130 from the command; killed by SIGINT when the signal lands after its last line (Python's
            # way with an interrupt at exit): a shell reads both as 128 + 2.
            assert code in (130, -signal.SIGINT), f"Ctrl-C after {delay:.2f}s: exit {code}"
            if recorded_runs(client.root):
                kept += 1
                assert (client.root / "state" / "lexpilot.sqlite3").is_file()
            else:  # nothing recorded yet: the folder is left as it was (it did not exist)
                assert not client.root.exists() or not any((client.root / "requests").rglob("*.jsonl"))
        client.run(*RUN)
        assert landed >= 4 and kept >= 3, (landed, kept)
        check_all(client, reference, server.url)


@pytest.mark.slow  # the provider stays down longer than the SDK's own retries (about 15 s), twice
def test_a_first_run_rides_out_its_provider_dying_and_resumes_after_giving_up(reference, tmp_path):
    """Issue 23, item 1 and 9: the provider is killed in the middle of a first `run`. Brought back
    within --outage-wait, the run carries on by itself; left down, the run stops saying nothing was
    lost, keeps its workspace, and the same command finishes it once the provider is back."""
    state = tmp_path / "sim"
    server = SimServer(state, SEED, FAULTS, tmp_path / "server.log")
    try:
        client = env_client(tmp_path / "ws", server)
        log = tmp_path / "run.log"
        client.log_path = log
        proc = client.start(*RUN, "--outage-wait", "60")
        wait_for_wave(client.root, 2, proc)
        port = server.port
        server.kill()
        time.sleep(20.0)  # longer than the SDK's retries of one call: rounds fail
        server = SimServer(state, SEED, FAULTS, tmp_path / "server.log", port=port)
        assert proc.wait(timeout=120) == 0, log.read_text("utf-8")[-3000:]
        assert "The provider failed this round" in log.read_text("utf-8")
        check_all(client, reference, server.url)

        # Again, in a fresh folder, and this time the provider stays down past --outage-wait.
        server.kill()
        server = SimServer(tmp_path / "sim2", SEED, FAULTS, tmp_path / "server2.log")
        client = env_client(tmp_path / "ws2", server)
        client.log_path = log
        proc = client.start(*RUN, "--outage-wait", "1")
        wait_for_wave(client.root, 3, proc)
        server.kill()
        assert proc.wait(timeout=120) == 1
        tail = log.read_text("utf-8")[-2000:]
        assert "nothing was lost" in tail and "Traceback" not in tail, tail
        assert recorded_runs(client.root) == 2
        server = SimServer(tmp_path / "sim2", SEED, FAULTS, tmp_path / "server2.log")  # on another port
        client.env["OPENAI_BASE_URL"] = server.url
        client.run(*RUN)
        check_all(client, reference, server.url)
    finally:
        server.stop()


def wait_for_wave(root: Path, wave: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before the wave was reached"
        db = open_db(root)
        if db is not None:
            try:
                n = db.execute("SELECT COUNT(*) FROM files WHERE wave >= ? AND status = 'submitted'", (wave,))
                if n.fetchone()[0]:
                    return
            except sqlite3.OperationalError:
                pass
            finally:
                db.close()
        time.sleep(0.02)
    raise AssertionError(f"wave {wave} was never submitted")


@pytest.mark.slow  # a campaign of processes: tens of seconds
def test_a_workspace_restored_from_a_backup_adopts_the_batches_made_after_it(reference, tmp_path):
    """Issue 23, item 9: a backup taken when a wave was compiled but not yet submitted; the live
    workspace then sends it and finishes; restored, the backup finds every batch made since by its
    tag and adopts it: no second batch for any file, records equal to the uninterrupted run."""
    with SimServer(tmp_path / "sim", SEED, FAULTS, tmp_path / "server.log") as server:
        client = env_client(tmp_path / "ws", server)
        client.run(*PREPARE)
        backup = tmp_path / "backup"
        for _ in range(40):
            wave = compiled_unsent(client.root)
            if wave is not None and wave >= 3:
                shutil.copytree(client.root, backup)
                break
            client.run("submit")
            client.run("poll-and-advance")  # polls, ingests, compiles the next wave; sends nothing
            time.sleep(0.05)
        else:
            raise AssertionError("no wave was ever left compiled and unsent")
        client.run(*ADVANCE)
        shutil.rmtree(client.root)
        shutil.copytree(backup, client.root)
        client.run(*ADVANCE)
        check_all(client, reference, server.url)


def compiled_unsent(root: Path) -> int | None:
    """The wave whose files are all compiled and none sent, if there is one."""
    db = open_db(root)
    assert db is not None
    try:
        row = db.execute("SELECT MAX(wave) FROM files").fetchone()
        statuses = {r[0] for r in db.execute("SELECT status FROM files WHERE wave = ?", (row[0],))}
    finally:
        db.close()
    return row[0] if statuses == {"compiled"} else None


@contextlib.contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Callable[[str], None]]:
    """A real file system of `size` bytes at `folder` (tmpfs; needs the right to mount): yields a
    function that grows it, as freeing space would."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small file system here: {mounted.stderr.decode(errors='replace').strip()}")

    def grow(to: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={to}", str(folder)], check=True, capture_output=True)

    try:
        yield grow
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["96k", "420k", "900k", "1400k", "2200k", "3500k"])
def test_a_first_run_on_a_full_disk_says_so_and_resumes_once_there_is_room(reference, tmp_path, size):
    """Issue 23, item 7, on a real file system that fills up: one clear line, no traceback, nothing
    half-written, the workspace kept once it records anything; with room again, the same command
    ends as the uninterrupted run."""
    with (
        SimServer(tmp_path / "sim", SEED, FAULTS, tmp_path / "server.log") as server,
        small_disk(tmp_path / "disk", size) as grow,
    ):
        client = env_client(tmp_path / "disk" / "ws", server)
        client.log_path = None
        argv, env = client.argv(*RUN)
        done = subprocess.run(argv, env=env, capture_output=True, timeout=300, check=False)
        err = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 1, err[-2000:]
        errors = [line for line in err.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and "no space left on the device holding" in errors[0], err[-2000:]
        assert "Traceback" not in err
        print(f"{size}: {errors[0][:160]}; runs recorded: {recorded_runs(client.root)}")
        if recorded_runs(client.root):
            assert (client.root / "state" / "lexpilot.sqlite3").is_file()
        grow("64m")
        client.run(*RUN, timeout=300)
        check_all(client, reference, server.url)
