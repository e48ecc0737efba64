"""The benchmark's tasks, each a pure per-case state machine (see `base`)."""

from __future__ import annotations

from lexpilot_batch.benchmark.protocols.base import Protocol
from lexpilot_batch.benchmark.protocols.dcg import DCG
from lexpilot_batch.benchmark.protocols.interaction import InteractionLJP
from lexpilot_batch.benchmark.protocols.lca import LCA
from lexpilot_batch.benchmark.protocols.ljp import DirectLJP, GoldLJP
from lexpilot_batch.errors import ConfigError

PROTOCOLS: dict[str, Protocol] = {p.task: p for p in (LCA(), DCG(), DirectLJP(), GoldLJP(), InteractionLJP())}

# `--stage` name -> the tasks it prepares. `ljp-interaction` needs no `lca` thread of its own: its
# thread requests the LCA underspecified steps itself, under the keys the LCA thread would use.
# `ljp` is the three LJP setups together, as the original `eval_LJP.py` runs them.
STAGES: dict[str, tuple[str, ...]] = {
    **{p.stage: (p.task,) for p in PROTOCOLS.values()},
    "ljp": tuple(p.task for p in PROTOCOLS.values() if p.stage.startswith("ljp-")),
    "all": tuple(PROTOCOLS),
}


def tasks_for_stage(stage: str) -> tuple[str, ...]:
    """The tasks a `--stage` prepares."""
    if stage not in STAGES:
        raise ConfigError(f"--stage must be one of {', '.join(STAGES)}, not {stage!r}")
    return STAGES[stage]
