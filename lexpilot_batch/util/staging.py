"""A folder of files written whole or not at all: what `export` writes (`staged_folder`).

Each file of `fileio.write_atomic` is whole, but a set of them written one by one is not: a full
disk half-way left some files new, some old or missing, and an `export.json` saying the run was
complete. Here every file is first written under a staging folder, named `.<target>.<random>.tmp`,
and only when all are written are they moved into the target, by renames, which need no space:

- a target that does not exist yet: the staging folder is made beside it and renamed to it, one
  step, so that the target is there whole or not at all;
- a target folder that exists (an earlier export, other runs' files, the user's own): the
  staging folder is made inside it (the same file system, whatever is mounted where), the files
  this write replaces or removes are first moved aside into it (the `last` ones, the markers that
  say a set is complete, first of all), then the new files are moved in (the `last` ones last),
  then what was moved aside is deleted. Other files of the target are left as they are.

Any failure before the moves (a full disk, an error in the caller) removes the staging folder and
changes nothing in the target. A file that cannot be moved aside (Windows refuses to rename a
file another program holds open: a spreadsheet showing `cases.csv`) puts back what was moved,
so that the target is as it was, and is reported naming that file. Killed outright between the
moves (SIGKILL, a power cut), a target can hold part of the new files and part of the old, but
never a `last` file over files it does not describe: markers are moved away first and in last.
The staging folder such a kill leaves is removed by the next write to the same target.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lexpilot_batch.util.fileio import TMP_SUFFIX, replace, write_atomic

_NEW = "new"  # under the staging folder: the files being written, as they will be in the target
_OLD = "old"  # the target's files this write replaces or removes, moved aside until it is done


class Staged:
    """The files of one write into `target`: `write` each, `remove` those it takes away; they
    reach the target together when `staged_folder`'s block ends without an error."""

    def __init__(self, target: Path) -> None:
        self.target = target
        place = target if target.is_dir() else target.parent
        self.folder = place / f".{target.name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}"
        self._written: dict[Path, bool] = {}  # relative path -> is it a `last` file
        self._removed: set[Path] = set()

    def write(self, path: Path, data: bytes, *, last: bool = False) -> None:
        """Write `path` (a file under the target) into the staging folder; `last` for a file that
        says the others are complete (`export.json`): it never stands beside files it does not describe."""
        relative = self._relative(path)
        try:
            write_atomic(self.folder / _NEW / relative, data)
        except OSError as exc:  # told of the file asked for, not of its staged copy
            exc.filename, exc.filename2 = str(path), None
            raise
        self._written[relative] = last
        self._removed.discard(relative)

    def remove(self, path: Path) -> None:
        """Take `path` (a file under the target, if it is there) away when the write is done."""
        relative = self._relative(path)
        if relative not in self._written:
            self._removed.add(relative)

    def _relative(self, path: Path) -> Path:
        relative = Path(path).relative_to(self.target)
        if not relative.parts or ".." in relative.parts:
            raise ValueError(f"{path} is not a file under {self.target}")
        return relative

    def commit(self) -> None:
        if not self.target.exists():
            if not self._written:
                return
            replace(self.folder / _NEW, self.target)
            return
        # Markers first out and last in: no `last` file ever stands beside files it does not describe.
        touched = sorted({*self._written, *self._removed}, key=lambda p: (not self._written.get(p, False), str(p)))
        moved: list[Path] = []
        try:
            for relative in touched:
                if (self.target / relative).is_file():
                    aside = self.folder / _OLD / relative
                    aside.parent.mkdir(parents=True, exist_ok=True)
                    replace(self.target / relative, aside)
                    moved.append(relative)
        except OSError:
            self._put_back(moved, placed=[])
            raise
        placed: list[Path] = []
        try:
            for relative in sorted(self._written, key=lambda p: (self._written[p], str(p))):
                (self.target / relative).parent.mkdir(parents=True, exist_ok=True)
                replace(self.folder / _NEW / relative, self.target / relative)
                placed.append(relative)
        except OSError:
            self._put_back(moved, placed)
            raise

    def _put_back(self, moved: list[Path], placed: list[Path]) -> None:
        """Undo a commit that failed half-way: the new files taken out again, the old ones put back."""
        for relative in placed:
            (self.target / relative).unlink(missing_ok=True)
        for relative in moved:
            replace(self.folder / _OLD / relative, self.target / relative)

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


@contextmanager
def staged_folder(target: Path) -> Iterator[Staged]:
    """Files written under `target` all together or not at all (module docstring). A staging
    folder an earlier write into `target` left (killed outright) is removed first."""
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(20, "not a folder", str(target))
    for place in (target, target.parent):
        for stale in place.glob(f".{_escaped(target.name)}.*{TMP_SUFFIX}") if place.is_dir() else ():
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
    staged = Staged(target)
    try:
        yield staged
        staged.commit()
    finally:
        staged.discard()


def _escaped(name: str) -> str:
    """`name` as a glob pattern that matches only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)
