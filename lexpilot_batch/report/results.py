"""Reading finished records out of the workspace database, for the report and the export.

Reads only the database: no provider, no network, so rescoring works offline on any finished
workspace, and as often as you like.
"""

from __future__ import annotations

import gc
import hashlib
import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lexpilot_batch.benchmark import records
from lexpilot_batch.benchmark.tasks import TASKS
from lexpilot_batch.data import Case, stored_case
from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import RunResults, TaskRecords
from lexpilot_batch.state.states import ThreadState
from lexpilot_batch.state.usage import usage_by_run
from lexpilot_batch.state.workspace import Workspace, command_hint
from lexpilot_batch.study.runs import role_requests, used_bundled_sample

# What makes two runs comparable (SPEC §9); informative manifest fields stay out.
_GROUP_FIELDS = (
    "dataset_sha256",
    "case_ids",
    "code_hash",
    "prompts_hash",
    "model",
    "user_model",
    "judge_model",
    "settings",
)
# Joined manifests later: in the key only when a manifest has them, so that runs registered before
# keep the keys (and the groups) they had.
_LATER_GROUP_FIELDS = (
    "categories_sha256",
    "requests",  # what each role's requests carry: recorded for provider-qualified models and model args
)


def group_key(manifest: dict) -> str:
    fields = {k: manifest.get(k) for k in _GROUP_FIELDS}
    fields.update({k: manifest[k] for k in _LATER_GROUP_FIELDS if k in manifest})
    return _digest(fields)


def comparison_key(manifest: dict) -> str:
    """The group key but for the evaluated model: groups that share it differ only in the model
    and are compared case by case (`report.statistics.compare`).

    It always holds the cause-class mapping (when the manifest names one: the bootstrap resamples
    cases within classes, so two mappings are never compared) and what the user and judge requests
    carry (`runs.role_requests`, also for manifests that record none: a bare name's requests), but
    not what the evaluated model's requests carry: that is the model being compared.
    """
    fields = {k: manifest.get(k) for k in _GROUP_FIELDS if k != "model"}
    fields.update({k: manifest[k] for k in _LATER_GROUP_FIELDS if k in manifest})
    fields["requests"] = {role: r.to_json() for role, r in role_requests(manifest).items() if role != "eval"}
    return _digest(fields)


