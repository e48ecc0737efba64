"""Writing request files: the compiler's waits for the background writer give way to Ctrl-C."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from lexpilot_batch.engine import request_files
from tests.helpers.interrupts import PROMPT, ctrl_c_as_on_windows, needs_sigmask


@needs_sigmask
@pytest.mark.parametrize("end", ["finish", "discard"])
def test_ctrl_c_while_a_chunk_is_written_is_acted_on_at_once_as_on_windows(
    end: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk that takes long to write (a slow or network disk): waiting for it is in steps
    (`util.waiting`), so Ctrl-C, delivered as Windows before Python 3.14 delivers it to a bare wait
    (`helpers.interrupts`), is acted on within a second."""
    release = threading.Event()
    real_store = request_files._Sink._store

    def slow_store(self: request_files._Sink, chunk: bytes) -> None:
        release.wait(5)
        real_store(self, chunk)

    monkeypatch.setattr(request_files._Sink, "_store", slow_store)
    pool = ThreadPoolExecutor(max_workers=1)
    sink = request_files._Sink(tmp_path / "f.jsonl", pool)
    sink.write(b"x" * sink.CHUNK)  # handed to the writer, which takes its time
    try:
        with pytest.raises(KeyboardInterrupt), ctrl_c_as_on_windows() as pressed:
            sink.finish() if end == "finish" else sink.discard()
        assert pressed.since() < PROMPT
    finally:
        release.set()
        pool.shutdown(wait=True)
        sink.fh.close()
    assert (tmp_path / "f.jsonl").stat().st_size == sink.CHUNK  # the chunk in hand was written whole
