"""`state/instances.py`: which copy of a workspace a folder is. A folder first opened for writing gets
an instance; copied elsewhere (`cp -r`, a backup restored beside it, another machine), it gets a new
one the first time it is opened there, recorded with the instance it was copied from; moved, renamed,
or restored in its own place, it keeps its own; `doctor --claim-copy` makes a new one whatever."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lexpilot_batch import doctor
from lexpilot_batch.state import instances
from lexpilot_batch.state.instances import Place, is_copy
from lexpilot_batch.state.workspace import Workspace


def instance_of(root: Path) -> tuple[str, str, dict]:
    """The folder's workspace id, instance and its record, as a command that writes finds them."""
    with Workspace(root) as ws:
        record = instances.current(ws.store.conn)
        assert record is not None
        return ws.workspace_id, ws.instance_id, record


def test_a_new_workspace_is_the_first_instance_and_keeps_it(tmp_path):
    _, first, record = instance_of(tmp_path / "ws")
    assert len(first) == 16 and record["why"] == "first" and record["parent"] is None
    assert instance_of(tmp_path / "ws")[1] == first


def test_a_copy_beside_it_is_a_new_instance_of_the_same_workspace(tmp_path):
    workspace, original, _ = instance_of(tmp_path / "ws")
    shutil.copytree(tmp_path / "ws", tmp_path / "copy")
    same_workspace, copy, record = instance_of(tmp_path / "copy")
    assert same_workspace == workspace and copy != original  # the same requests, another copy
    assert (record["why"], record["parent"]) == ("copy", original)
    assert instance_of(tmp_path / "copy")[1] == copy  # once
    assert instance_of(tmp_path / "ws")[1] == original  # the original is left as it was


def test_a_moved_workspace_and_a_backup_restored_in_its_place_keep_their_instance(tmp_path):
    _, original, _ = instance_of(tmp_path / "ws")
    (tmp_path / "ws").rename(tmp_path / "moved")  # the same database file, elsewhere
    assert instance_of(tmp_path / "moved")[1] == original
    shutil.copytree(tmp_path / "moved", tmp_path / "backup")
    shutil.rmtree(tmp_path / "moved")
    shutil.copytree(tmp_path / "backup", tmp_path / "moved")  # restored where it was last opened
    assert instance_of(tmp_path / "moved")[1] == original


def test_a_read_only_opening_makes_no_instance(tmp_path):
    _, original, _ = instance_of(tmp_path / "ws")
    shutil.copytree(tmp_path / "ws", tmp_path / "copy")
    with Workspace(tmp_path / "copy", writable=False) as ws:
        assert ws.instance_id == original  # found a copy only by a command that writes
    assert instance_of(tmp_path / "copy")[1] != original


@pytest.mark.parametrize(
    ("was", "now", "copy"),
    [
        (Place("m", "/a", (1, 2)), Place("m", "/a", (1, 2)), False),
        (Place("m", "/a", (1, 2)), Place("m", "/a", (1, 9)), False),  # restored in its place
        (Place("m", "/a", (1, 2)), Place("m", "/b", (1, 2)), False),  # moved
        (Place("m", "/a", (1, 2)), Place("n", "/x", (1, 2)), False),  # the same file, from another machine
        (Place("m", "/a", (1, 2)), Place("m", "/b", (1, 9)), True),  # cp -r
        (Place("m", "/a", (1, 2)), Place("n", "/a", (7, 2)), True),  # a colleague's copy at the same path
        (Place("m", "/a", None), Place("m", "/b", None), True),  # no file identity: the folder tells
        (Place("m", "/a", None), Place("m", "/a", None), False),
    ],
)
def test_what_is_a_copy(was, now, copy):
    assert is_copy(was, now) is copy


def test_a_place_is_read_with_calls_every_platform_has(tmp_path):
    """`os.stat`'s st_dev and st_ino are the volume serial and file index on Windows (CPython's
    `os.stat`); a file system giving none (0) leaves the folder to tell."""
    db = tmp_path / "db"
    db.write_bytes(b"x")
    place = Place.of(tmp_path, db)
    st = os.stat(db)
    assert place.file == ((st.st_dev, st.st_ino) if st.st_ino else None)
    assert place.folder == os.path.normcase(str(tmp_path)) and Place.from_json(place.to_json()) == place
    assert Place.of(tmp_path, tmp_path / "missing").file is None
    assert Place.from_json("{not json") is None


def test_doctor_claim_copy_gives_the_folder_an_instance_of_its_own(tmp_path):
    _, original, _ = instance_of(tmp_path / "ws")
    report = doctor.check(tmp_path / "ws", claim_copy=True)
    _, claimed, record = instance_of(tmp_path / "ws")
    assert claimed != original and (record["why"], record["parent"]) == ("claimed", original)
    assert report.claimed is not None and claimed in report.claimed
    assert doctor.render_report(report).startswith("This folder is now a copy of its own")


def test_the_command_line_claims_a_copy(tmp_path):
    _, original, _ = instance_of(tmp_path / "ws")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LEXPILOT_"))}
    done = subprocess.run(
        [sys.executable, "-m", "lexpilot_batch", "doctor", "--claim-copy"],
        cwd=tmp_path / "ws",
        env=env | {"PYTHONIOENCODING": "utf-8"},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    _, claimed, _ = instance_of(tmp_path / "ws")
    assert done.returncode == 0 and claimed != original, done
    assert done.stdout.startswith(f"This folder is now a copy of its own (instance {claimed}, was {original})")
