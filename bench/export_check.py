"""A compacted workspace against an uncompressed copy of it: exports byte for byte, doctor, hashes."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any


def check_export(ws_root: Path, scratch: Path) -> dict[str, Any]:
    """Export the finished (compacted) workspace and an uncompressed copy of it, and compare them.

    The copy holds the same database (by SQLite's backup, then its record of compaction cleared),
    the same manifests, and every compacted file expanded back to its plain path: the workspace as
    `--no-compact` would have left it. Both layouts of `export` must be byte-identical and `doctor`
    clean on both; every compacted file is also checked against its recorded hash
    (`compaction.verify`, which reads them all).
    """
    import gzip
    import sqlite3

    from lexpilot_batch import doctor
    from lexpilot_batch.report.exports.cases import export_cases
    from lexpilot_batch.report.exports.seed import export_seed
    from lexpilot_batch.report.results import load_run_results
    from lexpilot_batch.state import compaction
    from lexpilot_batch.state.workspace import Workspace

    start = time.perf_counter()
    copy = scratch / "uncompressed"
    (copy / "state").mkdir(parents=True)
    src = sqlite3.connect(ws_root / "state" / "lexpilot.sqlite3")
    dst = sqlite3.connect(copy / "state" / "lexpilot.sqlite3")
    try:
        src.backup(dst)
        dst.execute("DELETE FROM compacted")
        dst.commit()
    finally:
        src.close()
        dst.close()
    shutil.copytree(ws_root / "runs", copy / "runs")
    expanded = 0
    for folder in ("requests", "responses"):
        for path in (ws_root / folder).rglob("*"):
            if not path.is_file():
                continue
            target = copy / path.relative_to(ws_root)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.name.endswith(compaction.SUFFIX):
                with (
                    gzip.open(path, "rb") as fh,
                    open(target.with_name(path.name[: -len(compaction.SUFFIX)]), "wb") as out,
                ):
                    shutil.copyfileobj(fh, out, 1 << 20)
                expanded += 1
            else:
                shutil.copyfile(path, target)

    def read(root: Path) -> tuple[list[str], dict[str, str], list[str]]:
        out = scratch / f"export-{root.name}"
        with Workspace(root) as ws:
            findings = [f"{f.severity} {f.kind}: {f.detail}" for f in doctor.diagnose(ws)]
            export_seed(ws, out / "seed")
            export_cases(load_run_results(ws), out / "cases")
            problems = compaction.verify(ws)
        digests = {
            p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*"))
            if p.is_file()
        }
        return findings, digests, problems

    packed = read(ws_root)
    plain = read(copy)
    shutil.rmtree(scratch, ignore_errors=True)
    result = {
        "export_identical": packed[1] == plain[1],
        "exported_files": len(packed[1]),
        "export_digest": hashlib.sha256(json.dumps(packed[1], sort_keys=True).encode()).hexdigest()[:16],
        "doctor": {"compacted": packed[0], "uncompressed": plain[0]},
        "verify_problems": packed[2],
        "files_expanded": expanded,
        "seconds": round(time.perf_counter() - start, 1),
    }
    return result
