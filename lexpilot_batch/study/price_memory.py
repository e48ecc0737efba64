"""The prices a workspace remembers: a `--prices FILE` given to `prepare` or `run` is kept in the
workspace (its contents, with the file's path), so that `status`, `report`, estimates and a later
`run` price the study with it without being told again; a `--prices` given to any command wins
for that command, and one given to `prepare` or `run` again replaces the kept one.

Kept whole, not as a path: a file edited or moved later does not change what the runs were
priced with, and what is kept is what `providers.prices.load_prices` checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from lexpilot_batch.state.workspace import Workspace

_META = "prices"


def remember_prices(ws: Workspace, prices: Mapping[str, object], path: Path) -> bool:
    """Keep `prices` (read from `path`) for the workspace; whether they differ from those kept."""
    value = json.dumps({"path": str(path), "prices": prices}, ensure_ascii=False, sort_keys=True)
    if ws.store.meta(_META) == value:
        return False
    ws.store.set_meta(_META, value)
    return True


def remembered_prices(ws: Workspace) -> tuple[dict | None, str | None]:
    """The prices the workspace keeps and the file they came from; (None, None) without any."""
    stored = ws.store.meta(_META)
    if stored is None:
        return None, None
    kept = json.loads(stored)
    return kept["prices"], kept["path"]


def prices_for(ws: Workspace, given: dict | None) -> dict | None:
    """The prices a command uses: those it was given, else those the workspace keeps."""
    return given if given is not None else remembered_prices(ws)[0]
