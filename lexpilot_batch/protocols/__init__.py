"""The benchmark's tasks, each a pure per-case state machine (see `base`)."""

from __future__ import annotations

from lexpilot_batch.protocols.base import Protocol
from lexpilot_batch.protocols.lca import LCA

PROTOCOLS: dict[str, Protocol] = {p.task: p for p in (LCA(),)}
