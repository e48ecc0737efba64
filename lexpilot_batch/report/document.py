"""The report's data: the runs it is built from (`RunResults`) and the JSON shape it promises (`Report`).

The JSON shape (`build_report`), stable and validated against `Report` before it is returned:

    {"groups": [{
        "model", "user_model", "judge_model", "group_key", "comparison_key",
        "runs": [run ids], "n_runs": int, "settings": {...},
        "cases": {"total": int, "by_class": {class: int}},
        "bundled_sample": bool (the runs used the bundled sample dataset, not a user-supplied one),
        "warnings": [what a reader must know about the sample size before any number: few cases,
                     classes without intervals, fewer cases than the benchmark's],
        "tasks": {task: {
            "overall":  {metric: {"mean", "sd", "n_defined", "per_run": {run_id: value},
                                  "n": {run_id: histories | cases | claims scored},
                                  "cases": the cases (clusters) the interval rests on,
                                  "se": standard error of the mean | null,
                                  "ci": {"low", "high", "method", "cases", "df", "resamples"} | null,
                                  "ci_reason": why "ci" is null although "mean" is not | null,
                                  "variance": {"per_case", "between", "within"} | null}},
            "by_class": {class: {metric: {...same...}}},
            "n":        {run_id: records scored (histories for lca, cases for dcg,
                         claims for ljp_*)},
            "partial":  bool,
            "missing":  {run_id: [case numbers not finished]},
            "failed":   {run_id: [case numbers whose thread failed]}}},
        "interaction": {
            "ljp_interaction": {"n": {run_id: cases},
                                "stop_reasons": {reason: share},
                                "responses": mean new responses per case},
            "dcg": {"n": {run_id: cases}, "success_by_round": {"1": share, "2": share}}},
            (each share or mean: {"mean", "sd", "n_defined", "per_run"}; a task not run is left out)
        "usage": {"roles": {role: {"requests", "prompt_tokens", "completion_tokens",
                                   "cached_tokens", "cache_write_tokens", "cost_usd",
                                   "peak_cost_usd", "untimed_requests" (priced by the hour only)}},
                  "total": {...same six keys...},
                  "batch_discount": float | null}}],
     "comparisons": [{
        "a": {"model", "group_key"}, "b": {"model", "group_key"}, "comparison_key",
        "cases": int, "partial": bool,
        "tasks": {task: {metric: {"a", "b", "difference", "cases", "se", "ci": {...} | null,
                                  "ci_reason", "p_value", "p_floor", "test", "test_runs", "p_reason",
                                  "t", "df", "correlation", "mdd", "mdd_reason", "p_adjusted",
                                  "variance": {...} | null}}}}],
     "bootstrap": {"resamples": int, "seed": int, "level": float, "method": str, "test": str,
                   "adjust": "holm" | "none", "thresholds": {name: number}},
     "plan": null | {"delta", "alpha", "power", "runs", "rows": [...]}}

`ci.method` names how an interval was computed (`clopper-pearson`, `korn-graubard`,
`jackknife-logit-t`: `estimates`; `permutation`: `compare`); `test` how a p-value was
(`compare`); `p_floor` says that the resamples cannot resolve the p-value, which is below
`p_value`. Undefined values are `null`. Floats keep
full precision in JSON and CSV; the text formats show fractions (not percentages) with 4 decimals
(LaTeX: ×100 with one decimal, to fit a column). Groups are sorted by (model, user model, judge
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

    `cases[i]` is the case number of `records[i]` (LCA has two records per case, one per history);
    the bootstrap resamples cases by it. `missing` are case numbers whose thread has not finished;
    `failed` those whose thread failed. Either makes the task partial.
    """

    records: list[tuple[str, dict]] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass
class RunResults:
    """Everything the report needs from one run (run id, evaluated model).

    `group_key` says which runs are pooled (mean and SD over them); `comparison_key` which groups
    may be compared (the same but for the evaluated model)."""

    run_id: str
    model: str
    user_model: str
    judge_model: str
    group_key: str
    settings: dict = field(default_factory=dict)
    tasks: dict[str, TaskRecords] = field(default_factory=dict)
    # role -> backend -> {requests, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens},
    # and for sync work its `timed` buckets: [(minute answered or None, requests, prompt, completion,
    # cached, written)] (`results._usage`)
    usage: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    comparison_key: str = ""
    # The run's dataset is the bundled sample: a demonstration, not a benchmark result.
    bundled_sample: bool = False


