"""What the text formats show around the cells: group labels, task and group remarks, settings, and
the usage table with its cost note."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.data import SAMPLE_NOTE
from lexpilot_batch.providers.prices import bundled_as_of


def settings_text(settings: Mapping[str, Any]) -> str:
    """A group's generation settings as one line: "k=v, ..." sorted by key, or "(none)"."""

    def show(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)

    return ", ".join(f"{k}={show(v)}" for k, v in sorted(settings.items())) or "(none)"


_VARIANT = re.compile(r" \((?:c|u)\)$")  # which history of an LCA case (`results`, `protocols.lca.VARIANTS`)


def _counted(by_run: Mapping[str, list[str]], what: str) -> str:
    """ "3 cases missing", or "3 cases missing (6 histories)" where they are counted by history;
    counted per run, as the runs list them."""
    threads = sum(len(v) for v in by_run.values())
    cases = sum(len({_VARIANT.sub("", c) for c in v}) for v in by_run.values())
    text = f"{cases} case{'s' if cases != 1 else ''} {what}"
    return text if cases == threads else f"{text} ({threads} histor{'ies' if threads != 1 else 'y'})"


def _partial_text(task: Mapping[str, Any], limit: int = 10) -> str:
    """ "partial: 3 cases missing, 1 failed (run1: 4, 7; run2: 9)"."""
    parts = []
    counts = [_counted(task["missing"], "missing")]
    if any(task["failed"].values()):
        counts.append(_counted(task["failed"], "failed"))
    for run_id in task["n"]:
        cases = task["missing"].get(run_id, []) + task["failed"].get(run_id, [])
        if cases:
            shown = ", ".join(cases[:limit]) + (", …" if len(cases) > limit else "")
            parts.append(f"{run_id}: {shown}")
    return f"partial: {', '.join(counts)} ({'; '.join(parts)})"


def sample_remark(group: Mapping[str, Any]) -> str | None:
    """`SAMPLE_NOTE` when the group's runs used the bundled sample dataset."""
    return SAMPLE_NOTE if group.get("bundled_sample") else None


def warnings_above(group: Mapping[str, Any]) -> list[str]:
    """What every text format says about a group above its tables: that it ran on the bundled
    sample, then what its number of cases allows (`build.sample_warnings`)."""
    sample = sample_remark(group)
    return [*([sample] if sample else []), *group["warnings"]]


def has_records(task: Mapping[str, Any]) -> bool:
    """Whether any run of the group scored a record of this task (`--partial` may report none)."""
    return any(task["n"].values())


def task_remarks(task: Mapping[str, Any], group: Mapping[str, Any]) -> list[str]:
    """What a reader must know before trusting a task's numbers: fewer runs, unscored cases."""
    remarks = []
    if task_runs(task) < group["n_runs"]:
        remarks.append(f"run in {task_runs(task)} of the group's {group['n_runs']} runs only ({', '.join(task['n'])})")
    if task["partial"]:
        remarks.append(_partial_text(task))
    return remarks


def group_remarks(group: Mapping[str, Any]) -> list[str]:
    """Everything a reader must know about a group before trusting its numbers, one line each, as
    every text format lists them under the group: that it ran on the bundled sample
    (`sample_remark`), then each task's `task_remarks`."""
    sample = sample_remark(group)
    return [
        *([sample] if sample else []),
        *(
            f"{TASKS[name].title}: {remark}"
            for name, task in group["tasks"].items()
            for remark in task_remarks(task, group)
        ),
    ]


def group_label(group: Mapping[str, Any], groups: list[Mapping[str, Any]]) -> str:
    """The model name, with the group key when the model has several groups."""
    same = sum(g["model"] == group["model"] for g in groups)
    return group["model"] if same == 1 else f"{group['model']} [{group['group_key'][:8]}]"


def task_runs(task: Mapping[str, Any]) -> int:
    """How many of the group's runs have this task."""
    return len(task["n"])


def usage_rows(usage: Mapping[str, Any]) -> list[list[str]]:
    """The usage table: a header, one row per role, then the total."""

    def cost(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    rows = [["role", "requests", "prompt tokens", "completion tokens", "est. cost (USD)"]]
    for role, u in [*usage["roles"].items(), ("total", usage["total"])]:
        rows.append(
            [role, f"{u['requests']:,}", f"{u['prompt_tokens']:,}", f"{u['completion_tokens']:,}", cost(u["cost_usd"])]
        )
    return rows


def cost_note(usage: Mapping[str, Any]) -> str:
    """The line under the usage table that says how cost was estimated, or that it was not."""
    if usage["batch_discount"] is None:
        return "No price for these models (pass --prices FILE, by model): costs not estimated."
    return (
        f"Estimated cost = list price per 1M tokens × (1 − batch discount "
        f"{usage['batch_discount']:g}); n/a where a model has no price. Prices from --prices FILE (one given to prepare or "
        f"run is kept), else the bundled table of {bundled_as_of()}." + _by_the_hour(usage)
    )


def _by_the_hour(usage: Mapping[str, Any]) -> str:
    """What the note adds for roles priced by the hour (`providers.schedules`): each answer at the
    price of the minute it was answered, against the same requests at the listed peak price."""
    timed = {role: u for role, u in usage["roles"].items() if u.get("peak_cost_usd") is not None}
    if not timed:
        return ""
    parts = [
        f"{role} ${u['cost_usd']:.2f} against ${u['peak_cost_usd']:.2f} at peak ({u['cost_usd'] / u['peak_cost_usd']:.0%})"
        for role, u in timed.items()
        if u["cost_usd"] is not None and u["peak_cost_usd"]
    ]
    note = " Priced by the hour each request was answered (off-peak rates outside the provider's peak hours)"
    note += f": {'; '.join(parts)}." if parts else "."
    untimed = sum(int(u.get("untimed_requests") or 0) for u in timed.values())
    if untimed:
        note += (
            f" {untimed:,} requests answered before this version kept answer times are priced at the peak (list) price."
        )
    return note
