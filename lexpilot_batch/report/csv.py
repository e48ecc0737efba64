"""The report as CSV: one row per group, task, scope (overall or cause class) and metric, floats at full precision."""

from __future__ import annotations

import csv
import io

from lexpilot_batch.report.layout import task_runs


def render_csv(report: dict) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "model",
            "user_model",
            "judge_model",
            "group_key",
            "task",
            "scope",
            "class",
            "metric",
            "mean",
            "sd",
            "n_defined",
            "n_runs",
            "partial",
            "per_run",
            "bundled_sample",
        ]
    )

    def show(value: float | None) -> str:
        return "undefined" if value is None else repr(value)

    for group in report["groups"]:
        head = [group["model"], group["user_model"], group["judge_model"], group["group_key"]]
        for task_name, task in group["tasks"].items():
            scopes = [("overall", "", task["overall"])]
            scopes += [("class", cls, ms) for cls, ms in task["by_class"].items()]
            for scope, cls, summaries in scopes:
                for metric, s in summaries.items():
                    per_run = ";".join(f"{r}={show(v)}" for r, v in s["per_run"].items())
                    writer.writerow(
                        [
                            *head,
                            task_name,
                            scope,
                            cls,
                            metric,
                            show(s["mean"]),
                            show(s["sd"]),
                            s["n_defined"],
                            task_runs(task),
                            str(task["partial"]).lower(),
                            per_run,
                            str(group["bundled_sample"]).lower(),
                        ]
                    )
    return out.getvalue()
