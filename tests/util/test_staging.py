"""A folder of files written whole or not at all (`util.staging`): what `export` writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lexpilot_batch.util import fileio, staging
from lexpilot_batch.util.staging import staged_folder


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_new_folder_appears_whole_and_an_existing_one_keeps_what_the_write_does_not_touch(tmp_path):
    out = tmp_path / "deep" / "out"
    with staged_folder(out) as staged:
        staged.write(out / "a" / "data.jsonl", b"1\n")
        staged.write(out / "a" / "about.json", b"{}", last=True)
        assert not out.exists()  # nothing there until the block ends
    assert _tree(out) == {"a/data.jsonl": b"1\n", "a/about.json": b"{}"}
    (out / "mine.txt").write_bytes(b"mine")
    (out / "a" / "old.partial.jsonl").write_bytes(b"old")
    with staged_folder(out) as staged:
        staged.write(out / "a" / "data.jsonl", b"2\n")
        staged.remove(out / "a" / "old.partial.jsonl")
        staged.remove(out / "never-there")
    assert _tree(out) == {"a/data.jsonl": b"2\n", "a/about.json": b"{}", "mine.txt": b"mine"}
    assert sorted(p.name for p in tmp_path.joinpath("deep").iterdir()) == ["out"]


def test_an_error_in_the_block_changes_nothing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept").write_bytes(b"kept")
    with pytest.raises(RuntimeError), staged_folder(out) as staged:
        staged.write(out / "kept", b"new")
        raise RuntimeError("half-way")
    assert _tree(out) == {"kept": b"kept"}


def test_a_file_held_open_puts_everything_back(tmp_path, monkeypatch):
    """Windows refuses to rename a file another program holds open: the files already moved
    aside are put back, and the error names the file held."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("a.csv", "b.csv", "c.csv"):
        (out / name).write_bytes(b"old " + name.encode())
    real = os.replace

    def held(src, dst):
        if Path(src) == out / "b.csv":
            raise PermissionError(13, "The process cannot access the file", os.fspath(src), 32, os.fspath(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", held)
    monkeypatch.setattr(fileio, "_REPLACE_PAUSE", 0)
    with pytest.raises(PermissionError) as refused, staged_folder(out) as staged:
        for name in ("a.csv", "b.csv", "c.csv"):
            staged.write(out / name, b"new")
    assert Path(refused.value.filename) == out / "b.csv"
    assert _tree(out) == {name: b"old " + name.encode() for name in ("a.csv", "b.csv", "c.csv")}


def test_killed_between_the_moves_no_marker_describes_files_it_does_not(tmp_path, monkeypatch):
    """A kill (here an exception no handler puts back) at each rename of the commit: the marker
    (`last`) is the first moved away and the last moved in, so it is either the old one beside all
    the old files, absent, or the new one beside all the new files."""
    names = ("d1.jsonl", "d2.jsonl", "d3.jsonl")
    real = fileio.replace
    renames = 2 * (len(names) + 1)  # each old file moved aside, each new one moved in
    for kill_at in range(1, renames + 1):
        out = tmp_path / f"out{kill_at}"
        out.mkdir()
        for name in (*names, "export.json"):
            (out / name).write_bytes(b"old")
        count = 0

        def dying(src: Path, dst: Path, kill_at: int = kill_at) -> None:
            nonlocal count
            count += 1
            if count == kill_at:
                raise SystemExit("killed")
            real(src, dst)

        monkeypatch.setattr(staging, "replace", dying)
        with pytest.raises(SystemExit), staged_folder(out) as staged:
            for name in names:
                staged.write(out / name, b"new")
            staged.write(out / "export.json", b"new", last=True)
        monkeypatch.undo()
        files = _tree(out)
        marker = files.pop("export.json", None)
        assert marker is None or set(files.values()) == {marker}, (kill_at, marker, files)


def test_a_staging_folder_a_killed_write_left_is_removed_by_the_next(tmp_path):
    out = tmp_path / "out"
    left = tmp_path / f".out.0123abcd{fileio.TMP_SUFFIX}"
    (left / "new").mkdir(parents=True)
    with staged_folder(out) as staged:
        staged.write(out / "f", b"1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    inside = out / f".out.4567cdef{fileio.TMP_SUFFIX}"
    (inside / "old").mkdir(parents=True)
    with staged_folder(out) as staged:
        staged.write(out / "f", b"2")
    assert _tree(out) == {"f": b"2"} and not inside.exists()
