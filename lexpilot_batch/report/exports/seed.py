"""`export --layout seed`: finished records written in the original benchmark code's result-file
layout.

`export_seed` writes, for each run (run id, evaluated model), the files the seed README lists:

    runs/<run-id>/<model>/manifest.json
    AwN_gen/<run-id>/<model>/a1.jsonl, interaction.jsonl
    Force_ask_gen/<run-id>/<model>/force_ask.jsonl
    Force_judge_gen/<run-id>/<model>/a1_direct.jsonl, a1_force_judge.jsonl
    eval_results/<run-id>/<model>/LCA_results.jsonl, DCG_results.jsonl,
                                  LJP_direct.jsonl, LJP_gold.jsonl, LJP_interaction.jsonl

and, beside the manifest, `runs/<run-id>/<model>/export.json`: what the layout has no place for
(whether the run used the bundled sample dataset, the cause-class mapping its `cause_class`
fields come from, each task's missing and failed cases), and `judge_calls.jsonl`: the judges' own
words, which the original code did not keep (its records hold the labels and verdicts only). One
line per attempt of each judge step of every case of the run, in case, step and attempt order:
`{"case_number", **judge_calls.JudgeCall.to_json()}`, so that a rejected answer stands before
the retry that was used.

`<run-id>` and `<model>` are the names themselves when they are safe file names everywhere, as the
original code writes them, and a slug with a hash otherwise (`workspace.seed_name`); names that a
case-insensitive file system (Windows, macOS) would confuse are refused. The generation files hold
what was generated (no labels, no gold verdicts); only the eval_results files add
`cause_of_action` and `cause_class`, which is what per-class scoring needs. A run of Interaction
LJP without LCA still gets the `a1.jsonl` round-1 responses (underspecified histories) it used.

Only finished threads are exported, in dataset order (case, then variant c before u); a task's
files are written only when the run has that task. Unfinished or failed tasks are refused as
`report` refuses them, unless `partial`: then each file of a task that is not complete is named
`<name>.partial.jsonl` (a partial file never passes for a whole one) and `export.json` lists its
missing and failed cases. Every file is UTF-8 JSON or JSONL, and the output is a pure function of
the database: exporting twice gives the same bytes. The files reach `--out` together or not at all
(`output.export_folder`); each run's `export.json`, which says whether it is complete, is moved in
after its files and never stands beside files it does not describe.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.data import SAMPLE_NOTE
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import RunResults, TaskRecords
from lexpilot_batch.report.exports.output import export_folder
from lexpilot_batch.report.judge_calls import load_judge_calls
from lexpilot_batch.report.results import check_complete, load_run_results, stored_mapping
from lexpilot_batch.state.workspace import Workspace, seed_name
from lexpilot_batch.util.staging import Staged

Record = dict[str, Any]
PARTIAL_SUFFIX = ".partial.jsonl"


def _pick(*fields: str) -> Callable[[Record], Record]:
    return lambda record: {f: record[f] for f in fields}


def _force_ask(record: Record) -> Record:
    """The DCG generations: both questions and the User Model reply, not the judge's decisions."""
    return {
        "case_number": record["case_number"],
        "history": record["history"],
        "rounds": [{k: v for k, v in r.items() if k != "decision"} for r in record["rounds"]],
    }


def _round_one(record: Record) -> Record:
    """An Interaction LJP record's round 1 as LCA's `a1.jsonl` holds it: the underspecified history
    and the first new response (LCA's, shared by both tasks)."""
    return {
        "case_number": record["case_number"],
        "history_type": "underspecified",
        "history": record["history"],
        "response": record["rounds"][0]["response"],
    }


# task -> which part of the record its generation file (`tasks.Task.generation`) holds.
_GENERATED: dict[str, Callable[[Record], Record]] = {
    "lca": _pick("case_number", "history_type", "history", "response"),
    "ljp_interaction": _pick("case_number", "history", "continued_history", "rounds", "stop_reason", "final_response"),
    "dcg": _force_ask,
    "ljp_direct": _pick("case_number", "history", "response"),
    "ljp_gold": _pick("case_number", "history", "response"),
}


