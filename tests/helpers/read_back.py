"""Everything a user reads of a workspace, gathered to be compared: what doctor finds, the records,
both exports, the report and every saved file's bytes (a compacted workspace must read the same)."""

from __future__ import annotations

from pathlib import Path

from lexpilot_batch import doctor
from lexpilot_batch.report.exports.cases import export_cases
from lexpilot_batch.report.exports.seed import export_seed
from lexpilot_batch.report.produce import ReportOptions, produce_report
from lexpilot_batch.report.results import load_run_results
from lexpilot_batch.state import compaction
from lexpilot_batch.state.workspace import Workspace
from tests.helpers.engine import records


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def read_back(ws: Workspace, out: Path) -> dict:
    """What a user reads of a workspace: doctor, records, both exports, the report, the saved files."""
    export_seed(ws, out / "seed")
    export_cases(load_run_results(ws), out / "cases")
    report = produce_report(ws.root, ReportOptions(format="json")).text
    kept = [r[0] for r in ws.store.conn.execute("SELECT path FROM files ORDER BY pk")]
    return {
        "findings": doctor.diagnose(ws),
        "records": records(ws),
        "exported": files_under(out),
        "report": report,
        "request_files": {rel: compaction.read_saved(ws.path(rel)) for rel in kept},
        "saved": {p.relative_to(ws.root).as_posix(): compaction.read_saved(p) for p in compaction.saved_files(ws.root)},
    }
