"""`state/workspace.py`: two commands making the same new workspace at once. The one that loses the
race for the writer's lock is refused and takes nothing back: the winner's workspace stays whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from lexpilot_batch.errors import WorkspaceBusy
from lexpilot_batch.state.workspace import Workspace


def _write_something(ws: Workspace) -> None:
    with ws.store.transaction() as db:
        db.execute("INSERT INTO meta VALUES ('seen_by_test', 'yes')")


def test_a_command_that_loses_the_lock_on_a_new_workspace_leaves_the_winners_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    winner = Workspace(root)
    loser = Workspace(root)
    real_open = Workspace._open

    def open_after_the_winner(self: Workspace) -> None:
        if self is loser:  # it looked before the winner made the database, and locks after it
            winner.__enter__()
            _write_something(winner)
        real_open(self)

    monkeypatch.setattr(Workspace, "_open", open_after_the_winner)
    with pytest.raises(WorkspaceBusy):
        loser.__enter__()
    assert (root / "state" / "lexpilot.sqlite3").is_file()
    assert winner.store.meta("seen_by_test") == "yes"
    winner.__exit__()
    with Workspace(root, create=False) as again:
        assert again.store.meta("seen_by_test") == "yes"


def test_a_command_that_locks_a_workspace_another_made_meanwhile_does_not_own_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    late = Workspace(root)
    real_open = Workspace._open

    def open_after_another_command(self: Workspace) -> None:
        if self is late:  # another command made the workspace and finished before this one locked
            monkeypatch.setattr(Workspace, "_open", real_open)
            with Workspace(root) as other:
                _write_something(other)
        real_open(self)

    monkeypatch.setattr(Workspace, "_open", open_after_another_command)
    with late:
        assert not late.created
        assert not late.abandon()  # even where nothing it knows of is recorded: not its to take back
    assert (root / "state" / "lexpilot.sqlite3").is_file()
