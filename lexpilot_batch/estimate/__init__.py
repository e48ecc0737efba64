"""Estimates before anything is sent: the next wave, a projection to the end, and their cost.

`dry_run_prepare` says what `prepare` would compile and what the runs will need in all, writing
nothing (`prepare --dry-run`); `estimate_workspace` says the same for the workspace as it stands
(`status --estimate`). Both read the database only, never a provider.

- `assumptions`: the result (`Estimate` and its parts) and the default assumptions;
- `state`: the workspace read without writing, and the runs a dry run would add to it;
- `projection`: one (run, case) played forward to its end;
- `calibration`: the assumptions measured from the workspace's answered requests;
- `build`: the entry points, the next wave, the projection over every (run, case), and cost;
- `tail`: the batch round trips with and without `--tail-sync N` or `--tail auto`, and their premium;
- `render`: the terminal table.
"""

from lexpilot_batch.estimate.assumptions import (
    CHARS_PER_TOKEN,
    CLARIFY_PROBABILITY,
    COMPLETION_TOKENS,
    RESPONSE_CHARS,
    Assumptions,
    Estimate,
    RoleProjection,
    RoleWave,
    RunProjection,
    Span,
    WaveRange,
)
from lexpilot_batch.estimate.build import dry_run_prepare, estimate_workspace
from lexpilot_batch.estimate.calibration import MIN_LABELS
from lexpilot_batch.estimate.render import render
from lexpilot_batch.estimate.state import open_readonly

__all__ = [
    "CHARS_PER_TOKEN",
    "CLARIFY_PROBABILITY",
    "COMPLETION_TOKENS",
    "MIN_LABELS",
    "RESPONSE_CHARS",
    "Assumptions",
    "Estimate",
    "RoleProjection",
    "RoleWave",
    "RunProjection",
    "Span",
    "WaveRange",
    "dry_run_prepare",
    "estimate_workspace",
    "open_readonly",
    "render",
]
