"""Compact workspaces: finished waves' request and result files are kept gzip-compressed, the open
wave's stay plain, and everything that reads a workspace gives what it gave uncompressed."""

from __future__ import annotations

import gzip
import threading
import time

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.engine.loop import poll_and_advance
from lexpilot_batch.state import compaction
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import finish, open_session, prepare_runs
from tests.helpers.interrupts import PROMPT, ctrl_c_as_on_windows, needs_sigmask
from tests.helpers.read_back import read_back

LIMIT = 4


def disk(ws: Workspace) -> int:
    return sum(p.stat().st_size for d in (ws.requests_dir, ws.responses_dir) for p in d.rglob("*"))


def test_a_compacted_workspace_reads_as_it_did_uncompressed(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="all", runs=("r1", "r2"), limit=LIMIT, speculate=True)
        for _ in range(100):
            left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0, compact=False)
            if left["in_flight"] == 0 and left["unsubmitted"] == 0:
                break
        session.close()
        assert list(ws.root.rglob("*.gz")) == []
        plain, plain_bytes = read_back(ws, tmp_path / "plain"), disk(ws)
        stats = compaction.compact_finished_waves(ws)
        assert stats.files == len(plain["saved"]) and stats.skipped == []
        assert list(ws.root.rglob("*.jsonl")) == []  # every wave is finished: everything compacted
        packed = read_back(ws, tmp_path / "packed")
        assert compaction.verify(ws) == []
        assert packed["findings"] == plain["findings"] == []
        assert packed == plain  # exports byte for byte, the report, every saved file's bytes
        assert disk(ws) < plain_bytes / 3


def test_the_open_wave_stays_plain_and_finished_ones_hold_their_bytes(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="lca", limit=LIMIT)
        [first] = [ws.path(r[0]) for r in ws.store.conn.execute("SELECT path FROM files")]
        sent = first.read_bytes()
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)  # wave 1 done, 2 compiled
        session.compactor().finish()  # what the worker packed is recorded by the next round, or now
        assert not first.exists() and gzip.decompress(compaction.stored(first).read_bytes()) == sent
        opened = [ws.path(r[0]) for r in ws.store.conn.execute("SELECT path FROM files WHERE wave = 2")]
        assert opened and all(p.exists() and not compaction.stored(p).exists() for p in opened)
        [result] = [ws.path(r[0]) for r in ws.store.conn.execute("SELECT output_path FROM files WHERE wave = 1")]
        assert not result.exists() and compaction.saved_exists(result)
        assert compaction.verify(ws) == []
        finish(ws, session)
        session.close()


def test_doctor_deep_reads_compacted_files_back_and_finds_one_that_changed(tmp_path):
    """A compacted file rewritten with other bytes (still valid gzip) is invisible to a plain
    `doctor`, which only looks for missing files, and found by `doctor --deep`."""
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="lca", limit=LIMIT)
        [first] = [ws.path(r[0]) for r in ws.store.conn.execute("SELECT path FROM files")]
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)  # wave 1 compacted
        session.close()
        assert doctor.diagnose(ws, deep=True) == []
        packed = compaction.stored(first)
        packed.write_bytes(gzip.compress(gzip.decompress(packed.read_bytes()).replace(b"0.7", b"0.9", 1)))
        assert doctor.diagnose(ws) == []
        [finding] = doctor.diagnose(ws, deep=True)
        assert finding.kind == doctor.COMPACTED_DAMAGED and finding.severity == "warning"
        assert finding.targets == (f"{ws.relative(first)}.gz",)


def finish_uncompacted(ws: Workspace) -> None:
    """Run an LCA study in `ws` to its end, compacting nothing."""
    session = open_session(ws)
    prepare_runs(ws, session, stage="lca", limit=LIMIT)
    for _ in range(20):
        left = poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0, compact=False)
        if not left["in_flight"] and not left["unsubmitted"]:
            break
    session.close()


def test_a_file_that_is_not_what_was_compiled_stays_plain_and_a_lost_one_is_reported(tmp_path):
    with Workspace(tmp_path / "ws") as ws:
        finish_uncompacted(ws)
        edited, other = [ws.path(r[0]) for r in ws.store.conn.execute("SELECT path FROM files ORDER BY pk")]
        edited.write_bytes(edited.read_bytes().replace(b'"temperature":0.7', b'"temperature":1.9', 1))
        stats = compaction.compact_finished_waves(ws)
        assert stats.skipped == [ws.relative(edited)] and stats.files >= 3
        assert edited.exists() and not compaction.stored(edited).exists()
        assert compaction.compact_finished_waves(ws).files == 0  # nothing left to do, nothing done twice
        assert doctor.diagnose(ws) == []
        compaction.stored(other).unlink()
        [finding] = doctor.diagnose(ws)
        assert finding.kind == doctor.COMPACTED_MISSING and ws.relative(other) in finding.detail
        assert compaction.verify(ws) == [f"{ws.relative(other)}.gz is gone"]


