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


def test_a_command_that_locks_while_a_refused_first_command_takes_its_workspace_back_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused first `prepare` takes back what it made holding the lock; the lock file last, and
    only where no database appeared meanwhile. A command that locks the moment it is released makes
    its own workspace there, which stays (it was deleted under it, its commits going to an unlinked
    file)."""
    root = tmp_path / "ws"
    first = Workspace(root)
    first.__enter__()
    assert first.created
    real_release = Workspace._release
    other: dict[str, Workspace] = {}

    def release_then_another_command_locks(self: Workspace) -> None:
        real_release(self)
        if self is first and "next" not in other:
            other["next"] = nxt = Workspace(root)
            nxt.__enter__()
            _write_something(nxt)

    monkeypatch.setattr(Workspace, "_release", release_then_another_command_locks)
    assert first.abandon()
    nxt = other["next"]
    assert (root / "state" / "lexpilot.sqlite3").is_file() and nxt.store.meta("seen_by_test") == "yes"
    nxt.__exit__()
    with Workspace(root, create=False) as again:
        assert again.store.meta("seen_by_test") == "yes"


def test_a_refused_first_command_leaves_a_new_folder_as_it_found_it(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("mine", encoding="utf-8")
    with Workspace(tmp_path / "ws") as ws:
        assert ws.abandon()
    assert [p.name for p in (tmp_path / "ws").iterdir()] == ["notes.txt"]
    with Workspace(tmp_path / "fresh") as ws:
        assert ws.abandon()
    assert not (tmp_path / "fresh").exists()
