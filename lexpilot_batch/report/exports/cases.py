"""`export --layout cases`: one row per finished (run, model, task, case[, history variant]), as
CSV and JSONL.

`export_cases` writes `cases.csv` and `cases.jsonl` under the output folder, the same rows in the
same order (runs as registered, tasks in benchmark order, cases in dataset order, variant c before
u). What each row says is `tasks.Task.outcome` of the record, the one home of "was it right":

| field | tasks | what |
| --- | --- | --- |
| `run_id`, `model`, `group_key` | all | the run, and the report group it is pooled in |
| `bundled_sample` | all | the run used the bundled sample dataset: a demonstration, not a benchmark result |
| `task`, `case_number`, `variant`, `cause_class` | all | which thread (`variant`: `c` or `u` for LCA, else empty) |
| `correct` | all | LCA: the label fits the history type; DCG: success; LJP: every claim's verdict right |
| `history_type`, `label` | lca | the history answered, and the judge's label of the response |
| `success`, `decisions` | dcg | success, and the judge's decision on each round's question |
| `claims`, `claims_correct`, `gold`, `predicted` | ljp_* | verdicts against gold, in claim order |
| `responses`, `stop_reason` | ljp_interaction | new LexAwN responses used (1-4) and why the consultation stopped |

In the CSV, lists are joined with `|` and booleans are `true`/`false`; a field a task does not
have is an empty cell; a text cell that would start a formula in a spreadsheet (a case number such
as `=cmd|' /C calc'!A0`, a model or run name beginning with `=`, `+`, `-` or `@`) is written with a
`'` before it (`spreadsheet`). In the JSONL they are JSON values, absent fields are left out, each
LJP row also has `verdicts`: [{"claim", "gold", "predicted"}, ...], and every row has
`judge_calls`: each attempt of each judge step of the record, in step and attempt order
(`judge_calls.JudgeCall.to_json`: judge, step, attempt, status, decision, why it was rejected, the
judge's whole output and its reasoning), so a malformed answer stands before the retry that was
used. Files are UTF-8 and reach the output folder together or not at all (`output.export_folder`);
exporting twice gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.document import RunResults
from lexpilot_batch.report.exports.output import export_folder
from lexpilot_batch.report.judge_calls import JudgeCalls, calls_of
from lexpilot_batch.util.spreadsheet import CSV_FILE_ENCODING, csv_text

COLUMNS = (
    "run_id",
    "model",
    "group_key",
    "bundled_sample",
    "task",
    "case_number",
    "variant",
    "cause_class",
    "correct",
    "history_type",
    "label",
    "success",
    "decisions",
    "claims",
    "claims_correct",
    "gold",
    "predicted",
    "responses",
    "stop_reason",
)


def case_rows(runs: list[RunResults], judges: JudgeCalls | None = None) -> Iterator[dict[str, Any]]:
    """One dict per finished record of `runs` (whole records), in export order; with `judges`
    (`judge_calls.load_judge_calls` of the same runs), each with its judge calls."""
    for run in runs:
        run_calls = (judges or {}).get((run.run_id, run.model), {})
        for task in TASKS:
            if task not in run.tasks:
                continue
            task_records = run.tasks[task]
            for (cls, record), case in zip(task_records.records, task_records.cases, strict=True):
                try:
                    outcome = TASKS[task].outcome(record)
                    verdicts = [{k: c[k] for k in ("claim", "gold", "predicted")} for c in record.get("claims", [])]
                except (KeyError, TypeError, ValueError) as exc:
                    raise LexpilotError(
                        f"Cannot export case {case} of task {task}, run {run.run_id} (model {run.model}): {exc!r}; "
                        "the record is not in the shape the protocol writes."
                    ) from exc
                row = {
                    "run_id": run.run_id,
                    "model": run.model,
                    "group_key": run.group_key,
                    "bundled_sample": run.bundled_sample,
                    "task": task,
                    # As the dataset has it: a number stays a number in the JSONL (the record keeps its type).
                    "case_number": record.get("case_number", case),
                    "variant": str(outcome.get("history_type", ""))[:1],
                    "cause_class": cls,
                    **outcome,
                }
                if TASKS[task].unit == "claims":
                    row["verdicts"] = verdicts
                if judges is not None:
                    row["judge_calls"] = [c.to_json() for c in calls_of(run_calls, task, case, row["variant"])]
                yield row


def _csv_cell(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "|".join(map(str, value))
    return "" if value is None else value


def export_cases(runs: list[RunResults], out_dir: Path, judges: JudgeCalls | None = None) -> list[Path]:
    """Write `cases.csv` and `cases.jsonl` for `runs` under `out_dir` (with `judges`, the JSONL
    rows' `judge_calls`); returns the two files."""
    rows = list(case_rows(runs, judges))
    table = csv_text(COLUMNS, ([_csv_cell(row.get(column)) for column in COLUMNS] for row in rows))
    jsonl = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    written = []
    with export_folder(out_dir) as staged:
        for name, data in (("cases.csv", table), ("cases.jsonl", jsonl)):
            path = Path(out_dir) / name
            staged.write(path, data.encode(CSV_FILE_ENCODING if name.endswith(".csv") else "utf-8"))
            written.append(path)
    return written
