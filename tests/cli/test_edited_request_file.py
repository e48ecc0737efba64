"""A request file edited by hand before `submit` (issue 48, point 8): `doctor` names it, and
`submit` compiles its unsent wave again from the workspace's records, sends that, and says so."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from lexpilot_batch.cli import app
from lexpilot_batch.state.workspace import Workspace
from lexpilot_batch.util.fileio import file_sha256

SIM = ["--provider", "simulated", "--sim-faults", "latency=0"]


def test_submit_says_an_edited_file_was_compiled_again_and_doctor_named_it_before(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    runner = CliRunner()
    args = ["--run-id", "r1", "--model", "sim-a", "--stage", "lca", "--limit", "1"]
    assert runner.invoke(app, ["prepare", *args, *SIM, "--root", str(root)]).exit_code == 0
    with Workspace(root, writable=False) as ws:
        (rel, compiled) = ws.store.conn.execute("SELECT path, sha256 FROM files").fetchone()
        path = ws.path(rel)
    path.write_bytes(path.read_bytes().replace("请".encode(), "您".encode(), 1))  # a hand edit

    doctor = runner.invoke(app, ["doctor", "--root", str(root)])
    assert rel in doctor.output and "changed on disk" in doctor.output and "recompiles it" in doctor.output

    sent = runner.invoke(app, ["submit", *SIM, "--root", str(root)])
    assert sent.exit_code == 0, sent.output
    said = " ".join(sent.output.split())
    assert f"Request file(s) changed on disk since compiling: {rel}." in said
    assert "the edits were not sent" in said and "Submitted 1 file(s)" in said
    assert file_sha256(path) == compiled  # what went is what was compiled, byte for byte