@dataclass
class Exported:
    """What `export_seed` wrote, and what the user must be told about it."""

    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _jsonl(records: list[Record]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


class _Writer:
    """Writes the files of one export under `out_dir` (staged: `output.export_folder`)."""

    def __init__(self, out_dir: Path, staged: Staged) -> None:
        self.out_dir = out_dir
        self.staged = staged
        self.files: list[Path] = []

    def write(self, path: Path, data: bytes, *, last: bool = False) -> None:
        self.staged.write(path, data, last=last)  # an error names `path` (`output.export_folder`)
        self.files.append(path)

    def write_records(self, path: Path, records: list[Record], partial: bool) -> None:
        """`path`, or `<name>.partial.jsonl` beside it; the other one, left by an earlier export of
        the run, is removed so that the folder says what the database holds now."""
        partial_path = path.with_name(path.name.removesuffix(".jsonl") + PARTIAL_SUFFIX)
        target, other = (partial_path, path) if partial else (path, partial_path)
        self.write(target, _jsonl(records))
        self.staged.remove(other)


def export_seed(
    ws: Workspace, out_dir: Path, run_id: str | None = None, model: str | None = None, *, partial: bool = False
) -> Exported:
    """Write the seed's result files for every matching run under `out_dir`.

    Raises `LexpilotError` naming the filters when no run matches them, naming the unfinished and
    failed cases of every incomplete task unless `partial`, and naming the runs whose folders a
    case-insensitive file system would merge.
    """
    out_dir = Path(out_dir)
    runs = load_run_results(ws, run_id, model)
    if not partial:
        check_complete(
            runs, "export what is finished (each file of an unfinished task named *.partial.jsonl)", ws.given_root
        )
    folders = _folders(runs)
    with export_folder(out_dir) as staged:
        return _export(ws, out_dir, runs, folders, _Writer(out_dir, staged))


def _export(
    ws: Workspace, out_dir: Path, runs: list[RunResults], folders: dict[tuple[str, str], Path], writer: _Writer
) -> Exported:
    db = ws.store.conn
    exported = Exported(writer.files)
    causes: dict[str, dict[str, str]] = {}
    for run in runs:
        row = db.execute(
            "SELECT manifest, dataset FROM runs WHERE run_id = ? AND model = ?", (run.run_id, run.model)
        ).fetchone()
        manifest = json.loads(row["manifest"])
        if row["dataset"] not in causes:
            sql = "SELECT case_number, cause FROM cases WHERE dataset = ?"
            causes[row["dataset"]] = dict(db.execute(sql, (row["dataset"],)).fetchall())
        where = folders[(run.run_id, run.model)]
        text = json.dumps(manifest, ensure_ascii=False, indent=2) + "\n"
        writer.write(out_dir / "runs" / where / "manifest.json", text.encode("utf-8"))
        about = _about(db, run, manifest)
        _write_tasks(writer, out_dir, where, run, causes[row["dataset"]])
        calls = load_judge_calls(db, [(run.run_id, run.model)]).get((run.run_id, run.model), {})
        said = [{"case_number": case, **c.to_json()} for case, of_case in calls.items() for c in of_case]
        writer.write(out_dir / "runs" / where / "judge_calls.jsonl", _jsonl(said))
        writer.write(out_dir / "runs" / where / "export.json", _json(about), last=True)
        label = f"{run.run_id} / {run.model}"
        if run.bundled_sample:
            exported.notes.append(f"{label}: {SAMPLE_NOTE}")
        if not about["complete"]:
            exported.notes.append(
                f"{label}: partial; unfinished tasks' files are named *{PARTIAL_SUFFIX} and "
                f"{(Path('runs') / where / 'export.json').as_posix()} lists their missing and failed cases"
            )
    return exported


def _write_tasks(writer: _Writer, out_dir: Path, where: Path, run: RunResults, causes: dict[str, str]) -> None:
    for task in TASKS.values():
        if task.name not in run.tasks:
            continue
        entry = run.tasks[task.name]
        records = entry.records
        folder, gen_name = task.generation
        generated = [_GENERATED[task.name](record) for _, record in records]
        writer.write_records(out_dir / folder / where / gen_name, generated, _is_partial(entry))
        scored = [
            {**record, "cause_of_action": causes[str(record["case_number"])], "cause_class": cause_class}
            for cause_class, record in records
        ]
        writer.write_records(out_dir / "eval_results" / where / task.eval_file, scored, _is_partial(entry))
    interaction = run.tasks.get("ljp_interaction")
    if "lca" not in run.tasks and interaction is not None:
        folder, gen_name = TASKS["lca"].generation
        round_one = [_round_one(record) for _, record in interaction.records]
        writer.write_records(out_dir / folder / where / gen_name, round_one, _is_partial(interaction))


def _is_partial(entry: TaskRecords) -> bool:
    return bool(entry.missing or entry.failed)


def _about(db: sqlite3.Connection, run: RunResults, manifest: dict[str, Any]) -> dict[str, Any]:
    """`export.json`: what the seed's layout has no place for."""
    mapping = manifest.get("categories_sha256")
    tasks = {
        name: {
            "complete": not _is_partial(entry),
            "records": len(entry.records),
            "missing": entry.missing,
            "failed": entry.failed,
        }
        for name, entry in ((t, run.tasks[t]) for t in TASKS if t in run.tasks)
    }
    return {
        "run_id": run.run_id,
        "model": run.model,
        "bundled_sample": run.bundled_sample,
        "dataset_note": SAMPLE_NOTE if run.bundled_sample else None,
        "complete": all(t["complete"] for t in tasks.values()),
        "cause_classes": {
            "categories_sha256": mapping,
            # A run registered before mappings were stored: its classes are those kept with its cases.
            "classes": stored_mapping(db, mapping) if mapping is not None else None,
        },
        "tasks": tasks,
    }


def _json(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _folders(runs: list[RunResults]) -> dict[tuple[str, str], Path]:
    """`<run-id>/<model>` of every run; refused when two would be one folder on Windows or macOS."""
    folders: dict[tuple[str, str], Path] = {}
    seen: dict[str, tuple[str, str]] = {}
    for run in runs:
        key = (run.run_id, run.model)
        folder = Path(seed_name(run.run_id)) / seed_name(run.model)
        other = seen.setdefault(folder.as_posix().casefold(), key)
        if other != key:
            raise LexpilotError(
                f"run {run.run_id!r} of model {run.model!r} and run {other[0]!r} of model {other[1]!r} would share "
                f"the folder {folder.as_posix()} on a file system that ignores case (Windows, macOS); export them "
                "one at a time (--run-id, --model) into different --out folders"
            )
        folders[key] = folder
    return folders
