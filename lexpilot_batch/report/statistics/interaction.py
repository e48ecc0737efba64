"""Interaction statistics per group: how Interaction LJP consultations ended (the round of the
judgment, or a forced final prediction) and how many new responses they took, and DCG success by
round. Each is a share (or mean) within each run, then its mean and sample SD over runs, like the
metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from lexpilot_batch.benchmark import metrics
from lexpilot_batch.benchmark.metrics import Metric
from lexpilot_batch.benchmark.protocols.dcg import ON_TARGET
from lexpilot_batch.benchmark.protocols.interaction import STOP_REASONS
from lexpilot_batch.benchmark.tasks import TASKS, responses_used
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.document import RunResults

DCG_ROUNDS = ("1", "2")


def _stat(per_run: dict[str, Metric]) -> dict:
    mean, sd = metrics.mean_sd(per_run.values())
    return {"mean": mean, "sd": sd, "n_defined": metrics.n_defined(per_run.values()), "per_run": per_run}


def _records(run: RunResults, task: str, read: Callable[[dict], Any]) -> list[Any]:
    try:
        return [read(record) for _, record in run.tasks[task].records]
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise LexpilotError(
            f"Cannot read the interaction statistics of task {task} of run {run.run_id} (model {run.model}): "
            f"{detail}. The stored records are not in the shape the protocol writes; re-ingest the run "
            "or report this as a bug."
        ) from exc


def interaction_stats(runs: list[RunResults]) -> dict:
    """The group's `interaction` JSON (see `report.document`); tasks no run has are left out."""
    out: dict[str, dict] = {}
    present = [run for run in runs if "ljp_interaction" in run.tasks]
    if present:
        n: dict[str, int] = {}
        shares: dict[str, dict[str, Metric]] = {reason: {} for reason in STOP_REASONS}
        responses: dict[str, Metric] = {}
        for run in present:
            stops = _records(run, "ljp_interaction", lambda r: (r["stop_reason"], responses_used(r["stop_reason"])))
            n[run.run_id] = len(stops)
            counts = Counter(reason for reason, _ in stops)
            for reason in STOP_REASONS:
                shares[reason][run.run_id] = metrics.ratio(counts[reason], len(stops))
            responses[run.run_id] = metrics.ratio(sum(k for _, k in stops), len(stops))
        out["ljp_interaction"] = {
            "n": n,
            "stop_reasons": {reason: _stat(shares[reason]) for reason in STOP_REASONS},
            "responses": _stat(responses),
        }
    present = [run for run in runs if "dcg" in run.tasks]
    if present:
        n = {}
        by_round: dict[str, dict[str, Metric]] = {k: {} for k in DCG_ROUNDS}
        for run in present:
            decisions = _records(run, "dcg", lambda r: _decisions(r))
            n[run.run_id] = len(decisions)
            for k in DCG_ROUNDS:
                won = sum(ON_TARGET in d[: int(k)] for d in decisions)
                by_round[k][run.run_id] = metrics.ratio(won, len(decisions))
        out["dcg"] = {"n": n, "success_by_round": {k: _stat(by_round[k]) for k in DCG_ROUNDS}}
    return out


def _decisions(record: dict) -> list[str]:
    decisions = TASKS["dcg"].scored(record)["decisions"]  # a whole record or its scored fields
    if len(decisions) != len(DCG_ROUNDS):
        raise ValueError(f"a DCG record has {len(decisions)} round decisions, not {len(DCG_ROUNDS)}")
    return decisions