# --- The JSON shape --------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Interval(_Strict):
    low: float
    high: float
    method: str  # clopper-pearson | korn-graubard | jackknife-logit-t | permutation
    cases: int
    df: int | None  # the t quantile's degrees of freedom, where one enters
    resamples: int | None  # the Monte Carlo patterns a comparison's interval rests on (None: exact)


class Variance(_Strict):
    """A metric's uncertainty split between cases and runs (`estimates.variance`)."""

    per_case: float
    between: float | None
    within: float | None


class MetricSummary(_Strict):
    mean: float | None
    sd: float | None
    n_defined: int
    per_run: dict[str, float | None]
    n: dict[str, int]
    cases: int
    se: float | None
    ci: Interval | None
    ci_reason: str | None
    variance: Variance | None = None


class TaskSummary(_Strict):
    overall: dict[str, MetricSummary]
    by_class: dict[str, dict[str, MetricSummary]]
    n: dict[str, int]
    partial: bool
    missing: dict[str, list[str]]
    failed: dict[str, list[str]]


class Stat(_Strict):
    """A share or mean per run, and its mean and sample SD over runs."""

    mean: float | None
    sd: float | None
    n_defined: int
    per_run: dict[str, float | None]


class InteractionStats(_Strict):
    n: dict[str, int]
    stop_reasons: dict[str, Stat]
    responses: Stat


class DcgRounds(_Strict):
    n: dict[str, int]
    success_by_round: dict[str, Stat]


class Interaction(_Strict):
    ljp_interaction: InteractionStats | None = None
    dcg: DcgRounds | None = None


class RoleUsage(_Strict):
    requests: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # of the prompt tokens: read from the provider's cache (`prices.cost_usd`)
    cache_write_tokens: int = 0  # of the prompt tokens: written to it (Anthropic)
    cost_usd: float | None
    # A model priced by the hour (`providers.schedules`): the same requests at the listed peak price,
    # and those answered before answer times were kept (priced at it).
    peak_cost_usd: float | None = None
    untimed_requests: int = 0


class Usage(_Strict):
    roles: dict[str, RoleUsage]
    total: RoleUsage
    batch_discount: float | None


class Cases(_Strict):
    total: int
    by_class: dict[str, int]


class Group(_Strict):
    model: str
    user_model: str
    judge_model: str
    group_key: str
    comparison_key: str
    runs: list[str]
    n_runs: int
    settings: dict[str, Any]
    cases: Cases
    bundled_sample: bool
    warnings: list[str]
    tasks: dict[str, TaskSummary]
    interaction: Interaction
    usage: Usage


class PairedVariance(_Strict):
    """A paired difference's per-case variance split between cases and runs (`plan.paired_variance`)."""

    per_case: float
    between: float | None
    within: float | None  # the two models' within-case variances, summed
    runs: int


class PlanRow(_Strict):
    a: str
    b: str | None  # None: a model compared with nothing, planned against one of its own variance
    task: str
    metric: str
    headline: bool
    between: float | None
    within: float | None
    cases: dict[str, int]  # runs of each model -> cases needed


class Plan(_Strict):
    """`report --plan DELTA`: the cases needed, per runs of each model (`statistics.plan`)."""

    delta: float
    alpha: float
    power: float
    runs: list[int]
    rows: list[PlanRow]


class Side(_Strict):
    model: str
    group_key: str


class Difference(_Strict):
    a: float | None
    b: float | None
    difference: float | None
    cases: int
    se: float | None
    ci: Interval | None
    ci_reason: str | None
    p_value: float | None
    p_floor: bool
    test: str | None
    test_runs: int
    p_reason: str | None
    t: float | None
    df: int | None
    correlation: float | None
    mdd: float | None
    mdd_reason: str | None
    p_adjusted: float | None
    variance: PairedVariance | None


class Comparison(_Strict):
    a: Side
    b: Side
    comparison_key: str
    cases: int
    partial: bool
    tasks: dict[str, dict[str, Difference]]


class Bootstrap(_Strict):
    """How the intervals and tests were computed (the key keeps its name from when they were all
    bootstrap)."""

    resamples: int
    seed: int
    level: float
    method: str
    test: str
    adjust: str
    thresholds: dict[str, float]


class Report(_Strict):
    """The documented JSON shape of `build_report`'s result."""

    groups: list[Group]
    comparisons: list[Comparison]
    bootstrap: Bootstrap
    plan: Plan | None = None
