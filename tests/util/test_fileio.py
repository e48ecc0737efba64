"""Whole-or-nothing writes, also where Windows refuses to replace a file someone holds open."""

from __future__ import annotations

import os

import pytest

from lexpilot_batch.util import fileio
from lexpilot_batch.util.fileio import file_sha256, write_atomic


def test_write_atomic_writes_the_whole_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "deep" / "f.jsonl"
    write_atomic(target, "中文\n".encode())
    write_atomic(target, b"second")
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.jsonl"]
    assert file_sha256(target) == "16367aacb67a4a017c8da8ab95682ccb390863780f7114dda0a0e0c55644c7c4"
    assert file_sha256(tmp_path / "missing") is None


def test_a_replace_refused_for_a_moment_is_retried(tmp_path, monkeypatch):
    refusals = iter([PermissionError("in use"), PermissionError("in use")])
    real = os.replace

    def replace(src, dst):
        error = next(refusals, None)
        if error is not None:
            raise error
        real(src, dst)

    monkeypatch.setattr(fileio.os, "replace", replace)
    monkeypatch.setattr(fileio, "_REPLACE_PAUSE", 0)
    write_atomic(tmp_path / "f", b"data")
    assert (tmp_path / "f").read_bytes() == b"data"


def test_a_replace_refused_for_good_raises_and_keeps_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "f"
    target.write_bytes(b"old")

    def replace(src, dst):
        raise PermissionError("in use")

    monkeypatch.setattr(fileio.os, "replace", replace)
    monkeypatch.setattr(fileio, "_REPLACE_PAUSE", 0)
    with pytest.raises(PermissionError):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]