def test_a_finished_waves_file_gone_before_it_could_be_compacted_is_reported(tmp_path):
    """Deleted by hand while its wave ran: the compactor finds nothing to pack and records nothing;
    doctor still says it is gone (it said 'No problems found')."""
    with Workspace(tmp_path / "ws") as ws:
        finish_uncompacted(ws)
        first = ws.path(ws.store.conn.execute("SELECT path FROM files ORDER BY pk").fetchone()[0])
        first.unlink()
        compaction.compact_finished_waves(ws)
        assert ws.relative(first) not in {r[0] for r in ws.store.conn.execute("SELECT path FROM compacted")}
        [finding] = doctor.diagnose(ws)
        assert finding.kind == doctor.COMPACTED_MISSING and ws.relative(first) in finding.detail


def test_a_compaction_stopped_half_way_is_finished_by_the_next(tmp_path, monkeypatch):
    with Workspace(tmp_path / "ws") as ws:
        finish_uncompacted(ws)
        before = {p: compaction.read_saved(p) for p in compaction.saved_files(ws.root)}
        real_record, real_unlink = compaction._record, compaction.unlink_quietly

        def stop(*args):
            raise KeyboardInterrupt

        monkeypatch.setattr(compaction, "_record", stop)  # the .gz written whole, not recorded
        with pytest.raises(KeyboardInterrupt):
            compaction.compact_finished_waves(ws)
        monkeypatch.setattr(compaction, "_record", real_record)
        monkeypatch.setattr(compaction, "unlink_quietly", lambda path: False)  # recorded, the plain one kept
        compaction.compact_finished_waves(ws)
        monkeypatch.setattr(compaction, "unlink_quietly", real_unlink)
        assert list(ws.root.rglob("*.jsonl")) != []
        compaction.compact_finished_waves(ws)
        assert list(ws.root.rglob("*.jsonl")) == [] and compaction.verify(ws) == []
        assert {p: compaction.read_saved(p) for p in compaction.saved_files(ws.root)} == before


def test_compression_runs_on_a_worker_off_the_critical_path(tmp_path, monkeypatch):
    """The round returns while the worker still compresses the finished wave (held here by an event);
    the next round, or closing the session, records what it packed, from the caller's thread."""
    release = threading.Event()
    threads: list[str] = []
    real_pack = compaction._pack

    def held_pack(*args, **kwargs):
        threads.append(threading.current_thread().name)
        assert release.wait(30)
        return real_pack(*args, **kwargs)

    monkeypatch.setattr(compaction, "_pack", held_pack)
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="lca", limit=LIMIT)
        [first] = [ws.path(r[0]) for r in ws.store.conn.execute("SELECT path FROM files")]
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0)  # returns, worker held
        assert first.exists() and not ws.store.conn.execute("SELECT 1 FROM compacted").fetchone()
        release.set()
        finish(ws, session)
        session.close()
        assert not first.exists() and compaction.saved_exists(first)
        assert threads and all(name.startswith("compaction") for name in threads)
        assert compaction.verify(ws) == []


def test_an_abandoned_worker_leaves_nothing_half_done(tmp_path):
    """Ctrl-C or an error while the worker compresses: it stops at its next chunk, records nothing,
    and the next command packs those files again."""
    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="lca", limit=LIMIT)
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0, compact=False)
        compactor = compaction.Compactor(ws)
        compactor.stop.set()  # as if abandoned the moment it started
        compactor.run()
        compactor.abandon()
        assert not ws.store.conn.execute("SELECT 1 FROM compacted").fetchone()
        assert not list(ws.root.rglob("*.gz"))
        stats = compaction.Compactor(ws)
        stats.run()
        done = stats.finish()
        assert done.files > 0 and compaction.verify(ws) == []
        finish(ws, session)
        session.close()


@needs_sigmask
def test_ctrl_c_while_waiting_for_the_worker_stops_at_once_as_on_windows(tmp_path, monkeypatch):
    """`finish` waits for the worker in steps (`util.waiting`), and Ctrl-C during the wait stops the
    worker at its next chunk rather than waiting out its files: within a second, with Ctrl-C
    delivered as Windows before Python 3.14 delivers it to a bare wait (`helpers.interrupts`).
    Nothing is recorded, and the next command packs those files."""
    real_pack = compaction._pack
    release = threading.Event()

    def slow_pack(ws, rel, expected, stop=None):
        # a file that takes 5 s to pack, looking at `stop` between chunks as `_pack` does
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not release.is_set() and not (stop is not None and stop.is_set()):
            time.sleep(0.02)
        return real_pack(ws, rel, expected, stop)

    with Workspace(tmp_path / "ws") as ws:
        session = open_session(ws)
        prepare_runs(ws, session, stage="lca", limit=LIMIT)
        poll_and_advance(ws, session, do_submit=True, wait=False, poll_interval=0, compact=False)
        monkeypatch.setattr(compaction, "_pack", slow_pack)
        compactor = compaction.Compactor(ws)
        compactor.run()
        try:
            with pytest.raises(KeyboardInterrupt), ctrl_c_as_on_windows() as pressed:
                compactor.finish()
            assert pressed.since() < PROMPT
        finally:
            release.set()
        assert compactor.pool is None and compactor.pending is None
        assert not ws.store.conn.execute("SELECT 1 FROM compacted").fetchone()
        assert not list(ws.root.rglob("*.gz"))
        monkeypatch.setattr(compaction, "_pack", real_pack)
        again = compaction.Compactor(ws)
        again.run()
        assert again.finish().files > 0 and compaction.verify(ws) == []
        session.close()
