"""How the text formats write a metric's cell (mean ± SD, marks) and a group's row of cells, and the
notes that explain the marks."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lexpilot_batch.report.formats.layout import has_records, task_runs
from lexpilot_batch.report.statistics.compare import NO_RESAMPLES, UNREACHABLE
from lexpilot_batch.report.statistics.estimates import FEW_CASES, FLAT, MIN_CASES
from lexpilot_batch.report.statistics.influence import UNSTABLE

UNDEFINED_NOTE = "its denominator is zero (for QWK: zero expected disagreement)"
NO_RECORDS_NOTE = "no records (task not run, none of its cases finished, or class not represented in it)"
FEWER_RUNS_NOTE = (
    "[k/n]: defined in only k of the n runs; mean and SD are over those k "
    "(undefined runs are excluded, not counted as 0)"
)
PARTIAL_NOTE = "partial: some cases are not scored (not finished or failed); see the task notes"
NUMBERS_NOTE = (
    "Values are fractions (not percentages) with 4 decimals: mean ± sample SD "
    "(ddof=1) over runs, each metric computed within each run first."
)


def interval_note(bootstrap: Mapping[str, Any]) -> str:
    """What the "[low, high]" under a value is."""
    return (
        f"[low, high]: {bootstrap['level']:.0%} confidence interval of the mean over runs, over cases: for "
        "accuracies and DCG success the exact binomial (Clopper-Pearson) interval, at the case-clustered "
        "effective sample size with several runs or claims (Korn-Graubard); for Macro-F1, F1 and QWK a t "
        f"interval with the jackknife SE on the logit scale of the metric's range; none below {MIN_CASES} cases."
    )


# Why a value has no interval, as a cell shows it, and the note that explains the mark (a reason
# that carries its numbers, "not reachable: 4 cases differ; ...", is found by what precedes its colon).
REASON_MARKS = {
    FEW_CASES: ("[few cases]", f"[few cases]: no interval, fewer than {MIN_CASES} cases"),
    FLAT: (
        "[no variation]",
        "[no variation]: no interval, every case moves the value alike (standard error 0); an interval of "
        "width 0 would claim a certainty that these cases cannot give",
    ),
    UNSTABLE: (
        "[unstable]",
        "[unstable]: no interval, the value is undefined when one of its cases is left out (the jackknife "
        "has no value for it)",
    ),
    UNREACHABLE: (
        "[not reachable]",
        "[not reachable]: no interval of the difference (and no MDD), the permutation test cannot reject at 5% "
        "with so few cases that differ (k cases allow no p below 2/2^k)",
    ),
    NO_RESAMPLES: ("[no resamples]", "[no resamples]: the test and its interval need resamples (--bootstrap 0)"),
}


def reason_key(reason: str | None) -> str | None:
    """The `REASON_MARKS` key of a reason."""
    if reason is None or reason in REASON_MARKS:
        return reason
    return reason.partition(":")[0]


def reason_notes(used: set[str]) -> list[str]:
    """The notes of the reason marks the cells used."""
    return [note for reason, (_, note) in REASON_MARKS.items() if reason in used]


def number_text(value: float) -> str:
    """A value as the text formats show it: a fraction with 4 decimals."""
    return f"{value:.4f}"


@dataclass
class Style:
    """How one text format writes a cell, and which notes the cells have used."""

    undefined: str
    pm: str
    not_run: str
    fewer: Callable[[int, int], str]
    partial_mark: str = ""
    number: Callable[[float], str] = number_text
    used: set[str] = field(default_factory=set)

    def cell(self, summary: Mapping[str, Any] | None, n_runs: int, partial: bool = False) -> str:
        if summary is None:
            self.used.add("not_run")
            text = self.not_run
        elif summary["mean"] is None:
            self.used.add("undefined")
            text = self.undefined
        else:
            mean, sd, k = summary["mean"], summary["sd"], summary["n_defined"]
            text = self.number(mean) if sd is None else f"{self.number(mean)}{self.pm}{self.number(sd)}"
            if k < n_runs:
                self.used.add("fewer")
                text += self.fewer(k, n_runs)
        if partial and self.partial_mark:
            self.used.add("partial")
            text += self.partial_mark
        return text

    def interval(self, summary: Mapping[str, Any] | None) -> str:
        """A metric's 95% interval, "[low, high]"; why it has none ("[few cases]"), or empty when it
        is undefined."""
        return self.ci(summary, self.number)

    def ci(self, entry: Mapping[str, Any] | None, number: Callable[[float], str]) -> str:
        """`entry`'s "ci" as "[low, high]" with `number`, or its "ci_reason"'s mark."""
        if entry is None:
            return ""
        ci = entry.get("ci")
        if ci is not None:
            return f"[{number(ci['low'])}, {number(ci['high'])}]"
        reason = reason_key(entry.get("ci_reason"))
        if reason in REASON_MARKS:
            self.used.add(reason)
            return REASON_MARKS[reason][0]
        return ""

    def stat(self, summary: Mapping[str, Any], sizes: Mapping[str, int]) -> str:
        """A share or mean over runs (an interaction statistic), written like a metric's cell;
        `not_run` when none of the runs (`sizes`: cases per run) finished a case of its task."""
        return self.cell(summary if any(sizes.values()) else None, len(sizes))

    def value(self, value: float | str | None) -> str:
        """One run's value: a number, undefined, or `not_run` for the string "n/a"."""
        if value is None:
            self.used.add("undefined")
            return self.undefined
        if isinstance(value, str):
            self.used.add("not_run")
            return self.not_run
        return self.number(value)

    def row(self, group: Mapping[str, Any], columns: list[tuple[str, str]], cls: str | None = None) -> list[str]:
        """One group's cells for these (task, metric) columns, overall or (with `cls`) in one cause
        class; `not_run` where the group has no such task, no finished record of it, or the class has
        no records in it."""
        out = []
        for task_name, metric in columns:
            task = group["tasks"].get(task_name)
            summaries = None
            if task is not None and has_records(task):
                summaries = task["overall"] if cls is None else task["by_class"].get(cls)
            summary = None if summaries is None else summaries[metric]
            partial = task is not None and task["partial"]
            out.append(self.cell(summary, task_runs(task) if task else 0, partial))
        return out
