"""Where an export's files go: under `--out` all together or not at all (`util.staging`).

An export is a pure function of the database, so nothing is lost by refusing half of one: a full
disk, a file another program holds open or an error half-way leaves `--out` as it was, never a
folder whose `export.json` says complete over files that are not there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.util import fileio
from lexpilot_batch.util.staging import Staged, staged_folder


@contextmanager
def export_folder(out_dir: Path) -> Iterator[Staged]:
    """The files of one export under `out_dir` (`Staged.write`, `Staged.remove`), moved there
    together when the block ends; an operating-system error becomes one message naming the file."""
    out_dir = Path(out_dir)
    try:
        with staged_folder(out_dir) as staged:
            yield staged
    except OSError as exc:
        raise LexpilotError(not_written(out_dir, exc)) from None


def not_written(out_dir: Path, exc: OSError) -> str:
    """The message for an export refused by the system: which file, why, and that `--out` is as it was."""
    name = Path(exc.filename) if exc.filename is not None else out_dir
    advice = f"check that --out {out_dir} is a writable folder with room"
    return f"{fileio.cannot_write(name, exc, advice)}; the export changed nothing under {out_dir}"