def _digest(fields: dict[str, Any]) -> str:
    blob = json.dumps(fields, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def shown_settings(manifest: dict) -> dict[str, Any]:
    shown = {
        **manifest["settings"],
        "dataset_sha256": manifest["dataset_sha256"][:12],
        "cases": len(manifest["case_ids"]),
        "code_hash": manifest["code_hash"][:12],
        "prompts_hash": manifest["prompts_hash"][:12],
        "version": manifest.get("version"),
    }
    if "categories_sha256" in manifest:
        shown["categories_sha256"] = manifest["categories_sha256"][:12]
    if "dataset_commit" in manifest:  # a Hugging Face dataset's file: the commit it was read at
        shown["dataset_commit"] = manifest["dataset_commit"][:12]
    return shown


def load_run_results(
    ws: Workspace, run_id: str | None = None, model: str | None = None, *, texts: bool = True
) -> list[RunResults]:
    """One `RunResults` per matching run, with every task that has threads.

    `texts=False` gives records holding only the fields the report scores (`tasks.Task.scored`),
    stored apart from the records: what the report reads, at a fraction of the time and memory.
    The export needs whole records and keeps the default.
    """
    db = ws.store.conn
    where, args = [], []
    if run_id is not None:
        where.append("run_id = ?")
        args.append(run_id)
    if model is not None:
        where.append("model = ?")
        args.append(model)
    sql = "SELECT pk, run_id, model, dataset, manifest FROM runs" + (f" WHERE {' AND '.join(where)}" if where else "")
    runs = db.execute(sql + " ORDER BY pk", args).fetchall()
    if not runs:
        what = " ".join(f"{k} {v!r}" for k, v in (("run", run_id), ("model", model)) if v is not None)
        have = db.execute("SELECT run_id, model FROM runs ORDER BY pk").fetchall()
        there = (
            f"; it has {', '.join(sorted({r['run_id'] for r in have}))} of {', '.join(sorted({r['model'] for r in have}))}"
            if have
            else ""
        )
        raise LexpilotError(
            f"no run{' matching ' + what if what else 's'} in {ws.root}{there}; check --run-id/--model/--root"
            " (a model is named as registered, with its provider prefix where it was given one)"
        )
    usage = usage_by_run(db)
    labels: dict[tuple[str, str | None], dict[int, tuple[str, str]]] = {}
    with _without_gc_pauses():
        return [_run_results(db, run, texts, usage.get(run["pk"], {}), labels) for run in runs]


def _run_results(
    db: sqlite3.Connection,
    run: Any,
    texts: bool,
    usage: dict[str, dict[str, dict[str, Any]]],
    labels: dict[tuple[str, str | None], dict[int, tuple[str, str]]],
) -> RunResults:
    manifest = json.loads(run["manifest"])
    mapping = (run["dataset"], manifest.get("categories_sha256"))
    if mapping not in labels:
        labels[mapping] = _case_labels(db, *mapping, run)
    of_case = labels[mapping]
    reader = _WholeRecords(db, run) if texts else _ScoredRecords(db, run)
    tasks: dict[str, TaskRecords] = defaultdict(TaskRecords)
    for task, variant, status, case_idx, *stored in reader.rows:
        entry = tasks[task]
        case_number, cause_class = of_case[case_idx]
        if status == ThreadState.DONE:
            entry.records.append((cause_class, reader.record(task, *stored)))
            entry.cases.append(case_number)
        elif status == ThreadState.FAILED:
            entry.failed.append(case_number + (f" ({variant})" if variant else ""))
        else:
            entry.missing.append(case_number + (f" ({variant})" if variant else ""))
    return RunResults(
        run_id=run["run_id"],
        model=run["model"],
        user_model=manifest["user_model"],
        judge_model=manifest["judge_model"],
        group_key=group_key(manifest),
        comparison_key=comparison_key(manifest),
        settings=shown_settings(manifest),
        tasks=dict(tasks),
        usage=usage,
        bundled_sample=used_bundled_sample(manifest),
    )


def _case_labels(db: sqlite3.Connection, dataset: str, mapping: str | None, run: Any) -> dict[int, tuple[str, str]]:
    """Case index -> (case number, cause class) of a dataset's cases, classed with a run's mapping.

    Runs registered before mappings were stored (their manifests name none) keep the class the
    workspace stored with each case, so that they report as they did.
    """
    if mapping is None:
        sql = "SELECT idx, case_number, cause_class FROM cases WHERE dataset = ?"
        return {idx: (number, cls) for idx, number, cls in db.execute(sql, (dataset,))}
    classes = stored_mapping(db, mapping)
    if classes is None:
        raise LexpilotError(
            f"run {run['run_id']!r} of model {run['model']!r} was registered with the cause-class mapping "
            f"{mapping[:12]}, which the workspace database does not hold; it is damaged: restore it from a backup"
        )
    class_of = {cause: name for name, causes in classes.items() for cause in causes}
    out = {}
    for idx, number, cause in db.execute("SELECT idx, case_number, cause FROM cases WHERE dataset = ?", (dataset,)):
        if cause not in class_of:
            raise LexpilotError(
                f"case {number} of run {run['run_id']!r} has cause of action {cause!r}, which the run's "
                f"cause-class mapping {mapping[:12]} does not hold; the database is damaged: restore it from a backup"
            )
        out[idx] = (number, class_of[cause])
    return out


@contextmanager
def _without_gc_pauses() -> Iterator[None]:
    """Hundreds of thousands of small records, none of them cyclic, would set off the cyclic
    garbage collector again and again (a third of a 20x report's loading time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _plain_rows(db: sqlite3.Connection, sql: str, args: tuple) -> Any:
    cursor = db.cursor()
    cursor.row_factory = None  # tuples: a report reads hundreds of thousands of rows
    return cursor.execute(sql, args)


class _ScoredRecords:
    """What the report reads: each record's scored fields (`tasks.Task.scored`), stored apart.

    Scores repeat (a label, a success, a few verdict pairs): equal scores are decoded once and
    the records share the one read-only dict, which keeps a 20x report's memory and time down.
    """

    def __init__(self, db: sqlite3.Connection, run: Any) -> None:
        self.decoded: dict[str, dict[str, Any]] = {}
        # In the order of the (run, task, case, variant) index: nothing to sort.
        self.rows = _plain_rows(
            db,
            "SELECT task, variant, status, case_idx, score,"
            f" CASE WHEN score IS NULL AND status = '{ThreadState.DONE}' THEN record END"
            " FROM threads WHERE run_pk = ? ORDER BY task, case_idx, variant",
            (run["pk"],),
        )

    def record(self, task: str, score: str | None, record: str | None) -> dict[str, Any]:
        if score is not None:
            decoded = self.decoded.get(score)
            if decoded is None:
                decoded = self.decoded[score] = json.loads(score)
            return decoded
        assert record is not None, "a finished thread without a score has its record read"
        return TASKS[task].scored(json.loads(record))  # finished before scores were stored


class _WholeRecords:
    """What the export reads: whole records, the case's histories put back (`records.expand`)."""

    def __init__(self, db: sqlite3.Connection, run: Any) -> None:
        self.db, self.dataset = db, run["dataset"]
        self.rows = _plain_rows(
            db,
            "SELECT task, variant, status, case_idx, case_idx, record FROM threads"
            " WHERE run_pk = ? ORDER BY case_idx, variant",
            (run["pk"],),
        )
        self.case: tuple[int, Case] | None = None  # rows come in case order: one read and parse per case

    def record(self, task: str, case_idx: int, record: str) -> dict[str, Any]:
        stored = json.loads(record)
        if not records.has_references(stored):
            return stored
        if self.case is None or self.case[0] != case_idx:
            # Read apart, not joined to every thread row: a case holds several threads per run.
            data = self.db.execute("SELECT data FROM cases WHERE dataset = ? AND idx = ?", (self.dataset, case_idx))
            self.case = (case_idx, stored_case(data.fetchone()[0]))
        return records.expand(stored, self.case[1])


def stored_mapping(db: sqlite3.Connection, sha256: str) -> dict[str, list[str]] | None:
    """The cause-class mapping `{class: [cause, ...]}` a workspace keeps under this hash, if any."""
    row = db.execute("SELECT classes FROM categories WHERE sha256 = ?", (sha256,)).fetchone()
    return None if row is None else json.loads(row[0])


def check_complete(runs: list[RunResults], partial_does: str, root: Path | None = None) -> None:
    """Refuse runs with unfinished or failed tasks, naming them (`report` and `export` alike);
    `partial_does` says what `--partial` would do instead, `root` is the `--root` hints repeat."""
    problems = incomplete(runs)
    if problems:
        failed = any(entry.failed for run in runs for entry in run.tasks.values())
        unfinished = any(entry.missing for run in runs for entry in run.tasks.values())
        ways = []
        if unfinished:
            ways.append(f"finish the unfinished ones (`{command_hint('poll-and-advance --submit --wait', root)}`)")
        if failed:
            ways.append(
                f"make the failed ones due again with fresh attempts (`{command_hint('retry', root)}`, "
                f"then `{command_hint('poll-and-advance --submit --wait', root)}`)"
            )
        advice = "; ".join(ways)
        raise LexpilotError(
            "some tasks are not complete:\n"
            + "\n".join(f"  - {p}" for p in problems)
            + f"\n{advice[:1].upper()}{advice[1:]}; or pass --partial to {partial_does}."
        )


def incomplete(runs: list[RunResults]) -> list[str]:
    """One line per run and task that is not finished, naming (some of) its cases."""
    lines = []
    for run in runs:
        for task, entry in run.tasks.items():
            for kind, cases in (("unfinished", entry.missing), ("failed", entry.failed)):
                if cases:
                    shown = ", ".join(cases[:8]) + (f", ... ({len(cases)} in all)" if len(cases) > 8 else "")
                    lines.append(f"{run.run_id} / {run.model} / {task}: {kind}: {shown}")
    return lines
