"""`engine/compiler.py`: every due request of the workspace compiled into one wave of files, in
one transaction, the same bytes from the same database state.

A compile that fails leaves no row, and the next compile writes what it would have; a wave that
nothing has left the workspace of is compiled again identically; while a wave is under way
nothing is compiled; a compile with nothing due leaves no wave. Against the simulated session's
routes (compiling needs no key and no server).
"""

from __future__ import annotations

from typing import Any

import pytest

from lexpilot_batch.engine import compiler, request_files
from lexpilot_batch.engine.compiler import compile_wave
from lexpilot_batch.engine.request_files import WaveWriter
from lexpilot_batch.state.states import FileState, ThreadState
from lexpilot_batch.state.waves import set_file
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import finish, open_session, prepare_runs, request_lines, thread_counts


def counts(ws: Workspace) -> dict[str, int]:
    db = ws.store.conn
    return {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("waves", "files", "requests")}


def request_bytes(ws: Workspace) -> dict[str, bytes]:
    return {ws.relative(p): p.read_bytes() for p in sorted(ws.requests_dir.rglob("*.jsonl"))}


def test_a_compile_that_fails_records_nothing_and_the_next_writes_the_same_files(ws, session, monkeypatch):
    prepare_runs(ws, session, limit=2)
    with ws.store.transaction() as db:  # as if nothing had been compiled yet: threads only
        db.execute("DELETE FROM requests")
        db.execute("DELETE FROM files")
        db.execute("DELETE FROM waves")
    for p in ws.requests_dir.rglob("*.jsonl"):
        p.unlink()
    written: dict[str, bytes] = {}
    real_close = WaveWriter.close

    def close_then_die(self: WaveWriter) -> list[str]:
        real_close(self)
        written.update(request_bytes(ws))
        raise KeyboardInterrupt  # killed after the files were written, before the commit

    monkeypatch.setattr(WaveWriter, "close", close_then_die)
    with pytest.raises(KeyboardInterrupt):
        compile_wave(ws, session.route)
    assert written and counts(ws) == {"waves": 0, "files": 0, "requests": 0}
    assert request_bytes(ws) == {}  # what it finished went with it: no file that no row names
    monkeypatch.setattr(WaveWriter, "close", real_close)

    result = compile_wave(ws, session.route)
    assert result.wave == 1 and sorted(result.files) == sorted(written) and result.requests == 4
    assert request_bytes(ws) == written  # byte for byte what the killed compile wrote
    assert counts(ws) == {"waves": 1, "files": len(written), "requests": 4}


def test_a_compile_that_fails_while_writing_leaves_no_partial_file(ws, session, monkeypatch):
    prepare_runs(ws, session, limit=1)
    before = request_bytes(ws)
    real_request = compiler._request
    calls = [0]

    def second_fails(*args: Any) -> tuple:
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("disk gone")
        return real_request(*args)

    monkeypatch.setattr(compiler, "_request", second_fails)
    with pytest.raises(RuntimeError):
        prepare_runs(ws, session, limit=1)  # compiles wave 1 again, dies halfway
    monkeypatch.setattr(compiler, "_request", real_request)
    assert counts(ws) == {"waves": 1, "files": 1, "requests": 2}  # the earlier compile, untouched
    assert request_bytes(ws) == before
    assert not [p for p in ws.root.rglob(".building-*")]  # the writer's unfinished files


def test_a_file_whose_last_chunk_fails_to_write_leaves_no_partial_file(ws, session, monkeypatch):
    """The writer thread fails on a file's last chunk (a disk filling up), which `finish` raises as
    the file is closed: the compile rolls back and takes that file's temporary name with it."""
    prepare_runs(ws, session, limit=1)
    before = request_bytes(ws)

    def disk_full(self: request_files._Sink, chunk: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(request_files._Sink, "_store", disk_full)
    with pytest.raises(OSError, match="No space left"):
        prepare_runs(ws, session, limit=1)  # compiles wave 1 again: every file's one chunk fails
    monkeypatch.undo()
    assert counts(ws) == {"waves": 1, "files": 1, "requests": 2}  # the earlier compile, untouched
    assert request_bytes(ws) == before
    assert not [p for p in ws.root.rglob(".building-*")]


def test_nothing_is_compiled_while_a_wave_is_under_way(ws, session):
    first = prepare_runs(ws, session, limit=1)
    (path,) = first.compiled.files
    set_file(ws, 1, status=FileState.UPLOADED)
    result = compile_wave(ws, session.route)
    assert result.in_flight and result.wave is None and not result.compiled
    assert list(request_lines(ws)) == [path] and counts(ws)["waves"] == 1


def test_a_compile_with_nothing_due_leaves_no_wave(ws, session):
    prepare_runs(ws, session, limit=1)
    finish(ws, session)
    assert set(thread_counts(ws)) == {ThreadState.DONE}
    waves = counts(ws)["waves"]
    result = compile_wave(ws, session.route)
    assert result.wave is None and not result.compiled and not result.in_flight
    assert counts(ws)["waves"] == waves


# --- moved from engine/test_loop.py ----------------------------------------------------------------


def test_prepare_twice_before_submit_compiles_the_same_wave(ws, session):
    first = prepare_runs(ws, session, stage="lca")
    files_before = request_lines(ws)
    second = prepare_runs(ws, session, stage="lca")
    assert second.compiled.wave == first.compiled.wave == 1
    assert request_lines(ws) == files_before
    # A second run joins the same wave and the same file: one batch per model per wave.
    third = prepare_runs(ws, session, stage="lca", runs=("r2",))
    assert third.compiled.wave == 1 and third.compiled.requests == 2 * first.compiled.requests
    assert len(request_lines(ws)) == 1


def test_sharding_respects_request_limit(ws):
    session = open_session(ws, max_requests=5)
    try:
        result = prepare_runs(ws, session, stage="lca")
        files = request_lines(ws)
        assert len(files) == -(-result.compiled.requests // 5)
        assert all(len(lines) <= 5 for lines in files.values())
        finish(ws, session)
        assert thread_counts(ws) == {"done": result.compiled.requests}
    finally:
        session.close()
