"""Export: finished records written in the original benchmark code's result-file layout.

`export_seed` writes, for each run (run id, evaluated model), the files the seed README lists:

    runs/<run-id>/<model>/manifest.json
    AwN_gen/<run-id>/<model>/a1.jsonl, interaction.jsonl
    Force_ask_gen/<run-id>/<model>/force_ask.jsonl
    Force_judge_gen/<run-id>/<model>/a1_direct.jsonl, a1_force_judge.jsonl
    eval_results/<run-id>/<model>/LCA_results.jsonl, DCG_results.jsonl,
                                  LJP_direct.jsonl, LJP_gold.jsonl, LJP_interaction.jsonl

`<run-id>` and `<model>` are `workspace.slug`s, so any run id stays inside the output folder.
The generation files hold what was generated (no labels, no gold verdicts); the eval_results
files hold the whole protocol record plus `cause_of_action` and `cause_class`, which is what
per-class scoring needs. Only finished threads are exported, in dataset order (case, then
variant c before u); a task's files are written only when the run has that task. Every file is
UTF-8 JSONL with one record per line, written atomically, and the output is a pure function of
the database: exporting twice gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.fileio import write_atomic
from lexpilot_batch.results import load_run_results
from lexpilot_batch.tasks import TASKS
from lexpilot_batch.workspace import Workspace, slug

Record = dict[str, Any]


def _pick(*fields: str) -> Callable[[Record], Record]:
    return lambda record: {f: record[f] for f in fields}


def _force_ask(record: Record) -> Record:
    """The DCG generations: both questions and the User Model reply, not the judge's decisions."""
    return {
        "case_number": record["case_number"],
        "history": record["history"],
        "rounds": [{k: v for k, v in r.items() if k != "decision"} for r in record["rounds"]],
    }


# task -> which part of the record its generation file (`tasks.Task.generation`) holds.
_GENERATED: dict[str, Callable[[Record], Record]] = {
    "lca": _pick("case_number", "history_type", "history", "response"),
    "ljp_interaction": _pick("case_number", "history", "continued_history", "rounds", "stop_reason", "final_response"),
    "dcg": _force_ask,
    "ljp_direct": _pick("case_number", "history", "response"),
    "ljp_gold": _pick("case_number", "history", "response"),
}


def _jsonl(records: list[Record]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def _write(path: Path, data: bytes, out_dir: Path) -> Path:
    try:
        write_atomic(path, data)
    except OSError as exc:
        raise LexpilotError(
            f"cannot write {path} ({exc.strerror or exc}); check that --out {out_dir} is a writable folder"
        ) from None
    return path


def export_seed(ws: Workspace, out_dir: Path, run_id: str | None = None, model: str | None = None) -> list[Path]:
    """Write the seed's result files for every matching run under `out_dir`; returns the files written.

    Raises `LexpilotError` naming the filters when no run matches them.
    """
    out_dir = Path(out_dir)
    db = ws.store.conn
    written: list[Path] = []
    for run in load_run_results(ws, run_id, model):
        row = db.execute(
            "SELECT manifest, dataset FROM runs WHERE run_id = ? AND model = ?", (run.run_id, run.model)
        ).fetchone()
        manifest = json.loads(row["manifest"])
        causes = {
            c["case_number"]: json.loads(c["data"])["cause_of_action"]
            for c in db.execute("SELECT case_number, data FROM cases WHERE dataset = ?", (row["dataset"],))
        }
        where = Path(slug(run.run_id)) / slug(run.model)

        text = json.dumps(manifest, ensure_ascii=False, indent=2) + "\n"
        written.append(_write(out_dir / "runs" / where / "manifest.json", text.encode("utf-8"), out_dir))
        for task in TASKS.values():
            if task.name not in run.tasks:
                continue
            records = run.tasks[task.name].records
            folder, gen_name = task.generation
            data = _jsonl([_GENERATED[task.name](record) for _, record in records])
            written.append(_write(out_dir / folder / where / gen_name, data, out_dir))
            scored = [
                {**record, "cause_of_action": causes[str(record["case_number"])], "cause_class": cause_class}
                for cause_class, record in records
            ]
            written.append(_write(out_dir / "eval_results" / where / task.eval_file, _jsonl(scored), out_dir))
    return written
