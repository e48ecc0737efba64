"""The report's data: the runs it is built from (`RunResults`) and the JSON shape it promises (`Report`).

The JSON shape (`build_report`), stable and validated against `Report` before it is returned:

    {"groups": [{
        "model", "user_model", "judge_model", "group_key",
        "runs": [run ids], "n_runs": int, "settings": {...},
        "bundled_sample": bool (the runs used the bundled sample dataset, not a user-supplied one),
        "tasks": {task: {
            "overall":  {metric: {"mean", "sd", "n_defined", "per_run": {run_id: value}}},
            "by_class": {class: {metric: {...same...}}},
            "n":        {run_id: records scored (histories for lca, cases for dcg,
                         claims for ljp_*)},
            "partial":  bool,
            "missing":  {run_id: [case numbers not finished]},
            "failed":   {run_id: [case numbers whose thread failed]}}},
        "usage": {"roles": {role: {"requests", "prompt_tokens", "completion_tokens",
                                   "cost_usd"}},
                  "total": {...same four keys...},
                  "batch_discount": float | null}}]}

Undefined metric values are `null`. Floats keep full precision in JSON and CSV; the text formats
show fractions (not percentages) with 4 decimals. Groups are sorted by (model, user model, judge
model, group key), runs by run id, tasks in benchmark order, classes by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

# --- Inputs ----------------------------------------------------------------------------------


@dataclass
class TaskRecords:
    """One task of one run: the scored records with their cause class, and what is not scored.

    `missing` are case numbers whose thread has not finished; `failed` those whose thread failed.
    Either makes the task partial.
    """

    records: list[tuple[str, dict]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass
class RunResults:
    """Everything the report needs from one run (run id, evaluated model)."""

    run_id: str
    model: str
    user_model: str
    judge_model: str
    group_key: str
    settings: dict = field(default_factory=dict)
    tasks: dict[str, TaskRecords] = field(default_factory=dict)
    # role -> backend -> {requests, prompt_tokens, completion_tokens}
    usage: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    # The run's dataset is the bundled sample: a demonstration, not a benchmark result.
    bundled_sample: bool = False


# --- The JSON shape --------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricSummary(_Strict):
    mean: float | None
    sd: float | None
    n_defined: int
    per_run: dict[str, float | None]


class TaskSummary(_Strict):
    overall: dict[str, MetricSummary]
    by_class: dict[str, dict[str, MetricSummary]]
    n: dict[str, int]
    partial: bool
    missing: dict[str, list[str]]
    failed: dict[str, list[str]]


class RoleUsage(_Strict):
    requests: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None


class Usage(_Strict):
    roles: dict[str, RoleUsage]
    total: RoleUsage
    batch_discount: float | None


class Group(_Strict):
    model: str
    user_model: str
    judge_model: str
    group_key: str
    runs: list[str]
    n_runs: int
    settings: dict[str, Any]
    bundled_sample: bool
    tasks: dict[str, TaskSummary]
    usage: Usage


class Report(_Strict):
    """The documented JSON shape of `build_report`'s result."""

    groups: list[Group]
