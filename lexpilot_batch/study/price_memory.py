"""The prices a workspace remembers: a `--prices FILE` given to `prepare` or `run` is kept in the
workspace (its contents, checked by `providers.prices.load_prices`), with the other choices of how
waves travel (`--tail`, `--max-premium`: `engine.session` writes them all in one entry), so that
`status`, `report`, estimates, `--tail auto`'s premium and later commands price the study with it
without being told again; a `--prices` given to any command wins for that command, and one given
to `prepare` or `run` again replaces the kept one. Kept whole, not as a path: a file edited or
moved later does not change what the study was priced with.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from lexpilot_batch.state.workspace import Workspace

if TYPE_CHECKING:
    from lexpilot_batch.study.runs import RunSpec

# The workspace's meta entry of how waves travel and the prices they are weighed at.
TAIL_CHOICES_KEY = "tail_policy"


def remembered_prices(ws: Workspace) -> dict | None:
    """The prices the workspace keeps; None without any."""
    return json.loads(ws.store.meta(TAIL_CHOICES_KEY) or "{}").get("prices")


def prices_for(ws: Workspace, given: dict | None) -> dict | None:
    """The prices a command uses: those it was given, else those the workspace keeps."""
    return given if given is not None else remembered_prices(ws)


def study_models(ws: Workspace | None, spec: RunSpec | None = None) -> list[str]:
    """Every model the workspace's runs (and `spec`'s, about to be prepared) use, in every role."""
    models: list[str] = []
    if spec is not None:
        models += [*spec.models, spec.settings.user_model, spec.settings.judge_model]
    if ws is not None:
        for (manifest,) in ws.store.conn.execute("SELECT manifest FROM runs"):
            m = json.loads(manifest)
            models += [m["model"], m["user_model"], m["judge_model"]]
    return list(dict.fromkeys(models))
